"""Loaders: well-formed fixtures per format, every malformation named by file/row/field,
property tests over generated bad rows, and (when present) the real datasets."""

from __future__ import annotations

import csv
import io
import json
import tempfile
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ppairs_lens.data.builtin import BUILTIN
from ppairs_lens.data.climatex import load_climatex, read_climatex
from ppairs_lens.data.formats import FORMATS, load_dataset, sniff_format
from ppairs_lens.data.mctaco import load_mctaco
from ppairs_lens.data.pairwise import load_pairwise_json
from ppairs_lens.data.reading import DataWarning
from ppairs_lens.data.records import ITEM1, ITEM2, TIE, ScoredItem
from ppairs_lens.data.scored_items import (comparisons_within_contexts, load_scored_items,
                                           read_scored_items, scored_item_aspects)
from ppairs_lens.data.story_cloze import load_story_cloze
from ppairs_lens.data.true_false import load_true_false_csv
from ppairs_lens.errors import DataError

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"
FAST = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])


# --------------------------------------------------------------------------------------------
# helpers


def write(directory: Path, name: str, content: str | bytes) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def table(rows: list[list[Any]], delimiter: str = ",") -> str:
    buf = io.StringIO()
    csv.writer(buf, delimiter=delimiter, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def tsv(rows: list[list[Any]]) -> str:
    return "".join("\t".join(map(str, r)) + "\n" for r in rows)


def check_where(err: DataError, path: Path, row: int | None, field: str | None) -> None:
    """The error names the file, the 1-based row and the field, in its attributes and text."""
    message = str(err)
    assert err.file == str(path) and str(path) in message
    if row is not None:
        assert err.row == row and f"row {row}" in message
    if field is not None:
        assert err.field == field and f"field '{field}'" in message


def summeval_rows() -> list[dict[str, Any]]:
    """SummEval-shaped: summary ids repeat across articles (S0 in A0 and A1), like the real
    file, so the context id must be found by what it determines, not by repetition alone."""
    return [
        {"article_id": "A0", "summary_id": "S0", "article": "Article zero.", "summary": "a",
         "coherence": 3.0, "fluency": 2.0},
        {"article_id": "A0", "summary_id": "S1", "article": "Article zero.", "summary": "b",
         "coherence": 1.0, "fluency": 4.0},
        {"article_id": "A0", "summary_id": "S2", "article": "Article zero.", "summary": "c",
         "coherence": 3.0, "fluency": 1.0},
        {"article_id": "A1", "summary_id": "S0", "article": "Article one.", "summary": "d",
         "coherence": 2.0, "fluency": 3.0},
        {"article_id": "A1", "summary_id": "S1", "article": "Article one.", "summary": "e",
         "coherence": 4.5, "fluency": 3.0},
    ]


@pytest.fixture
def summeval(tmp_path: Path) -> Path:
    return write(tmp_path, "summ.jsonl", jsonl(summeval_rows()))


# --------------------------------------------------------------------------------------------
# scored items


def test_scored_items_read(summeval: Path) -> None:
    items = read_scored_items(summeval, "coherence")
    assert [(i.context_id, i.item_id, i.text, i.score) for i in items][:2] == [
        ("A0", "S0", "a", 3.0), ("A0", "S1", "b", 1.0)]
    assert items[3].context == "Article one."


def test_scored_items_pairs_in_file_order_without_swap(summeval: Path) -> None:
    ds = load_scored_items(summeval, "coherence", swap_seed=None)
    assert [r.pair_id for r in ds.records] == ["A0:S0|S1", "A0:S0|S2", "A0:S1|S2", "A1:S0|S1"]
    assert [r.label for r in ds.records] == [ITEM1, TIE, ITEM2, ITEM2]
    first = ds.records[0]
    assert (first.item1, first.item2, first.score1, first.score2) == ("a", "b", 3.0, 1.0)
    assert first.context == "Article zero." and first.context_id == "A0"
    assert (ds.kind, ds.aspect, ds.item_name, ds.context_name) == (
        "comparison", "coherent", "summary", "article")
    assert ds.aspect_description and ds.extra["ties"] == 1
    assert ds.extra["fields"] == {"item": "summary", "item_id": "summary_id",
                                  "context": "article", "context_id": "article_id"}


def test_swap_keeps_labels_consistent_with_scores(summeval: Path) -> None:
    plain = load_scored_items(summeval, "fluency", swap_seed=None)
    swapped = load_scored_items(summeval, "fluency")
    assert [r.pair_id for r in plain.records] == [r.pair_id for r in swapped.records]
    for r in swapped.records:
        assert r.label == (ITEM1 if r.score1 > r.score2 else ITEM2 if r.score2 > r.score1
                           else TIE)
        assert r.item1 != r.item2


def test_swap_balances_labels_of_a_sorted_file(tmp_path: Path) -> None:
    rows = [{"doc_id": f"D{c}", "text_id": f"T{i}", "doc": f"doc {c}", "text": f"t{c}-{i}",
             "quality": float(10 - i)} for c in range(20) for i in range(6)]
    path = write(tmp_path, "sorted.jsonl", jsonl(rows))
    assert {r.label for r in load_scored_items(path, "quality", swap_seed=None).records} == {1}
    labels = Counter(r.label for r in load_scored_items(path, "quality").records)
    assert 0.4 < labels[ITEM1] / 300 < 0.6
    again = load_scored_items(path, "quality")
    other = load_scored_items(path, "quality", swap_seed=1)
    assert again.fingerprint() == load_scored_items(path, "quality").fingerprint()
    assert [r.label for r in again.records] != [r.label for r in other.records]


def test_max_pairs_per_context_is_a_seeded_subset(tmp_path: Path) -> None:
    rows = [{"doc_id": f"D{c}", "text_id": f"T{i}", "doc": f"doc {c}", "text": f"t{c}-{i}",
             "quality": float(i % 4)} for c in range(3) for i in range(6)]
    path = write(tmp_path, "cap.jsonl", jsonl(rows))
    full = {r.pair_id for r in load_scored_items(path, "quality").records}
    capped = load_scored_items(path, "quality", max_pairs_per_context=4)
    assert len(capped) == 12 and {r.pair_id for r in capped.records} <= full
    assert capped.fingerprint() == load_scored_items(path, "quality",
                                                     max_pairs_per_context=4).fingerprint()
    assert {r.pair_id for r in capped.records} != {
        r.pair_id for r in load_scored_items(path, "quality", max_pairs_per_context=4,
                                             seed=1).records}


def test_unseen_field_names_are_detected(tmp_path: Path) -> None:
    """A new summarisation-like file: other names, another key order, a metadata string."""
    rows = [{"text": f"summary {d}{i}", "fluency2": float((i * 7 + d) % 5), "doc": f"Doc {d}",
             "system": f"M{i}", "text_id": f"T{i}", "doc_id": d}
            for d in range(3) for i in range(4)]
    path = write(tmp_path, "new.jsonl", jsonl(rows))
    ds = load_scored_items(path, "fluency2")
    assert ds.extra["fields"] == {"item": "text", "item_id": "text_id", "context": "doc",
                                  "context_id": "doc_id"}
    assert len(ds) == 3 * 6 and ds.context_name == "document" and ds.item_name == "item"
    assert ds.records[0].context == "Doc 0" and ds.records[0].pair_id.startswith("0:")
    assert scored_item_aspects(path) == ["fluency2"]


def test_hanna_shape_names(tmp_path: Path) -> None:
    rows = [{"prompt_id": f"P{p}", "story_id": f"S{p * 3 + i}", "prompt": f"prompt {p}",
             "story": f"story {p} {i}", "empathy": float(i)} for p in range(2) for i in range(3)]
    ds = load_scored_items(write(tmp_path, "h.jsonl", jsonl(rows)), "empathy")
    assert (ds.aspect, ds.item_name, ds.context_name) == ("empathetic", "story", "story prompt")
    assert len(ds) == 6


def test_explicit_fields_override_detection(tmp_path: Path) -> None:
    rows = [{"grp": "g1" if i < 3 else "g2", "key": f"k{i}", "body": f"body {i}",
             "ctx": "c1" if i < 3 else "c2", "s": i} for i in range(6)]
    path = write(tmp_path, "odd.jsonl", jsonl(rows))
    ds = load_scored_items(path, "s", context_field="ctx", context_id_field="grp",
                           item_field="body", item_id_field="key", name="odd")
    assert ds.name == "odd" and len(ds) == 6 and ds.records[0].context == "c1"
    with pytest.raises(DataError) as e:
        load_scored_items(path, "s", item_field="nope")
    check_where(e.value, path, 1, "nope")


def test_items_without_context_form_one_group(tmp_path: Path) -> None:
    rows = [{"id": f"x{i}", "text": f"t{i}", "score": i} for i in range(4)]
    ds = load_scored_items(write(tmp_path, "flat.jsonl", jsonl(rows)), "score", swap_seed=None)
    assert len(ds) == 6 and ds.records[0].pair_id == "x0|x1"
    assert ds.records[0].context is None and ds.records[0].context_id is None


def test_missing_aspect_names_the_available_ones(summeval: Path) -> None:
    with pytest.raises(DataError) as e:
        load_scored_items(summeval, "relevance")
    check_where(e.value, summeval, 1, "relevance")
    assert "coherence" in str(e.value) and "fluency" in str(e.value)
    with pytest.raises(DataError) as e:
        load_dataset(summeval)
    check_where(e.value, summeval, 1, "aspect")
    assert "coherence, fluency" in str(e.value)


def test_aspect_case_insensitive(summeval: Path) -> None:
    assert len(load_scored_items(summeval, "Coherence")) == 4


@pytest.mark.parametrize(("row", "change", "field", "words"), [
    (3, lambda r: r.pop("summary"), "summary", "missing key"),
    (2, lambda r: r.pop("article_id"), "article_id", "missing key"),
    (4, lambda r: r.update(coherence="high"), "coherence", "number"),
    (4, lambda r: r.update(coherence=True), "coherence", "number"),
    (5, lambda r: r.update(coherence=None), "coherence", "number"),
    (2, lambda r: r.update(summary=17), "summary", "expected text"),
    (2, lambda r: r.update(summary="   "), "summary", "empty"),
    (2, lambda r: r.update(summary_id=None), "summary_id", "id"),
    (3, lambda r: r.update(summary_id="S0"), "summary_id", "duplicate"),
    (2, lambda r: r.update(article="Another text."), "article", "different text"),
])
def test_scored_items_bad_rows(tmp_path: Path, row: int, change: Any, field: str,
                               words: str) -> None:
    rows = summeval_rows()
    change(rows[row - 1])
    path = write(tmp_path, "bad.jsonl", jsonl(rows))
    with pytest.raises(DataError) as e:
        load_scored_items(path, "coherence")
    check_where(e.value, path, row, field)
    assert words in str(e.value)


def test_nan_score(tmp_path: Path) -> None:
    text = jsonl(summeval_rows()).replace('"coherence": 1.0', '"coherence": NaN')
    path = write(tmp_path, "nan.jsonl", text)
    with pytest.raises(DataError) as e:
        load_scored_items(path, "coherence")
    check_where(e.value, path, 2, "coherence")


def test_bad_json_line(tmp_path: Path) -> None:
    lines = jsonl(summeval_rows()).splitlines()
    lines[2] = lines[2].replace('"summary": "c"', '"summary": c')
    path = write(tmp_path, "broken.jsonl", "\n".join(lines) + "\n")
    with pytest.raises(DataError) as e:
        load_scored_items(path, "coherence")
    check_where(e.value, path, 3, "summary")
    assert "invalid JSON" in str(e.value)


def test_line_not_an_object_and_duplicate_key(tmp_path: Path) -> None:
    path = write(tmp_path, "list.jsonl", jsonl(summeval_rows()) + "[1, 2]\n")
    with pytest.raises(DataError) as e:
        load_scored_items(path, "coherence")
    check_where(e.value, path, 6, None)
    dup = jsonl(summeval_rows()[:1]) + '{"article_id": "A0", "article_id": "A1"}\n'
    path = write(tmp_path, "dup.jsonl", dup)
    with pytest.raises(DataError) as e:
        load_scored_items(path, "coherence")
    check_where(e.value, path, 2, "article_id")


def test_non_utf8_names_line_and_field(tmp_path: Path) -> None:
    raw = jsonl(summeval_rows()).encode().replace(b'"summary": "d"', b'"summary": "d\xe9"')
    path = write(tmp_path, "latin.jsonl", raw)
    with pytest.raises(DataError) as e:
        load_scored_items(path, "coherence")
    check_where(e.value, path, 4, "summary")
    assert "UTF-8" in str(e.value)


@pytest.mark.parametrize("content", ["", "\n\n  \n"])
def test_empty_file(tmp_path: Path, content: str) -> None:
    path = write(tmp_path, "empty.jsonl", content)
    with pytest.raises(DataError) as e:
        load_scored_items(path, "coherence")
    check_where(e.value, path, 1, None)
    assert "empty" in str(e.value)


def test_single_item_context_warns(tmp_path: Path) -> None:
    rows = summeval_rows() + [{"article_id": "A2", "summary_id": "S0", "article": "Lonely.",
                               "summary": "z", "coherence": 1.0, "fluency": 1.0}]
    path = write(tmp_path, "single.jsonl", jsonl(rows))
    with pytest.warns(DataWarning, match="1 of 3 contexts have a single item"):
        ds = load_scored_items(path, "coherence")
    assert len(ds) == 4


def test_no_context_with_two_items(tmp_path: Path) -> None:
    rows = [{"article_id": f"A{i}", "summary_id": "S0", "article": f"a{i}", "summary": "s",
             "coherence": float(i)} for i in range(3)]  # one summary per article
    path = write(tmp_path, "lonely.jsonl", jsonl(rows))
    with pytest.raises(DataError) as e:
        load_scored_items(path, "coherence", context_id_field="article_id")
    check_where(e.value, path, None, "context_id")
    assert "no context has two or more items" in str(e.value)


def test_all_ties_is_an_error(tmp_path: Path) -> None:
    rows = summeval_rows()
    for r in rows:
        r["coherence"] = 2.0
    path = write(tmp_path, "ties.jsonl", jsonl(rows))
    with pytest.raises(DataError) as e:
        load_scored_items(path, "coherence")
    check_where(e.value, path, None, "coherence")
    assert "ties" in str(e.value)


def test_comparisons_within_contexts_in_memory() -> None:
    items = [ScoredItem("a", "A", 1.0, "c"), ScoredItem("b", "B", 2.0, "c"),
             ScoredItem("x", "X", 5.0, None), ScoredItem("y", "Y", 4.0, None)]
    pairs = comparisons_within_contexts(items, swap_seed=None)
    assert [(p.pair_id, p.label) for p in pairs] == [("c:a|b", ITEM2), ("x|y", ITEM1)]
    with pytest.raises(DataError, match="appears 2 times"):
        comparisons_within_contexts(items + [ScoredItem("a", "A2", 3.0, "c")])
    with pytest.raises(DataError, match="max_pairs_per_context"):
        comparisons_within_contexts(items, max_pairs_per_context=0)
    with pytest.raises(DataError, match="no items"):
        comparisons_within_contexts([])


# --------------------------------------------------------------------------------------------
# pairwise JSON


def pairwise_rows() -> list[dict[str, Any]]:
    return [
        {"input": "Say hi.", "output_1": "Hi!", "output_2": "Bye.", "label": "1"},
        {"input": "Add 2+2.", "output_1": "5", "output_2": "4", "label": 2},
        {"input": "Say hi.", "output_1": "Hello.", "output_2": "No.", "label": "1"},
    ]


def test_pairwise_json(tmp_path: Path) -> None:
    path = write(tmp_path, "LLMBar_Test/dataset.json", json.dumps(pairwise_rows(), indent=2))
    ds = load_pairwise_json(path)
    assert ds.name == "LLMBar_Test" and [r.label for r in ds.records] == [1, 2, 1]
    assert (ds.item_name, ds.context_name, ds.aspect) == ("output", "instruction", "helpful")
    assert ds.records[0].context == "Say hi." and ds.records[1].item2 == "4"
    assert ds.records[0].context_id == ds.records[2].context_id != ds.records[1].context_id
    assert len({r.pair_id for r in ds.records}) == 3
    assert sniff_format(path) == "pairwise" and load_dataset(path).fingerprint() == \
        ds.fingerprint()


@pytest.mark.parametrize("label", ["3", "yes", "", 0, 3, True, 1.0, None, [1]])
def test_pairwise_bad_label(tmp_path: Path, label: Any) -> None:
    rows = pairwise_rows()
    rows[1]["label"] = label
    path = write(tmp_path, "d.json", json.dumps(rows))
    with pytest.raises(DataError) as e:
        load_pairwise_json(path)
    check_where(e.value, path, 2, "label")


@pytest.mark.parametrize("key", ["input", "output_1", "output_2", "label"])
def test_pairwise_missing_key(tmp_path: Path, key: str) -> None:
    rows = pairwise_rows()
    del rows[2][key]
    path = write(tmp_path, "d.json", json.dumps(rows))
    with pytest.raises(DataError) as e:
        load_pairwise_json(path)
    check_where(e.value, path, 3, key)
    assert "missing key" in str(e.value)


@pytest.mark.parametrize(("content", "row", "words"), [
    ('{"input": "x"}', 1, "JSON list"),
    ("[]", 1, "empty"),
    ('[{"input": "a", "output_1": "b", "output_2": "c", "label": "1"}, 7]', 2, "object"),
    ('[\n {"input": "a",\n  "output_1": "b" "output_2": "c"}\n]', 3, "invalid JSON"),
])
def test_pairwise_malformed_file(tmp_path: Path, content: str, row: int, words: str) -> None:
    path = write(tmp_path, "d.json", content)
    with pytest.raises(DataError) as e:
        load_pairwise_json(path)
    check_where(e.value, path, row, None)
    assert words in str(e.value)


def test_pairwise_duplicate(tmp_path: Path) -> None:
    rows = pairwise_rows() + [dict(pairwise_rows()[1])]
    path = write(tmp_path, "d.json", json.dumps(rows))
    with pytest.raises(DataError) as e:
        load_pairwise_json(path)
    check_where(e.value, path, 4, "input")
    assert "row 2" in str(e.value)


# --------------------------------------------------------------------------------------------
# Story Cloze

CLOZE_HEADER = ["InputStoryid", "InputSentence1", "InputSentence2", "InputSentence3",
                "InputSentence4", "RandomFifthSentenceQuiz1", "RandomFifthSentenceQuiz2",
                "AnswerRightEnding"]


def cloze_rows() -> list[list[Any]]:
    return [CLOZE_HEADER,
            ["s1", "Ann woke up.", "She was hungry, very.", "She made eggs.", "She ate.",
             "She felt full.", "She flew to Mars.", 1],
            ["s2", "Bob ran.", "He tripped.", "He fell.", "He cried.", "He laughed, a lot.",
             "He got up and limped home.", 2]]


def test_story_cloze(tmp_path: Path) -> None:
    path = write(tmp_path, "cloze.csv", table(cloze_rows()))
    ds = load_story_cloze(path)
    assert [r.label for r in ds.records] == [1, 2]
    r = ds.records[0]
    assert r.context == "Ann woke up. She was hungry, very. She made eggs. She ate."
    assert (r.item1, r.item2, r.pair_id, r.context_id) == ("She felt full.",
                                                            "She flew to Mars.", "s1", "s1")
    assert (ds.aspect, ds.item_name) == ("plausible", "ending")
    assert sniff_format(path) == "story-cloze"


def test_story_cloze_multiline_field_rows_count_lines(tmp_path: Path) -> None:
    rows = cloze_rows()
    rows[1][2] = "She was\nhungry."
    rows.append(["s3", "a", "b", "c", "d", "e", "f", "9"])
    path = write(tmp_path, "cloze.csv", table(rows))
    with pytest.raises(DataError) as e:
        load_story_cloze(path)
    check_where(e.value, path, 5, "AnswerRightEnding")


@pytest.mark.parametrize(("row", "index", "value", "field"), [
    (2, 7, "3", "AnswerRightEnding"), (3, 7, "yes", "AnswerRightEnding"),
    (3, 0, "s1", "InputStoryid"), (2, 3, " ", "InputSentence3"),
])
def test_story_cloze_bad_values(tmp_path: Path, row: int, index: int, value: str,
                                field: str) -> None:
    rows = cloze_rows()
    rows[row - 1][index] = value
    path = write(tmp_path, "cloze.csv", table(rows))
    with pytest.raises(DataError) as e:
        load_story_cloze(path)
    check_where(e.value, path, row, field)


def test_story_cloze_missing_column_and_short_row(tmp_path: Path) -> None:
    rows = [r[:-1] for r in cloze_rows()]
    path = write(tmp_path, "cloze.csv", table(rows))
    with pytest.raises(DataError) as e:
        load_story_cloze(path)
    check_where(e.value, path, 1, "AnswerRightEnding")
    rows = cloze_rows()
    rows[2] = rows[2][:5]
    path = write(tmp_path, "short.csv", table(rows))
    with pytest.raises(DataError) as e:
        load_story_cloze(path)
    check_where(e.value, path, 3, "RandomFifthSentenceQuiz1")
    rows = cloze_rows()
    rows[1].append("extra")
    path = write(tmp_path, "long.csv", table(rows))
    with pytest.raises(DataError) as e:
        load_story_cloze(path)
    check_where(e.value, path, 2, "column 9")


def test_story_cloze_header_only_and_bad_quote(tmp_path: Path) -> None:
    path = write(tmp_path, "head.csv", table(cloze_rows()[:1]))
    with pytest.raises(DataError) as e:
        load_story_cloze(path)
    check_where(e.value, path, 2, None)
    text = table(cloze_rows()) + 's3,"a"b,c,d,e,f,g,1\n'
    path = write(tmp_path, "quote.csv", text)
    with pytest.raises(DataError) as e:
        load_story_cloze(path)
    check_where(e.value, path, 4, None)


def test_story_cloze_non_utf8(tmp_path: Path) -> None:
    raw = table(cloze_rows()).encode().replace(b"He got up", b"He got \xff up")
    path = write(tmp_path, "cloze.csv", raw)
    with pytest.raises(DataError) as e:
        load_story_cloze(path)
    check_where(e.value, path, 3, "RandomFifthSentenceQuiz2")


# --------------------------------------------------------------------------------------------
# MC-TACO


def mctaco_rows(n_questions: int = 2) -> list[list[str]]:
    rows = []
    for q in range(n_questions):
        sentence, question = f"Sentence {q}.", f"How long did event {q} take?"
        rows += [[sentence, question, f"{k} hours", "yes" if k < 2 else "no", "Event Duration"]
                 for k in range(5)]
    return rows


def test_mctaco(tmp_path: Path) -> None:
    path = write(tmp_path, "dev.tsv", tsv(mctaco_rows(2)))
    ds = load_mctaco(path)
    assert len(ds) == 6  # 2 yes x 3 no per question, capped at 3
    assert sniff_format(path) == "mctaco"
    for r in ds.records:
        yes = r.item1 if r.label == ITEM1 else r.item2
        assert yes in {"0 hours", "1 hours"}
        q = {"q1": 0, "q6": 1}[r.context_id]
        assert r.context == f"Sentence {q}.\nQuestion: How long did event {q} take?"
    assert len(load_mctaco(path, max_pairs_per_question=100)) == 12
    assert load_mctaco(path).fingerprint() == ds.fingerprint()
    assert (ds.aspect, ds.item_name) == ("plausible", "answer")


def test_mctaco_labels_balanced(tmp_path: Path) -> None:
    ds = load_mctaco(write(tmp_path, "dev.tsv", tsv(mctaco_rows(100))))
    assert 0.4 < Counter(ds.labels())[ITEM1] / len(ds) < 0.6
    assert len({r.pair_id for r in ds.records}) == len(ds)


@pytest.mark.parametrize(("row", "values", "field"), [
    (3, ["s", "q", "a", "maybe", "c"], "label"),
    (4, ["s", "q", "a", "yes"], "category"),
    (2, ["s", "q"], "answer"),
    (6, ["s", "q", "a", "yes", "c", "extra"], "column 6"),
    (1, ["s", "q", "", "yes", "c"], "answer"),
])
def test_mctaco_bad_rows(tmp_path: Path, row: int, values: list[str], field: str) -> None:
    rows = mctaco_rows(2)
    rows[row - 1] = values
    path = write(tmp_path, "dev.tsv", tsv(rows))
    with pytest.raises(DataError) as e:
        load_mctaco(path)
    check_where(e.value, path, row, field)


def test_mctaco_duplicate_answer_and_one_sided(tmp_path: Path) -> None:
    rows = mctaco_rows(2)
    rows[3] = list(rows[2])
    path = write(tmp_path, "dup.tsv", tsv(rows))
    with pytest.raises(DataError) as e:
        load_mctaco(path)
    check_where(e.value, path, 4, "answer")
    rows = mctaco_rows(2) + [["Other.", "When?", "now", "no", "Typical Time"]]
    with pytest.warns(DataWarning, match="1 of 3 questions"):
        assert len(load_mctaco(write(tmp_path, "one.tsv", tsv(rows)))) == 6
    rows = [r[:3] + ["no"] + r[4:] for r in mctaco_rows(2)]
    path = write(tmp_path, "none.tsv", tsv(rows))
    with pytest.raises(DataError) as e:
        load_mctaco(path)
    check_where(e.value, path, None, "label")


# --------------------------------------------------------------------------------------------
# true/false statements


def test_true_false_csv(tmp_path: Path) -> None:
    rows = [["statement", "label", "city", "n"], ["Paris is in France.", 1, "Paris", 3],
            ["Paris is in Peru.", 0, "Paris", 4], ["Rome is in Italy.", "True", "Rome", 5]]
    path = write(tmp_path, "cities.csv", table(rows))
    ds = load_true_false_csv(path)
    assert ds.kind == "statement" and [r.label for r in ds.records] == [True, False, True]
    assert ds.labels() == [ITEM1, ITEM2, ITEM1] and ds.name == "cities"
    assert sniff_format(path) == "true-false"


@pytest.mark.parametrize("label", ["2", "yes", "", "1.0", "-1"])
def test_true_false_bad_label(tmp_path: Path, label: str) -> None:
    rows = [["statement", "label"], ["a", "1"], ["b", label]]
    path = write(tmp_path, "tf.csv", table(rows))
    with pytest.raises(DataError) as e:
        load_true_false_csv(path)
    check_where(e.value, path, 3, "label")


def test_true_false_structure(tmp_path: Path) -> None:
    path = write(tmp_path, "tf.csv", table([["text", "label"], ["a", "1"]]))
    with pytest.raises(DataError) as e:
        load_true_false_csv(path)
    check_where(e.value, path, 1, "statement")
    path = write(tmp_path, "conflict.csv", table([["statement", "label"], ["a", 1], ["b", 0],
                                                   ["a", 0]]))
    with pytest.raises(DataError) as e:
        load_true_false_csv(path)
    check_where(e.value, path, 4, "label")
    path = write(tmp_path, "repeat.csv", table([["statement", "label"], ["a", 1], ["a", 1]]))
    with pytest.warns(DataWarning, match="1 statements repeat"):
        assert len(load_true_false_csv(path)) == 2


@pytest.mark.parametrize(("columns", "group_by"), [
    (["city", "subject"], "city"), (["n1", "n2"], "n1"), (["subject"], "subject"),
    (["group"], "group"), (["country"], None)])
def test_true_false_groups_by_subject_column(tmp_path: Path, columns: list[str],
                                             group_by: str | None) -> None:
    rows = [["statement", "label", *columns]]
    rows += [[f"s{k}", k % 2, *[f"x{k // 2}"] * len(columns)] for k in range(6)]
    ds = load_true_false_csv(write(tmp_path, "tf.csv", table(rows)))
    assert ds.extra["group_by"] == group_by
    if group_by is None:
        assert all(r.group_id is None for r in ds.records)
        assert ds.group_ids() == [r.pair_id for r in ds.records]
    else:
        assert ds.group_ids() == [f"{group_by}:x{k // 2}" for k in range(6)]
    rows[2][2] = " "                     # the subject column, blank
    if group_by is not None:
        with pytest.raises(DataError) as e:
            load_true_false_csv(write(tmp_path, "bad.csv", table(rows)))
        check_where(e.value, tmp_path / "bad.csv", 3, group_by)


def test_mctaco_groups_questions_by_sentence(tmp_path: Path) -> None:
    rows = mctaco_rows(2) + [[r[0], "Why?"] + r[2:] for r in mctaco_rows(1)]
    ds = load_mctaco(write(tmp_path, "dev.tsv", tsv(rows)))
    by_context = {r.context_id: r.group_id for r in ds.records}
    assert len(by_context) == 3 and len(set(by_context.values())) == 2
    assert by_context["q1"] == by_context["q11"] != by_context["q6"]


def test_other_loaders_group_by_context(tmp_path: Path, summeval: Path) -> None:
    ds = load_pairwise_json(write(tmp_path, "d.json", json.dumps(pairwise_rows())))
    assert ds.group_ids() == ds.context_ids() and ds.group_ids()[0] == ds.group_ids()[2]
    ds = load_scored_items(summeval, "coherence")
    assert ds.group_ids() == ds.context_ids()


# --------------------------------------------------------------------------------------------
# ClimateX

CLIMATEX_HEADER = ["statement_idx", "report", "page_num", "sent_num", "statement", "confidence",
                   "score", "split"]
LEVELS = ["low", "medium", "high", "very high"]


def climatex_rows(n: int = 12) -> list[list[Any]]:
    return [CLIMATEX_HEADER] + [
        [i, "AR6_WGI", 10 + i, 3, f'Statement "{i}" about warming.', LEVELS[i % 4], i % 4,
         "test" if i % 3 == 0 else "train"] for i in range(n)]


def test_climatex(tmp_path: Path) -> None:
    path = write(tmp_path, "ipcc.tsv", tsv(climatex_rows()))
    items = read_climatex(path)
    assert len(items) == 12 and items[5].score == 1.0 and items[5].split == "train"
    assert items[0].text == 'Statement "0" about warming.' and items[0].context_id is None
    ds = load_climatex(path)
    assert len(ds) == 28 and ds.aspect == "confident"  # 8 train statements -> C(8,2)
    for r in ds.records:
        assert r.label == (ITEM1 if r.score1 > r.score2 else ITEM2 if r.score2 > r.score1
                           else TIE)
    assert len(load_climatex(path, split=None)) == 66
    assert len(load_climatex(path, split="test")) == 6
    assert len(load_climatex(path, split=None, max_items=5)) == 10
    sampled = load_climatex(path, split=None, max_pairs=20, seed=3)
    assert len(sampled) == 20 and len({r.pair_id for r in sampled.records}) == 20
    assert sampled.fingerprint() == load_climatex(path, split=None, max_pairs=20,
                                                  seed=3).fingerprint()
    assert sniff_format(path) == "climatex"
    with pytest.raises(DataError) as e:
        load_climatex(path, split="dev")
    check_where(e.value, path, None, "split")
    assert "test, train" in str(e.value)


@pytest.mark.parametrize(("index", "value", "field"), [
    (5, "medium", "confidence"), (5, "sure", "confidence"), (6, "two", "score"),
    (6, "4", "score"), (6, "2.0", "score"), (0, "1", "statement_idx"), (4, "", "statement"),
])
def test_climatex_bad_values(tmp_path: Path, index: int, value: str, field: str) -> None:
    rows = climatex_rows()
    rows[3][index] = value  # file row 4 (statement 2: high, score 2)
    path = write(tmp_path, "ipcc.tsv", tsv(rows))
    with pytest.raises(DataError) as e:
        read_climatex(path)
    check_where(e.value, path, 4, field)


def test_climatex_missing_column(tmp_path: Path) -> None:
    rows = [[v for k, v in zip(CLIMATEX_HEADER, r) if k != "split"] for r in climatex_rows()]
    path = write(tmp_path, "ipcc.tsv", tsv(rows))
    with pytest.raises(DataError) as e:
        read_climatex(path)
    check_where(e.value, path, 1, "split")


# --------------------------------------------------------------------------------------------
# dispatch


def test_load_dataset_builtins_and_errors(tmp_path: Path) -> None:
    for name in BUILTIN:
        assert load_dataset(name, seed=1).fingerprint() == BUILTIN[name](1).fingerprint()
    with pytest.raises(DataError) as e:
        load_dataset(tmp_path / "nope.csv")
    assert "larger_number" in str(e.value) and "nope.csv" in str(e.value)
    path = write(tmp_path, "weird.csv", "a,b\n1,2\n")
    with pytest.raises(DataError) as e:
        load_dataset(path)
    check_where(e.value, path, 1, None)
    path = write(tmp_path, "weird.tsv", "a\tb\n")
    with pytest.raises(DataError):
        load_dataset(path)
    path = write(tmp_path, "weird.xyz", "hello\n")
    with pytest.raises(DataError):
        load_dataset(path)
    with pytest.raises(TypeError, match="pairwise"):
        load_dataset(write(tmp_path, "p.json", json.dumps(pairwise_rows())), aspect="x",
                     bogus=1)


def test_load_dataset_sniffs_every_format(tmp_path: Path, summeval: Path) -> None:
    files = {
        "scored-items": summeval,
        "pairwise": write(tmp_path, "p.json", json.dumps(pairwise_rows())),
        "story-cloze": write(tmp_path, "c.csv", table(cloze_rows())),
        "mctaco": write(tmp_path, "m.tsv", tsv(mctaco_rows())),
        "true-false": write(tmp_path, "t.csv", table([["statement", "label"], ["a", 1]])),
        "climatex": write(tmp_path, "x.tsv", tsv(climatex_rows())),
        "caters": write(tmp_path, "s.txt", "".join(f"Then {i}.\n" for i in range(5)) + "***\n"),
    }
    assert set(files) | {"builtin"} == set(FORMATS)
    for fmt, path in files.items():
        assert sniff_format(path) == fmt
        kw = {"aspect": "coherence"} if fmt == "scored-items" else {}
        assert len(load_dataset(str(path), **kw)) > 0
    folder = tmp_path / "only"
    write(folder, "dataset.json", json.dumps(pairwise_rows()))
    assert load_dataset(folder).name == "only"
    noext = write(tmp_path, "pairs", json.dumps(pairwise_rows()))
    assert sniff_format(noext) == "pairwise"


# --------------------------------------------------------------------------------------------
# property tests: generated malformed rows always give a DataError naming the row


def _is_valid_pair_label(v: Any) -> bool:
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return v in (1, 2)
    return isinstance(v, str) and v.strip().lower() in {"1", "2"}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                 max_size=3),
    max_leaves=5)


