"""Figure of the steering dose-response (:mod:`analyses.steering`): per dataset, the judge's
mean change in calibrated log-odds against alpha for each probe direction, over the nulls'
2.5-97.5% bands, and its accuracy below."""

from __future__ import annotations

from collections.abc import Sequence

from ppairs_lens.interventions.conditions import MATCHED_NULL, RANDOM_NULL
from ppairs_lens.io.plotting import caption, style
from ppairs_lens.evaluation.predictors import colour, label

__all__ = ["plot_steering"]

_NULL_STYLE = {RANDOM_NULL: ("#7f7f7f", "isotropic random"),
               MATCHED_NULL: ("#17becf", "variance-matched random")}


def _curve(rows: Sequence, cond: str, key: str) -> tuple[list[float], list[float]]:
    pts = sorted((r.alpha, getattr(r, key)) for r in rows if r.condition == cond)
    return [a for a, _ in pts], [v for _, v in pts]


def plot_steering(rows: Sequence, model: str):
    """Delta log-odds over the nulls' bands, and accuracy; a column per dataset. ``rows``: the
    step's ``SteeringRow`` records."""
    import matplotlib.pyplot as plt

    with style():
        datasets = list(dict.fromkeys(r.dataset for r in rows))
        fig, axes = plt.subplots(2, len(datasets), figsize=(4.2 * len(datasets), 6.2),
                                 squeeze=False, sharex=True)
        for c, ds in enumerate(datasets):
            sub = [r for r in rows if r.dataset == ds]
            base = next(r for r in sub if r.kind == "baseline")
            top, bottom = axes[0, c], axes[1, c]
            for null, (col, text) in _NULL_STYLE.items():
                pts = sorted((r.alpha, r.delta_z_lo, r.delta_z_hi, r.accuracy)
                             for r in sub if r.condition == null)
                if pts:
                    xs = [p[0] for p in pts]
                    top.fill_between(xs, [p[1] for p in pts], [p[2] for p in pts], color=col,
                                     alpha=0.25, label=f"{text} (95% band)")
                    bottom.plot(xs, [p[3] for p in pts], color=col, ls="--", label=text)
            for kind in dict.fromkeys(r.condition for r in sub if r.kind == "probe"):
                xs, ys = _curve(sub, kind, "delta_z")
                top.plot([0.0, *xs], [0.0, *ys], marker="o", color=colour(kind), label=label(kind))
                xs, acc = _curve(sub, kind, "accuracy")
                bottom.plot(xs, acc, marker="o", color=colour(kind), label=label(kind))
            bottom.axhline(base.accuracy, color="black", lw=0.8, ls=":", label="unsteered")
            top.axhline(0.0, color="black", lw=0.6)
            top.set_title(f"{ds}\n{base.hook}", fontsize=9)
            top.set_ylabel("mean change in judge log-odds (item 1)")
            bottom.set_ylabel("judge accuracy")
            bottom.set_xlabel(f"alpha (x median read-out norm {base.norm_unit:.3g})")
            bottom.set_ylim(0, 1)
        axes[0, 0].legend(fontsize=7, loc="best")
        axes[1, 0].legend(fontsize=7, loc="best")
        caption(fig, f"{model}: alpha x unit direction added at the read-out token of the chosen "
                     f"read-out; swapped order steered with -alpha; nulls at the same norms")
        fig.tight_layout()
        return fig
