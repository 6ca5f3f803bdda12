"""CaTeRS stories as temporal-order comparisons: which of two statements comes first.

A CaTeRS ``.txt`` file holds five-sentence stories, one sentence a line, each closed by a line
``***``. As in PPairS Appendix E.2 a story's statements are shown unordered and the label is
the story's own sentence order (no annotation needed). Splits: train 200 stories / dev 60 /
test 20. Each story is one context (one seeded shuffled order, so the harvester runs it once)
and one leak group. The ``.ann`` brat files' event relations (:func:`read_caters_ann`) are a
finer variant the labels here do not use.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path
from typing import Literal

from ppairs_lens.data.reading import PathLike
from ppairs_lens.data.records import ITEM1, ITEM2, Comparison, Dataset
from ppairs_lens.errors import DataError

__all__ = ["CATERS_SPLITS", "STORY_LENGTH", "CatersAnnotations", "CatersStory",
           "caters_comparisons", "load_caters", "read_caters_ann", "read_caters_stories"]

#: Sentences in a CaTeRS story.
STORY_LENGTH: int = 5
#: Each split's folder under the CaTeRS folder (``../shared/datasets/caters``).
CATERS_SPLITS: dict[str, str] = {"train": "caters_evaluation/train",
                                 "dev": "caters_evaluation/dev", "test": "caters_test/test"}
_SEPARATOR = "***"


@dataclass(frozen=True)
class CatersStory:
    """``sentences`` in true order; ``story_id`` ``<file stem>/<1-based index>``; ``line`` the
    file line of the first sentence."""

    story_id: str
    sentences: tuple[str, ...]
    file: str
    line: int


def _read_text(p: Path) -> str:
    try:
        return p.read_bytes().decode("utf-8").removeprefix("\ufeff")
    except OSError as e:
        raise DataError(f"cannot read the file ({e.strerror or e})", file=str(p)) from None
    except UnicodeDecodeError as e:
        line = p.read_bytes()[:e.start].count(b"\n") + 1
        raise DataError(f"not UTF-8 text (byte {e.start})", file=str(p), row=line) from None


def read_caters_stories(path: PathLike) -> list[CatersStory]:
    """The stories of one ``.txt`` file, in file order (blank lines and a missing final ``***``
    ignored). A story without five sentences is an error: a merged or split story would
    silently shift every later story's order."""
    p = Path(path)
    file = str(p)
    stories: list[CatersStory] = []
    block: list[tuple[int, str]] = []

    def close() -> None:
        if not block:  # two separators in a row, or a trailing one: nothing to close
            return
        index = len(stories) + 1
        if len(block) != STORY_LENGTH:
            raise DataError(f"story {index} (lines {block[0][0]}-{block[-1][0]}) has "
                            f"{len(block)} sentences; a CaTeRS story has {STORY_LENGTH}, "
                            f"closed by a line '{_SEPARATOR}'", file=file, row=block[0][0])
        stories.append(CatersStory(f"{p.stem}/{index}", tuple(s for _, s in block), file,
                                   block[0][0]))
        block.clear()

    for number, raw in enumerate(_read_text(p).splitlines(), start=1):
        line = raw.strip()
        if line == _SEPARATOR:
            close()
        elif line:
            block.append((number, line))
    close()
    if not stories:
        raise DataError("no stories in the file", file=file)
    return stories


def caters_comparisons(stories: Sequence[CatersStory], *,
                       pairs: Literal["all", "adjacent"] = "all",
                       max_pairs_per_story: int | None = None, seed: int = 0
                       ) -> list[Comparison]:
    """Which of two sentences of a story comes first.

    ``pairs="all"``: the 10 pairs of a story; ``"adjacent"``: the 4 of neighbouring sentences
    (the hardest); ``max_pairs_per_story`` keeps a seeded sample. Item 1 is the earlier one in
    exactly half of a story's pairs (odd one out a coin), so neither the label nor "item 1
    first" can be learnt per story. ``score`` is ``5 - position``, so a ranking within a
    context sorts the story back. Draws are seeded by ``seed`` and the story id, so a story's
    pairs do not change when other stories are added or dropped.
    """
    if pairs not in ("all", "adjacent"):
        raise DataError(f"pairs must be 'all' or 'adjacent', got {pairs!r}", field="pairs")
    if max_pairs_per_story is not None and max_pairs_per_story < 1:
        raise DataError(f"max_pairs_per_story must be at least 1, got {max_pairs_per_story}",
                        field="max_pairs_per_story")
    records: list[Comparison] = []
    for story in stories:
        sid, sents = story.story_id, story.sentences
        rng = random.Random(f"{seed}:{sid}")
        order = list(range(len(sents)))
        # the shown order must not be the true one (1 in 120 shuffles), giving labels away
        while order == sorted(order):
            rng.shuffle(order)
        context = "\n".join(f"- {sents[k]}" for k in order)
        chosen = (list(combinations(range(len(sents)), 2)) if pairs == "all"
                  else [(k, k + 1) for k in range(len(sents) - 1)])
        if max_pairs_per_story is not None and len(chosen) > max_pairs_per_story:
            chosen = sorted(rng.sample(chosen, max_pairs_per_story))
        half = len(chosen) // 2
        first_is_1 = [True] * half + [False] * half + [rng.random() < 0.5] * (len(chosen) % 2)
        rng.shuffle(first_is_1)
        for (i, j), keep in zip(chosen, first_is_1):
            a, b = (i, j) if keep else (j, i)
            records.append(Comparison(
                pair_id=f"{sid}:{i + 1}|{j + 1}", item1=sents[a], item2=sents[b],
                label=ITEM1 if keep else ITEM2, context=context, context_id=sid,
                item1_id=f"{sid}/s{a + 1}", item2_id=f"{sid}/s{b + 1}",
                score1=float(len(sents) - a), score2=float(len(sents) - b), group_id=sid))
    return records