@FAST
@given(label=json_values.filter(lambda v: not _is_valid_pair_label(v)),
       n=st.integers(1, 6), data=st.data())
def test_property_pairwise_wrong_label(label: Any, n: int, data: st.DataObject) -> None:
    bad = data.draw(st.integers(1, n))
    rows = [{"input": f"q{i}", "output_1": "a", "output_2": "b", "label": "1"}
            for i in range(n)]
    rows[bad - 1]["label"] = label
    with tempfile.TemporaryDirectory() as d:
        path = write(Path(d), "p.json", json.dumps(rows))
        with pytest.raises(DataError) as e:
            load_pairwise_json(path)
        check_where(e.value, path, bad, "label")


@FAST
@given(n=st.integers(1, 6), data=st.data())
def test_property_pairwise_missing_key(n: int, data: st.DataObject) -> None:
    rows = [{"input": f"q{i}", "output_1": "a", "output_2": "b", "label": 2} for i in range(n)]
    bad = data.draw(st.integers(1, n))
    dropped = data.draw(st.lists(st.sampled_from(sorted(rows[0])), min_size=1, unique=True))
    for key in dropped:
        del rows[bad - 1][key]
    with tempfile.TemporaryDirectory() as d:
        path = write(Path(d), "p.json", json.dumps(rows))
        with pytest.raises(DataError) as e:
            load_pairwise_json(path)
        check_where(e.value, path, bad, None)
        assert e.value.field in dropped


