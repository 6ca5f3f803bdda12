"""The dataset formats PPairS reads: which one a file is in (:func:`sniff_format`, from its
extension and first line), and loading a built-in or any file (:func:`load_dataset`)."""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ppairs_lens.data.builtin import BUILTIN, builtin_dataset
from ppairs_lens.data.caters import load_caters
from ppairs_lens.data.climatex import load_climatex
from ppairs_lens.data.mctaco import MCTACO_COLUMNS, load_mctaco
from ppairs_lens.data.pairwise import load_pairwise_json
from ppairs_lens.data.reading import PathLike, split_header
from ppairs_lens.data.records import Dataset
from ppairs_lens.data.scored_items import load_scored_items, scored_item_aspects
from ppairs_lens.data.story_cloze import load_story_cloze
from ppairs_lens.data.true_false import load_true_false_csv
from ppairs_lens.errors import DataError

__all__ = ["FORMATS", "load_dataset", "sniff_format"]

#: One line per supported format, for ``ppairs-lens datasets``.
FORMATS: dict[str, str] = {
    "scored-items": "JSONL, one scored item per line, compared within each context (SummEval, "
                    "HANNA): <context>_id, <item>_id, <context>, <item>, numeric aspects; "
                    "needs aspect=",
    "pairwise": "JSON list of {input, output_1, output_2, label 1|2} (LLMBar, MT-Bench): which "
                "output answers the instruction better",
    "story-cloze": "CSV with InputStoryid, InputSentence1-4, RandomFifthSentenceQuiz1/2, "
                   "AnswerRightEnding (Story Cloze): which ending is plausible",
    "mctaco": "TSV without header: sentence, question, answer, yes/no, category (MC-TACO): "
              "a plausible vs an implausible answer to one question",
    "true-false": "CSV with columns statement, label (1 true / 0 false), extra columns ignored "
                  "(Geometry of Truth): single true/false statements",
    "climatex": "TSV with header statement_idx, report, page_num, sent_num, statement, "
                "confidence, score (0-3), split (ClimateX): which statement has higher expert "
                "confidence",
    "caters": "text, five sentences a line per story, each story closed by a line *** "
              "(CaTeRS): which of two of a story's statements comes first",
    "builtin": "generated in code, no file: " + ", ".join(BUILTIN),
}

_LOADERS: dict[str, Callable[..., Dataset]] = {
    "scored-items": load_scored_items,
    "pairwise": load_pairwise_json,
    "story-cloze": load_story_cloze,
    "mctaco": load_mctaco,
    "true-false": load_true_false_csv,
    "climatex": load_climatex,
    "caters": load_caters,
}
_DATA_SUFFIXES = {".jsonl", ".ndjson", ".json", ".csv", ".tsv"}


def _first_line(path: Path) -> str:
    """The first non-blank line, leniently decoded (the loader reports bad bytes precisely)."""
    try:
        with path.open("rb") as f:
            for raw in f:
                line = raw.decode("utf-8", "replace").removeprefix("\ufeff")
                if line.strip():
                    return line.rstrip("\r\n")
    except OSError as e:
        raise DataError(f"cannot read the file ({e.strerror or e})", file=str(path)) from None
    raise DataError("the file is empty", file=str(path), row=1)


def sniff_format(path: PathLike) -> str:
    """Which :data:`FORMATS` key a file is in, from its extension and first line."""
    p = Path(path)
    file = str(p)
    first = _first_line(p)
    suffix = p.suffix.lower()
    if suffix in {".jsonl", ".ndjson"}:
        return "scored-items"
    if suffix == ".json":
        return "pairwise"
    if suffix == ".csv":
        header = split_header(first, ",", True)
        if "InputSentence1" in header:
            return "story-cloze"
        if "statement" in header and "label" in header:
            return "true-false"
        raise DataError(f"unknown CSV format (columns: {', '.join(header)}); expected Story "
                        "Cloze (InputSentence1..) or true/false (statement, label)", file=file,
                        row=1)
    if suffix in {".tsv", ".txt"}:
        columns = [c.strip() for c in first.split("\t")]
        if "confidence" in columns and "statement" in columns:
            return "climatex"
        if len(columns) == len(MCTACO_COLUMNS):
            return "mctaco"
        if suffix == ".txt" and len(columns) == 1:
            return "caters"  # a CaTeRS story's first sentence
        raise DataError(f"unknown TSV format ({len(columns)} columns); expected ClimateX (a "
                        "header with statement, confidence, score, split), MC-TACO (5 "
                        "columns, no header) or CaTeRS (.txt, one sentence a line)", file=file,
                        row=1)
    stripped = first.lstrip()
    if stripped.startswith("["):
        return "pairwise"
    if stripped.startswith("{"):
        return "scored-items"
    raise DataError(f"cannot tell the format of this file (extension {suffix or 'none'}); "
                    f"formats: {', '.join(k for k in FORMATS if k != 'builtin')}", file=file,
                    row=1)


def _resolve_path(spec: str) -> Path:
    """A file to load: the path itself, or the one data file in a folder."""
    p = Path(spec)
    if not p.exists():
        raise DataError(f"no such file, and not a built-in dataset (built-ins: "
                        f"{', '.join(BUILTIN)})", file=spec)
    if p.is_dir():
        files = sorted(f for f in p.iterdir() if f.is_file() and f.suffix.lower()
                       in _DATA_SUFFIXES)
        if len(files) != 1:
            raise DataError(f"a folder with {len(files)} data files; name one of them",
                            file=spec)
        return files[0]
    return p


def load_dataset(spec: PathLike, **kw: Any) -> Dataset:
    """Load a built-in dataset by name, or a file (or a folder's one data file) in any of the
    :data:`FORMATS`; keywords go to the format's loader (``aspect=`` for scored items, which
    an error lists when it is missing)."""
    text = os.fspath(spec)
    if text in BUILTIN and not Path(text).exists():
        return builtin_dataset(text, **kw)
    path = _resolve_path(text)
    fmt = sniff_format(path)
    if fmt == "scored-items" and kw.get("aspect") is None:
        aspects = scored_item_aspects(path)
        raise DataError(f"a scored-items file needs aspect=...; aspects in this file: "
                        f"{', '.join(aspects) or 'none'}", file=str(path), row=1,
                        field="aspect")
    loader = _LOADERS[fmt]
    try:
        inspect.signature(loader).bind(path, **kw)
    except TypeError as e:
        raise TypeError(f"the {fmt} loader ({loader.__name__}) does not take these arguments: "
                        f"{e}") from None
    return loader(path, **kw)
