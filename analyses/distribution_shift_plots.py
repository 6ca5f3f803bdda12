"""The shift figure: each predictor's held-out accuracy in distribution and on every shifted
set, with 95% CIs; one legend below the panel, the caption beside the figure."""

from __future__ import annotations

from collections.abc import Sequence

from ppairs_lens.evaluation.predictors import PREDICTORS, short
from ppairs_lens.io.plotting import caption, legend_outside, style, wrapped

#: Marker colours of the sets, in order (in distribution first).
SET_COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2")


def _about(keys) -> str:
    """What each predictor shown is, in the predictors' one list's words."""
    return "; ".join(f"{short(k)}: {PREDICTORS[k].about}" for k in keys if k in PREDICTORS
                     and PREDICTORS[k].family != "probe")


def plot_shift(rows: Sequence, model: str, cfg, notes: dict[str, str]):
    """Each predictor's accuracy on each set; ``rows``: one run's ``ShiftRow`` records."""
    import matplotlib.pyplot as plt

    methods = list(dict.fromkeys(r.method for r in rows))
    sets = list(dict.fromkeys((r.dataset, r.role) for r in rows))
    with style():
        fig, ax = plt.subplots(figsize=(max(3.6, 0.75 * len(methods) + 1.0), 2.9))
        width = 0.8 / max(len(sets), 1)
        fewer, zero_width = [], False
        for j, (name, role) in enumerate(sets):
            rs = {r.method: r for r in rows if r.dataset == name}
            n_of = {m: r.n for m, r in rs.items()}
            n_set = max(n_of.values(), default=0)
            fewer += [f"{short(m)} on {n} of {n_set} pairs of {name}"
                      for m, n in n_of.items() if n < n_set]
            c = SET_COLORS[j % len(SET_COLORS)]
            for flat in (False, True):     # a zero-width interval: an open marker, no bar
                pts = [(i - 0.4 + width * (j + 0.5), rs[m]) for i, m in enumerate(methods)
                       if m in rs and (rs[m].hi <= rs[m].lo) == flat]
                if not pts:
                    continue
                zero_width |= flat
                ys = [r for _, r in pts]
                ax.errorbar([x for x, _ in pts], [r.accuracy for r in ys],
                            yerr=[[r.accuracy - r.lo for r in ys],
                                  [r.hi - r.accuracy for r in ys]],
                            fmt="o", ms=4, lw=1, capsize=2, color=c,
                            mfc="white" if flat else c,
                            label=None if flat else wrapped(f"{name} ({role}, n={n_set})", 60))
        if zero_width:
            ax.plot([], [], marker="o", ms=4, color="k", mfc="white", ls="none",
                    label="zero-width interval (one group, or every resample alike)")
        ax.axhline(0.5, color="k", lw=0.6, alpha=0.5)
        ax.set_xticks(range(len(methods)))
        ax.set_xticklabels([short(m) for m in methods], fontsize=7, rotation=30, ha="right")
        ax.set_ylabel("held-out accuracy")
        ax.set_xlabel("predictor")
        ax.set_title(f"Probes, baselines and prompting under shift\n{model}")
        s = cfg.settings
        caption(fig, f"Trained on the training split of {' + '.join(cfg.train)} (test share "
                     f"{s.test_size}, split {s.split_by}, seed {s.seed}; read-outs chosen on "
                     f"validation); scored on its held-out pairs (in distribution) and on every "
                     f"pair of {', '.join(cfg.test)} (shifted). 95% bootstrap CIs over leak "
                     f"groups ({s.n_boot} resamples). Baselines fitted on the same training "
                     f"pairs, judges prompted: {_about(methods)}"
                     + "".join(f"; {f} on at most {n} pairs of each set (whole contexts, "
                               "seeded)" for f, n in cfg.judge_max_pairs.items()) + "."
                     + (f" Scored on fewer pairs: {'; '.join(fewer)}." if fewer else "")
                     + "".join(f" Not shown: {k} ({v})." for k, v in notes.items()))
        legend_outside(fig, [ax], ncol=1)
    return fig