REQUIRED_SCORED = ["article_id", "summary_id", "article", "summary", "coherence"]


@FAST
@given(data=st.data())
def test_property_scored_missing_or_bad_value(data: st.DataObject) -> None:
    rows = [{"article_id": f"A{c}", "summary_id": f"S{i}", "article": f"art {c}",
             "summary": f"sum {c} {i}", "coherence": float(i)} for c in range(3) for i in range(3)]
    bad = data.draw(st.integers(1, len(rows)))
    key = data.draw(st.sampled_from(REQUIRED_SCORED))
    if data.draw(st.booleans()):
        del rows[bad - 1][key]
    else:
        wrong = st.none() | st.booleans() | st.lists(st.integers(), max_size=2) | st.dictionaries(
            st.text(max_size=2), st.integers(), max_size=2)
        if key == "coherence":
            wrong = wrong | st.text(max_size=5).filter(lambda s: not _floatable(s))
        elif key in ("article", "summary"):
            wrong = wrong | st.integers() | st.just("  ")
        rows[bad - 1][key] = data.draw(wrong)
    with tempfile.TemporaryDirectory() as d:
        path = write(Path(d), "s.jsonl", jsonl(rows))
        with pytest.raises(DataError) as e:
            load_scored_items(path, "coherence", context_id_field="article_id",
                              item_id_field="summary_id", context_field="article",
                              item_field="summary")
        check_where(e.value, path, bad, key)


