"""No item leaks between train and test: every built-in and every loader, split the way the
analyses split (``split_by="auto"``), keeps each item, group and template on one side, and a
validation split of the training pairs does too. A lookup of items' training win rates, with
no model, scores at chance on the held-out pairs (the leak of issue #19 scored 0.778)."""

from __future__ import annotations

import csv
import io
import json
import warnings
from collections import defaultdict
from collections.abc import Hashable
from pathlib import Path

import numpy as np
import pytest

from ppairs_lens.activations.pipeline import pair_info
from ppairs_lens.data import BUILTIN, builtin_dataset, load_dataset
from ppairs_lens.data.reading import DataWarning
from ppairs_lens.data.records import ITEM1, ITEM2, TIE, Comparison, Dataset
from ppairs_lens.evaluation.splits import leaked_items
from ppairs_lens.evaluation.store_split import (
    pair_groups,
    pair_items,
    split_pairs,
    validation_split,
)

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"
TEST_SIZE = 0.3


def _item_keys(ds: Dataset, records: list, global_ids: bool) -> list[tuple[Hashable, Hashable]]:
    """What must not be on both sides, per pair. Comparisons: their two items (item ids are
    global for built-ins, where a template id names the same template in every passage;
    scoped to the context in files, where SummEval's "S0" is a system, not one summary).
    Statements: their subject (group), and the statement text itself."""
    if ds.kind == "statement":
        return [(r.group_id if r.group_id is not None else r.pair_id, r.statement)
                for r in records]
    scope = (lambda r: None) if global_ids else (lambda r: r.context_id)
    return [((scope(r), r.item1_id), (scope(r), r.item2_id)) for r in records]


def check_leak_free(ds: Dataset, *, global_ids: bool = False, seed: int = 0) -> str:
    """Split ``ds`` as ``split_store`` does (ties dropped, ``split_by="auto"``) and assert that
    no group and no item key is on both sides, in the test split and in a validation split of
    train. Returns the mode the split used."""
    rows = pair_info(ds)
    keep = [i for i, r in enumerate(rows) if r.label != TIE]
    rows, records = [rows[i] for i in keep], [ds.records[i] for i in keep]
    train, test, used = split_pairs(rows, test_size=TEST_SIZE, split_by="auto", seed=seed)
    assert len(train) and len(test) and not set(train) & set(test)
    groups, keys = pair_groups(rows), _item_keys(ds, records, global_ids)
    assert not {groups[i] for i in train} & {groups[i] for i in test}, ds.name
    assert not leaked_items(keys, train, test), (ds.name, sorted(leaked_items(keys, train,
                                                                              test))[:5])
    items = pair_items(rows)
    fit, val = validation_split([groups[i] for i in train],
                                None if items is None else [items[i] for i in train],
                                seed=seed, by=used)
    train_keys = [keys[i] for i in train]
    assert not leaked_items(train_keys, fit, val), ds.name
    assert not {groups[train[i]] for i in fit} & {groups[train[i]] for i in val}
    return used


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_builtins_are_leak_free(name: str, seed: int) -> None:
    ds = builtin_dataset(name, seed=seed)
    assert check_leak_free(ds, global_ids=True, seed=seed) == "context"


@pytest.mark.parametrize("seed", [0, 1])
def test_story_sentiment_holds_out_templates(seed: int) -> None:
    ds = builtin_dataset("story_sentiment", seed=seed)
    rows = pair_info(ds)
    train, test, _ = split_pairs(rows, test_size=TEST_SIZE, seed=seed)
    templates = [{r.item1_id, r.item2_id} for r in ds.records]
    seen = set().union(*(templates[i] for i in train))
    assert not seen & set().union(*(templates[i] for i in test))
    assert len({rows[i].context_id for i in test}) >= 20     # passages to rank on


def _win_rate_accuracy(ds: Dataset, split_by: str, seed: int) -> float:
    """Accuracy on the test pairs of a no-model lookup: the item with the higher win rate in
    the training pairs wins (unseen items and ties: item 1)."""
    rows = pair_info(ds)
    train, test, _ = split_pairs(rows, test_size=TEST_SIZE, split_by=split_by, seed=seed)
    wins: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for i in train:
        r: Comparison = ds.records[i]
        for item, won in ((r.item1_id, r.label == ITEM1), (r.item2_id, r.label == ITEM2)):
            wins[item][0] += won
            wins[item][1] += 1

    def rate(item: str) -> float:
        w, n = wins.get(item, (0, 0))
        return w / n if n else 0.5

    right = [(ITEM2 if rate(ds.records[i].item2_id) > rate(ds.records[i].item1_id) else ITEM1)
             == ds.records[i].label for i in test]
    return float(np.mean(right))


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("name", ["alphabetical", "larger_number", "story_sentiment"])
def test_memorising_items_scores_chance(name: str, seed: int) -> None:
    ds = builtin_dataset(name, seed=seed)
    assert _win_rate_accuracy(ds, "auto", seed) <= 0.6
    if name != "larger_number":  # a pair split lets words / templates recur: the check can fail
        assert _win_rate_accuracy(ds, "pair", seed) > 0.65


# --------------------------------------------------------------------------------------------
# loaders on small synthetic files


