"""CaTeRS stories -> "which statement comes first" comparisons (ppairs_lens.data.caters)."""

from __future__ import annotations

from collections import Counter

import pytest

from ppairs_lens.data.caters import (CATERS_SPLITS, caters_comparisons, load_caters,
                                     read_caters_ann, read_caters_stories)
from ppairs_lens.data.records import ITEM1
from ppairs_lens.errors import DataError


def story(k: int) -> list[str]:
    return [f"Story {k} event {i}." for i in range(1, 6)]


def write_stories(path, stories, *, trailing: str = "***\n"):
    text = "".join("\n".join(s) + "\n***\n" for s in stories[:-1])
    path.write_text(text + "\n".join(stories[-1]) + "\n" + trailing, encoding="utf-8")
    return path


@pytest.fixture
def one_file(tmp_path):
    return write_stories(tmp_path / "batch_1.txt", [story(k) for k in range(1, 7)])


def position(rec, side: int) -> int:
    """1-based sentence index from the item id '<file>/<k>/s<i>'."""
    return int((rec.item1_id if side == 1 else rec.item2_id).rsplit("/s", 1)[1])


def test_parses_stories_with_blank_lines_and_trailing_whitespace(tmp_path):
    f = tmp_path / "messy.txt"
    f.write_text("\ufeff\n" + "\n".join(f"  {s}  " for s in story(1)) + "\n***   \n\n\n"
                 + "\r\n".join(story(2)) + "\r\n\n", encoding="utf-8")  # no final ***
    stories = read_caters_stories(f)
    assert [s.story_id for s in stories] == ["messy/1", "messy/2"]
    assert stories[0].sentences == tuple(story(1)) and stories[1].sentences == tuple(story(2))
    assert stories[0].line == 2


def test_pairs_labels_and_ids(one_file):
    ds = load_caters(one_file)
    assert ds.name == "caters" and ds.kind == "comparison" and ds.item_name == "statement"
    assert len(ds) == 6 * 10 and ds.extra["n_stories"] == 6
    for r in ds.records:
        p1, p2 = position(r, 1), position(r, 2)
        assert r.label == (ITEM1 if p1 < p2 else 2)  # the story's own order is the label
        assert r.item1 == f"Story {r.group_id.split('/')[1]} event {p1}."
        assert (r.score1 > r.score2) == (r.label == ITEM1)
        assert r.context_id == r.group_id
        # every sentence is in the context, not in its true order
        lines = r.context.split("\n")
        assert sorted(lines) == sorted(f"- {s}" for s in story(int(r.group_id.split("/")[1])))
        assert lines != [f"- {s}" for s in story(int(r.group_id.split("/")[1]))]
    assert len({r.pair_id for r in ds.records}) == len(ds)
    # one id per sentence: the same sentence text always has the same id
    ids = {}
    for r in ds.records:
        for text, item_id in ((r.item1, r.item1_id), (r.item2, r.item2_id)):
            assert ids.setdefault(item_id, text) == text
    assert len(ids) == 30


def test_labels_are_balanced_within_each_story(one_file):
    for pairs, per_story in (("all", 10), ("adjacent", 4)):
        ds = load_caters(one_file, pairs=pairs)
        counts = Counter((r.group_id, r.label) for r in ds.records)
        assert all(counts[(g, 1)] == counts[(g, 2)] == per_story // 2
                   for g in {r.group_id for r in ds.records})
    adjacent = load_caters(one_file, pairs="adjacent")
    assert all(abs(position(r, 1) - position(r, 2)) == 1 for r in adjacent.records)


def test_limits_pairs_and_stories(one_file):
    ds = load_caters(one_file, max_pairs_per_story=3, max_stories=4, seed=1)
    assert ds.extra["n_stories"] == 4 and len(ds) == 12
    assert Counter(r.group_id for r in ds.records) == Counter(
        {g: 3 for g in {r.group_id for r in ds.records}})
    with pytest.raises(DataError, match="max_stories"):
        load_caters(one_file, max_stories=0)
    with pytest.raises(DataError, match="pairs must be"):
        load_caters(one_file, pairs="every")


def test_no_story_on_both_sides_of_a_split(one_file):
    from ppairs_lens.evaluation.splits import train_test_split_pairs

    ds = load_caters(one_file)
    groups = ds.group_ids()
    assert groups == [r.pair_id.split(":")[0] for r in ds.records]
    items = [(r.item1_id, r.item2_id) for r in ds.records]
    train, test = train_test_split_pairs(groups, items, test_size=0.5, seed=0)  # "auto"
    assert len(train) + len(test) == len(ds) and len(train) and len(test)
    assert not {groups[i] for i in train} & {groups[i] for i in test}