def _floatable(s: str) -> bool:
    try:
        float(s)
    except ValueError:
        return False
    return True


@FAST
@given(label=st.text(alphabet=st.characters(blacklist_categories=("Cs", "Zl", "Zp", "Cc")),
                     max_size=6).filter(lambda s: s.strip().lower() not in {"yes", "no"}),
       data=st.data())
def test_property_mctaco_wrong_label(label: str, data: st.DataObject) -> None:
    rows = mctaco_rows(2)
    bad = data.draw(st.integers(1, len(rows)))
    rows[bad - 1][3] = label
    with tempfile.TemporaryDirectory() as d:
        path = write(Path(d), "m.tsv", tsv(rows))
        with pytest.raises(DataError) as e:
            load_mctaco(path)
        check_where(e.value, path, bad, "label")


@FAST
@given(garbage=st.binary(min_size=1, max_size=6), data=st.data())
def test_property_non_utf8_any_line(garbage: bytes, data: st.DataObject) -> None:
    lines = jsonl(summeval_rows()).encode().splitlines(keepends=True)
    bad = data.draw(st.integers(1, len(lines)))
    garbage = garbage.replace(b"\n", b" ").replace(b"\r", b" ")
    if _decodes(garbage):
        garbage = b"\xff" + garbage
    lines[bad - 1] = lines[bad - 1][:-2] + garbage + lines[bad - 1][-2:]
    with tempfile.TemporaryDirectory() as d:
        path = write(Path(d), "s.jsonl", b"".join(lines))
        with pytest.raises(DataError) as e:
            load_scored_items(path, "coherence")
        check_where(e.value, path, bad, None)


