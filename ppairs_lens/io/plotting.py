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
    """A figure's caption (model, data, settings), written beside it as ``<name>.md``, never
    drawn into the image (a journal sets its own; text inside an image cannot be edited)."""
    setattr(fig, CAPTION_ATTR, " ".join(text.split()))


def figure_caption(fig) -> str | None:
    return getattr(fig, CAPTION_ATTR, None)


def wrapped(text: str, width: int) -> str:
    """``text`` in lines of at most ``width`` characters, broken at ``-``, ``_`` and ``/`` too
    (file-derived names have no spaces)."""
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
    """One legend for the whole figure, below every axes, so no legend covers data. Call
    after the axes are drawn, before saving."""
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
