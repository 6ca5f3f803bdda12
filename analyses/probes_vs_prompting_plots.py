"""The figure of probes against prompting and baselines: one panel row per dataset."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from ppairs_lens.io.plotting import caption, style

FAMILY_COLORS = {"probe": "#1f77b4", "judge": "#ff7f0e", "baseline": "#8c8c8c"}


def plot_pvp(rows: Sequence, published: list[dict]):
    """One panel per dataset; ``rows``: the step's ``PvPRow`` records."""
    datasets = list(dict.fromkeys(r.dataset for r in rows))
    order = ("probe", "judge", "baseline")
    methods = list(dict.fromkeys(r.method for r in sorted(
        rows, key=lambda r: order.index(r.family))))
    ypos = {m: len(methods) - 1 - k for k, m in enumerate(methods)}  # one row per method
    with style():
        fig, axes = plt.subplots(1, len(datasets), figsize=(2.2 * len(datasets) + 1, 4.2),
                                 sharey=True, squeeze=False)
        for ax, ds in zip(axes[0], datasets):
            rs = [r for r in rows if r.dataset == ds]
            y = np.array([ypos[r.method] for r in rs])
            v = np.array([r.accuracy for r in rs], float)
            lo = np.array([r.lo for r in rs], float)
            hi = np.array([r.hi for r in rs], float)
            ax.barh(y, v - 0.5, left=0.5, color=[FAMILY_COLORS[r.family] for r in rs])
            ax.errorbar(v, y, xerr=[v - lo, hi - v], fmt="none", ecolor="k", lw=0.8)
            ax.axvline(0.5, color="#999999", lw=0.8, ls="--")
            ax.set_title(ds, fontsize=8)
            ax.set_xlim(0.0, 1.0)
            ax.set_xlabel("held-out accuracy")
        axes[0][0].set_yticks([ypos[m] for m in methods], methods, fontsize=7)
        fig.tight_layout()
        notes = "; ".join(f"{p['source']}: {p['note'] or p['value']}" for p in published
                          if p["dataset"] in ("MT-Bench", "several"))[:600]
        caption(fig, "Blue: probes at the read-out chosen on validation; orange: the prompted "
                "judge in each fair form (paper form, threshold fitted on training labels, "
                "ALLURE demonstrations from training errors); grey: no-model baselines fitted on "
                "train. Same held-out pairs per dataset (ALLURE on a subset of whole contexts), "
                f"95% CIs over leak groups. Published: {notes}")
    return fig
