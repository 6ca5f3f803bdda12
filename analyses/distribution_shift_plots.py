"""The shift figure: each predictor's held-out accuracy in distribution and on every shifted
set, with 95% CIs; one legend below the panel, the caption beside the figure."""

from __future__ import annotations

from ppairs_lens.evaluation.predictors import PREDICTORS, short
from ppairs_lens.io.plotting import caption, legend_outside, style, wrapped

#: Marker colours of the sets, in order (in distribution first).
SET_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2")


def _name(method: str) -> str:
    return short(method)


def _about(keys) -> str:
    """What each predictor shown is, in the predictors' one list's words."""
    return "; ".join(f"{short(k)}: {PREDICTORS[k].about}" for k in keys if k in PREDICTORS
                     and PREDICTORS[k].family != "probe")


def plot_shift(rows: list[dict], model: str, cfg, notes: dict[str, str]):
    import matplotlib.pyplot as plt

    methods = list(dict.fromkeys(r["method"] for r in rows))
    sets = list(dict.fromkeys((r["dataset"], r["role"]) for r in rows))
    with style():
        fig, ax = plt.subplots(figsize=(max(3.6, 0.75 * len(methods) + 1.0), 2.9))
        width = 0.8 / max(len(sets), 1)
        for j, (name, role) in enumerate(sets):
            rs = {r["method"]: r for r in rows if r["dataset"] == name}
            xs = [i - 0.4 + width * (j + 0.5) for i, m in enumerate(methods) if m in rs]
            ys = [rs[m] for m in methods if m in rs]
            ax.errorbar(xs, [r["accuracy"] for r in ys],
                        yerr=[[r["accuracy"] - r["lo"] for r in ys],
                              [r["hi"] - r["accuracy"] for r in ys]],
                        fmt="o", ms=4, lw=1, capsize=2, color=SET_COLORS[j % len(SET_COLORS)],
                        label=wrapped(f"{name} ({role})", 60))
        ax.axhline(0.5, color="k", lw=0.6, alpha=0.5)
        ax.set_xticks(range(len(methods)))
        ax.set_xticklabels([_name(m) for m in methods], fontsize=7, rotation=30, ha="right")
        ax.set_ylabel("accuracy")
        ax.set_title(wrapped(f"Probes, baselines and prompting under shift — {model}", 60))
        s = cfg.settings
        caption(fig, f"Trained on the training split of {' + '.join(cfg.train)} (test share "
                     f"{s.test_size}, split {s.split_by}, seed {s.seed}; read-outs chosen on "
                     f"validation); scored on its held-out pairs (in distribution) and on every "
                     f"pair of {', '.join(cfg.test)} (shifted). 95% bootstrap CIs over leak "
                     f"groups ({s.n_boot} resamples). Baselines fitted on the same training "
                     f"pairs, judges prompted: {_about(methods)}"
                     + "".join(f"; {f} on at most {n} pairs of each set (whole contexts, "
                               "seeded)" for f, n in cfg.judge_max_pairs.items()) + "."
                     + "".join(f" Not shown: {k} ({v})." for k, v in notes.items()))
        legend_outside(fig, [ax], ncol=1)
    return fig
