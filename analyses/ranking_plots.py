"""Figure of the ranking analysis (:mod:`analyses.ranking`): one panel per dataset, one row per
method, mean within-context Spearman with its bootstrap CI over evaluation contexts."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ppairs_lens.io.plotting import caption, style
from ppairs_lens.evaluation.predictors import colour

__all__ = ["plot_ranking"]

_METHOD_COLORS = {"probe": colour("supervised"), "zero_shot": colour("zero_shot"),
                  "direct": "#ff7f0e", "geval": "#9467bd", "length": "#7f7f7f",
                  "memorised": "#8c564b"}


def _family(method: str) -> str:
    return ("probe" if method.startswith("probe") else
            "zero_shot" if method.startswith("zero_shot") else method)


def plot_ranking(rows: Sequence, model: str, caption_text: str):
    """The figure of ``rows`` (:class:`~analyses.ranking.RankingRow` records)."""
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r.dataset for r in rows))
    with style():
        fig, axes = plt.subplots(1, max(len(datasets), 1),
                                 figsize=(6.4 * max(len(datasets), 1), 3.4), squeeze=False)
        for ax, ds in zip(axes.flat, datasets):
            rs = [r for r in rows if r.dataset == ds]
            y = np.arange(len(rs))[::-1]
            for yi, r in zip(y, rs):
                v, lo, hi = r.spearman, r.lo, r.hi
                err = [[max(v - lo, 0) if np.isfinite(lo) else 0],
                       [max(hi - v, 0) if np.isfinite(hi) else 0]]
                ax.errorbar([v], [yi], xerr=err, fmt="o", capsize=3, ms=5,
                            color=_METHOD_COLORS.get(_family(r.method)))
                ax.annotate(f"{r.n_rows} rows", (1.0, yi), xycoords=("axes fraction", "data"),
                            xytext=(3, 0), textcoords="offset points", va="center", fontsize=7,
                            color="#555555")
            ax.set_yticks(y, [r.label for r in rs])
            ax.axvline(0, color="k", lw=0.6, alpha=0.5)
            ax.set_xlim(-1.05, 1.05)
            ax.set_xlabel("Spearman with gold scores (mean over contexts)")
            n_ctx = rs[0].n_contexts if rs else 0
            ax.set_title(f"{ds} ({n_ctx} evaluation contexts)")
        fig.suptitle(f"Ranking items within a context: PPairS vs prompting — {model}", y=1.02)
        caption(fig, caption_text)
        fig.tight_layout()
    return fig