def _natural_key(p: Path) -> tuple:
    """batch_2 before batch_10."""
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", p.name))


def _txt_files(folder: Path) -> list[Path]:
    files = sorted((f for f in folder.glob("*.txt") if f.is_file()), key=_natural_key)
    if not files:
        raise DataError("no CaTeRS .txt files in this folder", file=str(folder))
    return files


def _split_files(root: Path, split: str) -> list[Path]:
    """A split's files under the CaTeRS folder, or under a data folder holding ``caters/``."""
    if split not in CATERS_SPLITS:
        raise DataError(f"unknown CaTeRS split {split!r}; splits: {', '.join(CATERS_SPLITS)}",
                        field="split")
    base = root / "caters" if (root / "caters").is_dir() else root
    folder = base / CATERS_SPLITS[split]
    if not folder.is_dir():
        raise DataError(f"no {split} split here (expected the folder {CATERS_SPLITS[split]})",
                        file=str(base))
    return _txt_files(folder)


def load_caters(path: PathLike | Sequence[PathLike], *, split: str | None = None,
                name: str | None = None, pairs: Literal["all", "adjacent"] = "all",
                max_pairs_per_story: int | None = None, max_stories: int | None = None,
                seed: int = 0) -> Dataset:
    """CaTeRS comparisons from a file, a folder of ``.txt`` files or a list of files; with
    ``split``, from that split under the CaTeRS folder (or the data folder above it).
    ``max_stories`` keeps a seeded sample of whole stories (file order kept)."""
    if split is not None:
        files = _split_files(Path(path), split)
    elif isinstance(path, (str, Path)) or not isinstance(path, Sequence):
        p = Path(path)
        files = _txt_files(p) if p.is_dir() else [p]
    else:
        files = [Path(f) for f in path]
    stories: list[CatersStory] = []
    first_file: dict[str, str] = {}
    for f in files:
        # story ids come from file stems, which must not repeat
        if f.stem in first_file:
            raise DataError(f"two files named {f.stem!r} (also {first_file[f.stem]}) would "
                            "give their stories the same ids", file=str(f))
        first_file[f.stem] = str(f)
        stories += read_caters_stories(f)
    if max_stories is not None:
        if max_stories < 1:
            raise DataError(f"max_stories must be at least 1, got {max_stories}",
                            field="max_stories")
        if max_stories < len(stories):
            keep = set(random.Random(seed).sample(range(len(stories)), max_stories))
            stories = [s for k, s in enumerate(stories) if k in keep]
    records = caters_comparisons(stories, pairs=pairs, max_pairs_per_story=max_pairs_per_story,
                                 seed=seed)
    return Dataset(name=name or ("caters" if split is None else f"caters-{split}"),
                   kind="comparison", records=records, aspect="earlier", item_name="statement",
                   context_name="story, its statements in shuffled order",
                   aspect_description="the statement that appears before the other when the "
                   "story is told in its correct order",
                   source=", ".join(str(f) for f in files),
                   extra={"format": "caters", "split": split, "n_stories": len(stories),
                          "pairs": pairs, "max_pairs_per_story": max_pairs_per_story})


@dataclass(frozen=True)
class CatersAnnotations:
    """A brat ``.ann`` file: ``events`` id -> (character spans into the ``.txt``, text);
    ``relations`` (id, type, arg1, arg2), e.g. ("R1", "BEFORE", "T2", "T3")."""

    events: dict[str, tuple[tuple[tuple[int, int], ...], str]]
    relations: list[tuple[str, str, str, str]]


_EVENT = re.compile(r"^(T\d+)\t\w+ (\d+ \d+(?:;\d+ \d+)*)\t(.*)$")
_RELATION = re.compile(r"^(R\d+)\t(\w+) Arg1:(T\d+) Arg2:(T\d+)\s*$")


def read_caters_ann(path: PathLike) -> CatersAnnotations:
    """Events and relations of a ``.ann`` file (spans may be discontinuous: "624 627;634 644");
    other brat lines are skipped, a malformed T/R line is an error at its line."""
    p = Path(path)
    events: dict[str, tuple[tuple[tuple[int, int], ...], str]] = {}
    relations: list[tuple[str, str, str, str]] = []
    for number, line in enumerate(_read_text(p).splitlines(), start=1):
        if line.startswith("T"):
            m = _EVENT.match(line)
            if not m:
                raise DataError("not an event line 'T<n>\\t<type> <start> <end>\\t<text>'",
                                file=str(p), row=number)
            spans = tuple(tuple(map(int, s.split())) for s in m[2].split(";"))
            events[m[1]] = (spans, m[3])
        elif line.startswith("R"):
            m = _RELATION.match(line)
            if not m:
                raise DataError("not a relation line 'R<n>\\t<TYPE> Arg1:T<a> Arg2:T<b>'",
                                file=str(p), row=number)
            relations.append((m[1], m[2], m[3], m[4]))
    return CatersAnnotations(events, relations)
