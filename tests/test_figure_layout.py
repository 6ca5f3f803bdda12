"""Figures a paper can take: with two datasets under the names the user gave, the layer
sweep's saved figure has no overlapping text, no legend over the data, and no caption drawn
inside (the caption is written beside it, ``layer_sweep.md``)."""

from __future__ import annotations

import itertools

import pytest
from matplotlib.text import Text

from ppairs_lens.activations.pipeline import ensure_store
from ppairs_lens.data.specs import load_dataset_spec

pytestmark = pytest.mark.usefixtures("one_torch_thread")

NAMES = ("Larger numbers, a long name the user chose for the first panel",
         "Story sentiment (second set)")


def drawn(t: Text) -> bool:
    """Whether ``t`` is drawn: visible, not empty, and a tick label only inside its view."""
    if not (t.get_visible() and t.get_text().strip()):
        return False
    ax = t.axes
    if ax is None:
        return True
    if not ax.get_visible():
        return False
    for axis, lim in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        if t in axis.get_ticklabels():
            pos = t.get_position()[0 if axis is ax.xaxis else 1]
            return min(lim) - 1e-9 <= pos <= max(lim) + 1e-9
    return True


def text_boxes(fig):
    """The window extents of every drawn text of ``fig``, laid out as saved."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [(t.get_text(), t.get_window_extent(renderer)) for t in fig.findobj(Text)
            if drawn(t)]


def overlap(a, b, tol: float = 1.0) -> bool:
    return (min(a.x1, b.x1) - max(a.x0, b.x0) > tol) and (min(a.y1, b.y1) - max(a.y0, b.y0) > tol)


@pytest.fixture(scope="module")
def saved(tiny, tmp_path_factory):
    from analyses.layer_sweep import SweepConfig, run_sweep
    from analyses import layer_sweep_plots
    from ppairs_lens.evaluation.protocol import EvalSettings

    tmp = tmp_path_factory.mktemp("fig")
    specs = [f"larger_number@{NAMES[0]}", f"story_sentiment@{NAMES[1]}"]
    stores = [ensure_store(tiny, load_dataset_spec(s, max_pairs=60), tmp / "stores",
                           progress=False) for s in specs]
    cfg = SweepConfig(stores=[str(s.path) for s in stores], settings=EvalSettings(n_boot=30))
    figs = []
    real = layer_sweep_plots.plot_sweep

    def keep(*a, **k):
        figs.append(real(*a, **k))
        return figs[-1]

    import analyses.layer_sweep as ls
    ls.plot_sweep, before = keep, ls.plot_sweep
    try:
        run_sweep(stores, tmp / "out", cfg)
    finally:
        ls.plot_sweep = before
    return figs[0], tmp / "out"


def test_no_text_overlaps_and_the_legend_is_off_the_data(saved):
    fig, out = saved
    assert (out / "layer_sweep.svg").is_file()   # vector output
    boxes = text_boxes(fig)
    clashes = [(a, b) for (a, ba), (b, bb) in itertools.combinations(boxes, 2)
               if overlap(ba, bb)]
    assert not clashes, clashes[:5]
    renderer = fig.canvas.get_renderer()
    (legend,) = fig.legends
    lb = legend.get_window_extent(renderer)
    for ax in fig.axes:
        if ax.get_visible():
            assert not overlap(lb, ax.get_window_extent(renderer)), "legend over a panel"
            assert ax.get_legend() is None
    # every panel's title fits above its own panel (not over its neighbour's)
    for ax in fig.axes:
        tb = ax.title.get_window_extent(renderer)
        others = [o.get_window_extent(renderer) for o in fig.axes if o is not ax]
        assert not any(overlap(tb, o) for o in others)


def test_the_user_names_are_shown_and_the_caption_is_beside_the_figure(saved):
    fig, out = saved
    svg = (out / "layer_sweep.svg").read_text()
    texts = " ".join(t.get_text() for t in fig.findobj(Text))
    for name in NAMES:
        first_word = name.split()[0]
        assert first_word in svg
        assert " ".join(name.split()) == " ".join(
            next(t.get_text() for t in fig.findobj(Text)
                 if first_word in t.get_text()).split("\n(test")[0].split()), name
    assert "Split used" not in texts and "bootstrap" not in texts   # no caption paragraph
    assert "bootstrap" in (out / "layer_sweep.md").read_text()


def test_a_spec_names_its_dataset_after_the_at_sign(tmp_path):
    from ppairs_lens.data.specs import display_name, spec_format

    assert load_dataset_spec("larger_number@Numbers", max_pairs=10).name == "Numbers"
    assert load_dataset_spec("larger_number", max_pairs=10).name != "Numbers"
    odd = tmp_path / "a@b.json"          # an @ that belongs to an existing file's name
    odd.write_text("[]")
    assert display_name(str(odd)) == (str(odd), None)
    assert display_name(f"{odd}@Mine") == (str(odd), "Mine")
    assert spec_format("larger_number@Numbers") is None


def test_the_legend_names_every_mark(saved):
    """The chosen read-out's dot is in the legend, with every probe, judge and baseline."""
    fig, _ = saved
    (legend,) = fig.legends
    names = {t.get_text() for t in legend.get_texts()}
    assert "read-out chosen on validation" in names
    assert {"supervised (logistic)", "unsupervised (PCA)"} <= names
