"""One figure style for every analysis, so paper figures look like one set."""

from __future__ import annotations

from contextlib import contextmanager

import matplotlib

matplotlib.use("Agg")  # figures are files; no display is needed (CI, servers)
import matplotlib.pyplot as plt  # noqa: E402

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


#: The attribute a figure's caption is kept in until it is saved (:func:`caption`).
CAPTION_ATTR = "ppairs_caption"


def caption(fig, text: str) -> None:
    """A figure's caption: model, data and settings, so a figure stands alone. Kept with the
    figure and written beside it as ``<name>.md`` by ``save_figure``, never drawn into the
    image (a journal sets its own caption; text inside the image cannot be edited)."""
    setattr(fig, CAPTION_ATTR, " ".join(text.split()))


def figure_caption(fig) -> str | None:
    """The caption :func:`caption` gave ``fig`` (None: none)."""
    return getattr(fig, CAPTION_ATTR, None)


def wrapped(text: str, width: int) -> str:
    """``text`` broken into lines of at most ``width`` characters (at spaces, ``-``, ``_``
    and ``/`` too: file-derived names have no spaces), so a subplot's title fits its axes."""
    import re

    lines, line = [], ""
    for piece in re.findall(r"[^ _/-]+[ _/-]?|[ _/-]", text):
        if line and len(line) + len(piece.rstrip()) > width:
            lines.append(line.rstrip())
            line = ""
        line += piece
    if line.strip():
        lines.append(line.rstrip())
    return "\n".join(lines)


def legend_outside(fig, axes, *, ncol: int | None = None) -> None:
    """One legend for the whole figure, below every axes (handles deduplicated by label), so
    no legend covers data. Call after the axes are drawn, before saving; the figure is laid
    out with the legend's room (``bbox_inches="tight"`` keeps it in the saved file)."""
    seen: dict[str, object] = {}
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(lab, h)
    if not seen:
        return
    fig.tight_layout()
    renderer = fig.canvas.get_renderer()
    to_fig = fig.transFigure.inverted()
    # below the lowest axes' tick labels and axis label, not just its frame
    bottom = min(ax.get_tightbbox(renderer).transformed(to_fig).y0 for ax in axes
                 if ax.get_visible())
    fig.legend(list(seen.values()), list(seen), loc="upper center", frameon=False,
               bbox_to_anchor=(0.5, bottom - 0.01), ncol=ncol or min(3, len(seen)),
               fontsize=7)