def _decodes(b: bytes) -> bool:
    try:
        b.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@FAST
@given(label=st.text(max_size=5).filter(
    lambda s: s.strip().lower() not in {"0", "1", "true", "false"}), data=st.data())
def test_property_true_false_wrong_label(label: str, data: st.DataObject) -> None:
    rows: list[list[Any]] = [["statement", "label"]] + [[f"s{i}", i % 2] for i in range(5)]
    bad = data.draw(st.integers(2, 6))
    rows[bad - 1][1] = label
    with tempfile.TemporaryDirectory() as d:
        path = write(Path(d), "t.csv", table(rows))
        with pytest.raises(DataError) as e:
            load_true_false_csv(path)
        assert e.value.row == bad and e.value.file == str(path)


@FAST
@given(content=st.text(max_size=60))
def test_property_arbitrary_text_never_raises_raw_errors(content: str) -> None:
    """Whatever the bytes, loaders either load or raise DataError (never KeyError etc.)."""
    with tempfile.TemporaryDirectory() as d:
        for name, loader in [("a.jsonl", lambda p: load_scored_items(p, "x")),
                             ("a.json", load_pairwise_json), ("a.csv", load_story_cloze),
                             ("b.csv", load_true_false_csv), ("a.tsv", load_mctaco),
                             ("b.tsv", read_climatex)]:
            path = write(Path(d), name, content)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DataWarning)
                try:
                    loader(path)
                except DataError:
                    pass


