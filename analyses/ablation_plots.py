"""Figure and printed summary of the directional-ablation analysis (:mod:`analyses.ablation`).

The rows of ``ablation.csv`` are labelled by the condition names of
:mod:`ppairs_lens.evaluation.answer_change`. :func:`read_rows` reads a written table back, so
the figure can be redrawn without the model.
"""

from __future__ import annotations

import csv
from pathlib import Path

from ppairs_lens.evaluation.answer_change import (
    BASELINE,
    CHANGE_METRICS,
    CONTROL,
    RANDOM_NULL,
)
from ppairs_lens.io.plotting import caption, color, label, style

__all__ = ["plot_ablation", "read_rows", "summary_lines"]


def _short(cond: str) -> str:
    if cond == RANDOM_NULL:
        return "random directions (null)"
    if cond == CONTROL:
        return "positive control:\nunembedding diff @ ln_final"
    return label(cond)


_XLABEL = {
    "accuracy": "Δ accuracy (ablated − baseline)",
    "mean_abs_dp": "mean |p − p_baseline|",
    "flip_rate": "fraction of answers flipped",
}


def plot_ablation(rows: list[dict], cfg, model: str):
    """Per dataset x plotted metric (rows) and preset (columns): the change of the metric
    under each condition with its paired CI, the random-direction band, the positive control
    (``cfg``: the run's ``AblationConfig``)."""
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    metrics = [m for m in cfg.plot_metrics if any(r["metric"] == m for r in rows)]
    presets = [p for p in cfg.presets if any(r["preset"] == p for r in rows)]
    conds = [c for c in (*cfg.kinds, RANDOM_NULL, CONTROL)
             if any(r["condition"] == c for r in rows)]
    panels = [(ds, m) for ds in datasets for m in metrics]
    with style():
        fig, axes = plt.subplots(len(panels), len(presets),
                                 figsize=(4.3 * len(presets), (0.42 * len(conds) + 1.1)
                                          * len(panels) + 0.3),
                                 squeeze=False, sharey=True)
        for i, (ds, metric) in enumerate(panels):
            sel = {(r["preset"], r["condition"]): r for r in rows
                   if r["dataset"] == ds and r["metric"] == metric}
            for j, preset in enumerate(presets):
                ax = axes[i, j]
                base = sel.get((preset, BASELINE))
                null = sel.get((preset, RANDOM_NULL))
                if null:
                    ax.axvspan(null["lo"], null["hi"], color=color("random"), alpha=0.25, lw=0,
                               label="random directions: 2.5-97.5%")
                    rs = [r["delta"] for r in rows if r["dataset"] == ds and r["preset"] == preset
                          and r["metric"] == metric and r["kind"] == "random"]
                    yk = conds.index(RANDOM_NULL)
                    ax.scatter(rs, [yk] * len(rs), s=9, color=color("random"), zorder=3,
                               edgecolor="k", linewidth=0.3)
                ax.axvline(0, color="k", lw=0.7)
                if base and metric in ("accuracy", "auroc"):
                    ax.axvline(0.5 - base["value"], color="k", ls=":", lw=0.9,
                               label="chance (Δ to 0.5)")
                for yk, c in enumerate(conds):
                    r = sel.get((preset, c))
                    if not r:
                        continue
                    err = [[max(r["delta"] - r["lo"], 0)], [max(r["hi"] - r["delta"], 0)]]
                    if c == CONTROL:
                        ax.errorbar(r["delta"], yk, xerr=err, fmt="*", ms=10, color="#000000",
                                    mfc="#ff7f0e", capsize=2, zorder=4)
                        if metric not in CHANGE_METRICS:
                            dev = next(
                                (q["value"] for q in rows if q["dataset"] == ds
                                 and q["preset"] == preset and q["condition"] == CONTROL
                                 and q["metric"] == "mean_abs_dev"), float("nan"))
                            ax.annotate(f"mean |p−0.5| = {dev:.1e}", (r["delta"], yk),
                                        xytext=(0, 7), textcoords="offset points", fontsize=7,
                                        ha="center")
                    elif c == RANDOM_NULL:
                        ax.errorbar(r["delta"], yk, fmt="|", ms=12, color="#555555", zorder=4)
                    else:
                        ax.errorbar(r["delta"], yk, xerr=err, fmt="o", ms=5, color=color(c),
                                    capsize=2, zorder=4)
                ax.set_yticks(range(len(conds)), [_short(c) for c in conds])
                ax.set_ylim(len(conds) - 0.5, -0.5)  # first condition on top
                if metric in ("accuracy", "auroc"):
                    lo_x, hi_x = ax.get_xlim()
                    ax.set_xlim(min(lo_x, -0.05), max(hi_x, 0.05))
                ax.set_xlabel(_XLABEL.get(metric, f"Δ {metric} (ablated − baseline)"))
                btxt = ""
                if base and metric not in CHANGE_METRICS:
                    btxt = (f"\nbaseline {metric} {base['value']:.3f} [{base['value_lo']:.3f}, "
                            f"{base['value_hi']:.3f}], n={int(base['n'])}")
                ax.set_title(f"{ds} · preset '{preset}'{btxt}")
        handles, labels_ = axes[0, 0].get_legend_handles_labels()
        fig.suptitle(f"Directional ablation of probe directions — {model}", y=1.05)
        fig.tight_layout()
        if handles:
            fig.legend(handles, labels_, loc="lower center", ncol=len(handles), frameon=False,
                       bbox_to_anchor=(0.5, 0.985))
        layer = next((r["hook"] for r in rows if r["hook"]), "")
        caption(fig, f"Calibrated zero-shot evaluator on held-out pairs; directions fitted on "
                     f"the train split at {layer or 'read-out L-1'}; ablated at "
                     f"{'every position' if cfg.positions == 'all' else 'the read-out token'}. "
                     f"'paper': every resid_post + ln_final; 'full': embedding, every attn/MLP "
                     f"output + ln_final. Bars: 95% paired bootstrap CIs by context "
                     f"({cfg.n_boot} resamples). Band: 2.5-97.5% of {cfg.n_random} random unit "
                     f"directions (dots). Positive control (star): the two choice tokens' "
                     f"unembedding difference removed after the final norm only (same run in "
                     f"both columns). Ties (|p−0.5| <= {cfg.tie_tol:g}) score half.")
    return fig


def summary_lines(rows: list[dict], metric: str = "accuracy") -> list[str]:
    """One line per (dataset, preset, condition) of ``metric``: value and delta with CI."""
    lines = []
    for r in rows:
        if r["metric"] != metric or r["kind"] == "random":
            continue
        rng = "range" if r["condition"] == RANDOM_NULL else "CI"
        lines.append(f"{r['dataset']:24s} {r['preset']:6s} {r['condition']:12s} "
                     f"{metric} {r['value']:.3f}  delta {r['delta']:+.3f} "
                     f"{rng} [{r['lo']:+.3f}, {r['hi']:+.3f}]")
    return lines


def read_rows(path: str | Path) -> list[dict]:
    """Rows of a written ``ablation.csv``, numbers as numbers (empty cells as NaN)."""
    text_cols = {"dataset", "preset", "condition", "metric", "kind", "hooks", "hook",
                 "positions", "mode", "probe_kind"}
    rows = []
    with open(path, newline="", encoding="utf-8") as f:
        for r in csv.DictReader(f):
            rows.append({k: v if k in text_cols else (float(v) if v != "" else float("nan"))
                         for k, v in r.items()})
    return rows
