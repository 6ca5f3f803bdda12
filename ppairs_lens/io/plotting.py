"""One figure style for every analysis, so paper figures look like one set."""

from __future__ import annotations

from contextlib import contextmanager

import matplotlib

matplotlib.use("Agg")  # figures are files; no display is needed (CI, servers)
import matplotlib.pyplot as plt  # noqa: E402

#: Probe kinds and baselines keep one colour everywhere.
COLORS = {
    "supervised": "#1f77b4",
    "pca": "#d62728",
    "mass_mean": "#2ca02c",
    "ccs": "#ff7f0e",
    "zero_shot": "#7f7f7f",
    "random": "#bcbd22",
}
LABELS = {"supervised": "supervised (logistic)", "pca": "unsupervised (PCA)",
          "mass_mean": "mass-mean", "ccs": "CCS (label-free)",
          "zero_shot": "zero-shot prompt (calibrated)",
          "few_shot": "few-shot prompt (calibrated)", "memorisation": "memorisation (no model)",
          "surface": "surface: length (no model)"}

STYLE = {
    "figure.dpi": 110,
    "font.size": 9,
    "axes.titlesize": 9.5,
    "axes.labelsize": 9,
    "legend.fontsize": 8,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.grid": True,
    "grid.alpha": 0.3,
    "svg.fonttype": "none",
}


@contextmanager
def style():
    """Apply the package style for the figures made inside the block only."""
    with plt.rc_context(STYLE):
        yield


def color(kind: str) -> str:
    return COLORS.get(kind, "#9467bd")


def label(kind: str) -> str:
    return LABELS.get(kind, kind)


def caption(fig, text: str) -> None:
    """A small caption under the axes: model, data and settings, so a figure stands alone."""
    fig.text(0.01, -0.02, text, ha="left", va="top", fontsize=7, color="#444444", wrap=True)