def test_seeded_and_deterministic(one_file):
    a, b = load_caters(one_file, seed=3), load_caters(one_file, seed=3)
    assert a.fingerprint() == b.fingerprint()
    assert load_caters(one_file, seed=4).fingerprint() != a.fingerprint()
    # a story's pairs do not depend on which other stories are loaded
    alone = caters_comparisons(read_caters_stories(one_file)[2:3], seed=3)
    assert alone == [r for r in a.records if r.group_id == "batch_1/3"]


def test_malformed_story_names_file_and_story(tmp_path):
    bad = [story(1), story(2)[:4], story(3)]
    f = write_stories(tmp_path / "part_9.txt", bad)
    with pytest.raises(DataError) as e:
        load_caters(f)
    msg = str(e.value)
    assert str(f) in msg and "story 2" in msg and "4 sentences" in msg and "row 7" in msg
    empty = tmp_path / "empty.txt"
    empty.write_text("\n***\n", encoding="utf-8")
    with pytest.raises(DataError, match="no stories"):
        read_caters_stories(empty)
    with pytest.raises(DataError, match="cannot read"):
        read_caters_stories(tmp_path / "missing.txt")


def test_folders_lists_and_splits(tmp_path):
    root = tmp_path / "caters"
    for split, stem in (("train", "batch_1"), ("dev", "part_11"), ("test", "test_15Oct")):
        (root / CATERS_SPLITS[split]).mkdir(parents=True)
        write_stories(root / CATERS_SPLITS[split] / f"{stem}.txt", [story(1), story(2)])
    dev = load_caters(tmp_path, split="dev")  # the data folder above caters/ works too
    assert dev.name == "caters-dev" and {r.group_id for r in dev.records} == {
        "part_11/1", "part_11/2"}
    assert len(load_caters(root / CATERS_SPLITS["train"])) == 20
    both = load_caters([root / CATERS_SPLITS[s] / f"{n}.txt"
                        for s, n in (("train", "batch_1"), ("test", "test_15Oct"))])
    assert both.extra["n_stories"] == 4
    with pytest.raises(DataError, match="unknown CaTeRS split"):
        load_caters(root, split="val")
    twin = tmp_path / "other" / "batch_1.txt"
    twin.parent.mkdir()
    write_stories(twin, [story(9)])
    with pytest.raises(DataError, match="same ids"):
        load_caters([root / CATERS_SPLITS["train"] / "batch_1.txt", twin])


def test_ann_events_and_relations(tmp_path):
    f = tmp_path / "batch_1.ann"
    f.write_text("T1\tEvent 10 17\twalking\nT2\tEvent 20 23;30 34\twas awe\n"
                 "R1\tBEFORE Arg1:T1 Arg2:T2\t\n", encoding="utf-8")
    ann = read_caters_ann(f)
    assert ann.events == {"T1": (((10, 17),), "walking"), "T2": (((20, 23), (30, 34)), "was awe")}
    assert ann.relations == [("R1", "BEFORE", "T1", "T2")]
    f.write_text("T1\tEvent ten 17\twalking\n", encoding="utf-8")
    with pytest.raises(DataError, match="row 1"):
        read_caters_ann(f)


@pytest.mark.shared_data
def test_real_splits(shared_datasets):
    if not (shared_datasets / "caters").is_dir():
        pytest.skip("no caters folder in the shared datasets")
    sizes = {}
    for split in CATERS_SPLITS:
        ds = load_caters(shared_datasets, split=split)
        sizes[split] = ds.extra["n_stories"]
        assert len(ds) == 10 * sizes[split] and Counter(ds.labels()) == {1: len(ds) // 2,
                                                                        2: len(ds) // 2}
    assert sizes == {"train": 200, "dev": 60, "test": 20}
    # the event offsets of the .ann files point into the .txt, as read_caters_ann says
    txt = shared_datasets / "caters" / CATERS_SPLITS["test"] / "test_15Oct.txt"
    text = txt.read_text(encoding="utf-8")
    ann = read_caters_ann(txt.with_suffix(".ann"))
    assert ann.events and ann.relations
    assert all(" ".join(text[s:e] for s, e in spans) == t for spans, t in ann.events.values())