# --------------------------------------------------------------------------------------------
# real datasets (skipped on a fresh clone without ../shared/datasets)


@pytest.fixture
def shared() -> Path:
    if not SHARED.is_dir():
        pytest.skip("../shared/datasets not present: real-data loader test skipped")
    return SHARED


@pytest.mark.shared_data
def test_real_summeval(shared: Path) -> None:
    ds = load_dataset(shared / "summeval" / "summeval.jsonl", aspect="coherence")
    assert len(ds) == 100 * 120 and ds.extra["n_contexts"] == 100
    assert (ds.aspect, ds.item_name, ds.context_name) == ("coherent", "summary", "article")
    labels = Counter(ds.labels())
    assert abs(labels[ITEM1] - labels[ITEM2]) < 0.05 * len(ds) and 0 < labels[TIE]
    assert sorted(ds.extra["aspects"]) == ["coherence", "consistency", "fluency", "relevance"]


@pytest.mark.shared_data
def test_real_hanna(shared: Path) -> None:
    ds = load_scored_items(shared / "hanna" / "hanna.jsonl", "surprise")
    assert len(ds) == 96 * 55 and ds.context_name == "story prompt"
    assert len(set(ds.context_ids())) == 96


@pytest.mark.shared_data
@pytest.mark.parametrize(("folder", "n", "contexts"), [
    ("LLMBar_Natural", 100, 100), ("CaseStudy_Normal", 59, 59), ("Processed_MT-Bench", 200, 75)])