def _table(rows: list[list], delimiter: str = ",") -> str:
    buf = io.StringIO()
    csv.writer(buf, delimiter=delimiter, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def _synthetic_files(tmp: Path) -> dict[str, tuple[Path, dict]]:
    rng = np.random.default_rng(0)
    summ = [{"article_id": f"A{a}", "summary_id": f"S{s}", "article": f"Article {a}.",
             "summary": f"Summary {s} of {a}.", "coherence": float(rng.integers(1, 6))}
            for a in range(12) for s in range(4)]
    pairwise = [{"input": f"Task {k % 7}.", "output_1": f"Answer {k}a.",
                 "output_2": f"Answer {k}b.", "label": 1 + k % 2} for k in range(24)]
    cloze = [["InputStoryid", *[f"InputSentence{i}" for i in range(1, 5)],
              "RandomFifthSentenceQuiz1", "RandomFifthSentenceQuiz2", "AnswerRightEnding"]]
    cloze += [[f"st{k}", "A.", "B.", "C.", f"D{k}.", f"Good {k}.", f"Bad {k}.", 1 + k % 2]
              for k in range(12)]
    mctaco = [[f"Sentence {s}.", f"Question {q}?", f"{k} hours", "yes" if k < 2 else "no",
               "Event Duration"] for s in range(8) for q in range(3) for k in range(4)]
    cities = [["statement", "label", "city", "country"]]
    cities += [[f"The city of C{c} is in {land}.", int(land == f"L{c}"), f"C{c}", land]
               for c in range(15) for land in (f"L{c}", f"L{c + 1}")]
    larger = [["statement", "label", "n1", "n2"]]
    larger += [[f"{a} is larger than {b}.", int(a > b), a, b]
               for a in range(50, 60) for b in range(50, 60) if a != b]
    plain = [["statement", "label"]] + [[f"Word {k} means {k % 3}.", k % 2] for k in range(20)]
    plain += [["Word 0 means 0.", 0], ["Word 1 means 1.", 1]]           # repeats
    climatex = [["statement_idx", "report", "page_num", "sent_num", "statement", "confidence",
                 "score", "split"]]
    levels = ["low", "medium", "high", "very high"]
    climatex += [[k, "AR6", 1, k, f"Statement {k}.", levels[k % 4], k % 4, "train"]
                 for k in range(40)]
    return {
        "scored-items": (_write(tmp / "summ.jsonl", "".join(json.dumps(r) + "\n"
                                                            for r in summ)),
                         {"aspect": "coherence"}),
        "pairwise": (_write(tmp / "llmbar/dataset.json", json.dumps(pairwise)), {}),
        "story-cloze": (_write(tmp / "cloze.csv", _table(cloze)), {}),
        "mctaco": (_write(tmp / "dev.tsv", _table(mctaco, "\t")), {}),
        "true-false cities": (_write(tmp / "cities.csv", _table(cities)), {}),
        "true-false larger_than": (_write(tmp / "larger_than.csv", _table(larger)), {}),
        "true-false plain": (_write(tmp / "plain.csv", _table(plain)), {}),
        "climatex": (_write(tmp / "ipcc.tsv", _table(climatex, "\t")), {}),
    }


def _load(path: Path, kw: dict) -> Dataset:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        return load_dataset(path, **kw)


@pytest.mark.parametrize("fmt", ["scored-items", "pairwise", "story-cloze", "mctaco",
                                 "true-false cities", "true-false larger_than",
                                 "true-false plain", "climatex"])
def test_loaders_are_leak_free(tmp_path: Path, fmt: str) -> None:
    path, kw = _synthetic_files(tmp_path)[fmt]
    ds = _load(path, kw)
    used = check_leak_free(ds)
    expected = {"story-cloze": "pair", "climatex": "item"}.get(fmt, "context")
    assert used == expected, (fmt, used)


def test_true_false_groups_by_subject(tmp_path: Path) -> None:
    files = _synthetic_files(tmp_path)
    cities = _load(*files["true-false cities"])
    assert cities.extra["group_by"] == "city" and len(set(cities.group_ids())) == 15
    assert _load(*files["true-false larger_than"]).extra["group_by"] == "n1"
    plain = _load(*files["true-false plain"])
    assert plain.extra["group_by"] == "repeated statements"
    assert plain.records[0].group_id == plain.records[-2].group_id is not None
    assert plain.records[2].group_id is None


REAL = [("summeval/summeval.jsonl", {"aspect": "coherence"}),
        ("hanna/hanna.jsonl", {"aspect": "surprise"}),
        ("llmbar/LLMBar_Natural/dataset.json", {}),
        ("llmbar/Processed_MT-Bench/dataset.json", {}),
        ("story_cloze/cloze_test_val_spring2016.csv", {}),
        ("mctaco/dev_3783.tsv", {}),
        ("geometry_of_truth/cities.csv", {}),
        ("geometry_of_truth/larger_than.csv", {}),
        ("geometry_of_truth/sp_en_trans.csv", {}),
        ("climatex/ipcc_statements_dataset.tsv", {})]


@pytest.mark.shared_data
@pytest.mark.parametrize(("rel", "kw"), REAL, ids=[r for r, _ in REAL])
def test_real_datasets_are_leak_free(rel: str, kw: dict) -> None:
    if not SHARED.is_dir():
        pytest.skip(f"{SHARED} not present: the real-data leak check needs ../shared/datasets")
    check_leak_free(_load(SHARED / rel, kw))