def test_real_llmbar(shared: Path, folder: str, n: int, contexts: int) -> None:
    ds = load_dataset(shared / "llmbar" / folder / "dataset.json")
    assert len(ds) == n and ds.name == folder and len(set(ds.context_ids())) == contexts
    assert set(ds.labels()) == {ITEM1, ITEM2}


@pytest.mark.shared_data
def test_real_story_cloze(shared: Path) -> None:
    ds = load_dataset(shared / "story_cloze" / "cloze_test_val_spring2016.csv")
    assert len(ds) == 1871 and Counter(ds.labels()) == {ITEM1: 962, ITEM2: 909}


@pytest.mark.shared_data
def test_real_mctaco(shared: Path) -> None:
    with pytest.warns(DataWarning, match="181 of 561 questions"):
        ds = load_dataset(shared / "mctaco" / "dev_3783.tsv")
    assert len(ds) == 1072 and len(set(ds.context_ids())) == 380
    assert abs(Counter(ds.labels())[ITEM1] / len(ds) - 0.5) < 0.05


@pytest.mark.shared_data
@pytest.mark.parametrize(("name", "n"), [("cities", 1496), ("larger_than", 1980),
                                         ("sp_en_trans", 354)])
def test_real_geometry_of_truth(shared: Path, name: str, n: int) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DataWarning)
        ds = load_dataset(shared / "geometry_of_truth" / f"{name}.csv")
    assert ds.kind == "statement" and len(ds) == n
    assert Counter(ds.labels()) == {ITEM1: n // 2, ITEM2: n // 2}


@pytest.mark.shared_data
def test_real_climatex(shared: Path) -> None:
    path = shared / "climatex" / "ipcc_statements_dataset.tsv"
    items = read_climatex(path)
    assert len(items) == 8094
    assert Counter(i.split for i in items) == {"train": 7794, "test": 300}
    assert Counter(i.score for i in items) == {2.0: 4711, 1.0: 2515, 3.0: 577, 0.0: 291}
    ds = load_dataset(path)
    assert len(ds) == 5000 and ds.extra["n_items"] == 7794
    test = load_climatex(path, split="test", max_pairs=None)
    assert len(test) == 300 * 299 // 2


def test_pairwise_non_utf8_names_the_list_row(tmp_path: Path) -> None:
    raw = json.dumps(pairwise_rows(), indent=2).encode().replace(b'"Hello."', b'"Hel\xfflo."')
    path = write(tmp_path, "d.json", raw)
    with pytest.raises(DataError) as e:
        load_pairwise_json(path)
    check_where(e.value, path, 3, "output_1")
    assert "UTF-8" in str(e.value) and "line" in str(e.value)
    path = write(tmp_path, "e.json", b'[\n {"input": "a", \xff "b"}\n]')
    with pytest.raises(DataError) as e:
        load_pairwise_json(path)
    check_where(e.value, path, 2, "input")
