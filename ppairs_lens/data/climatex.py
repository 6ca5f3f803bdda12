"""ClimateX TSV files: IPCC statements with their authors' confidence, compared pairwise.

Columns include ``statement_idx``, ``statement``, ``confidence`` (low .. very high), ``score``
(0-3) and ``split``. Statements stand alone (no context), so any two of a split can be
compared. The ClimateX paper's own predictions on its 300-statement test split sit in
``../shared/datasets/climatex/published_predictions/<model>_<setting>.csv``: the dataset's
columns plus ``prediction``, a level name or the model's unparsed text (``idk``), paired with
our insertion tags by :mod:`ppairs_lens.evaluation.level_agreement`.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ppairs_lens.data.reading import PathLike, choice, read_table, text, unique_text
from ppairs_lens.data.records import TIE, Dataset, ScoredItem
from ppairs_lens.data.scored_items import comparisons_of_pairs, comparisons_within_contexts
from ppairs_lens.errors import DataError

__all__ = ["CLIMATEX_LEVELS", "PublishedPredictions", "load_climatex",
           "published_prediction_sets", "read_climatex", "read_published_predictions"]

#: Confidence levels in order; a statement's score is its index here.
CLIMATEX_LEVELS: tuple[str, ...] = ("low", "medium", "high", "very high")
_CLIMATEX_COLUMNS = ("statement_idx", "statement", "confidence", "score", "split")


def read_climatex(path: PathLike) -> list[ScoredItem]:
    """IPCC statements with their expert confidence as a score 0-3 (low .. very high);
    ``confidence`` disagreeing with ``score`` means a corrupted row, so it is an error."""
    p = Path(path)
    file = str(p)
    _, rows = read_table(p, _CLIMATEX_COLUMNS, delimiter="\t", quoted=False)
    levels = {str(i): i for i in range(len(CLIMATEX_LEVELS))}
    items: list[ScoredItem] = []
    seen: dict[str, int] = {}
    for row, values in rows:
        idx = unique_text(values["statement_idx"], seen, file, row, "statement_idx",
                          "statement_idx")
        statement = text(values["statement"], file, row, "statement").strip()
        score = choice(values["score"], levels, file, row, "score",
                       "score must be an integer 0-3")
        confidence = values["confidence"].strip().lower()
        if confidence not in CLIMATEX_LEVELS:
            raise DataError(f"confidence must be one of {', '.join(CLIMATEX_LEVELS)}, got "
                            f"{values['confidence']!r}", file=file, row=row, field="confidence")
        if CLIMATEX_LEVELS.index(confidence) != score:
            raise DataError(f"confidence {confidence!r} does not match score {score} "
                            f"({CLIMATEX_LEVELS[score]!r})", file=file, row=row,
                            field="confidence")
        split = text(values["split"], file, row, "split").strip()
        items.append(ScoredItem(item_id=idx, text=statement, score=float(score), split=split))
    return items


def load_climatex(path: PathLike, split: str | None = "train", max_items: int | None = None,
                  seed: int = 0, *, max_pairs: int | None = 5000, swap_seed: int | None = 0,
                  name: str | None = None) -> Dataset:
    """Comparisons "which statement has the higher confidence" (ties kept).

    ``split=None`` uses all rows; ``max_items`` first draws that many statements (seeded). All
    pairs of the train split would be ~30 million, so beyond ``max_pairs`` that many distinct
    pairs are drawn (seeded); ``max_pairs=None``: every pair."""
    p = Path(path)
    file = str(p)
    items = read_climatex(p)
    if split is not None:
        splits = sorted({i.split or "" for i in items})
        items = [i for i in items if i.split == split]
        if not items:
            raise DataError(f"no statements in split {split!r}; splits: {', '.join(splits)}",
                            file=file, field="split")
    rng = random.Random(seed)
    if max_items is not None:
        if max_items < 2:
            raise DataError(f"max_items must be at least 2, got {max_items}", file=file,
                            field="max_items")
        if max_items < len(items):
            items = [items[k] for k in sorted(rng.sample(range(len(items)), max_items))]
    n = len(items)
    if max_pairs is None or n * (n - 1) // 2 <= max_pairs:
        records = comparisons_within_contexts(items, swap_seed=swap_seed, source=file,
                                              score_field="score")
    else:
        chosen: set[tuple[int, int]] = set()
        while len(chosen) < max_pairs:
            i, j = rng.sample(range(n), 2)
            chosen.add((min(i, j), max(i, j)))
        records = comparisons_of_pairs(items, sorted(chosen), swap_seed, file)
    labels = Counter(r.label for r in records)
    return Dataset(name=name or f"climatex-{split or 'all'}", kind="comparison",
                   records=records, aspect="confident", item_name="statement",
                   context_name="context",
                   aspect_description="stated by IPCC authors with higher confidence "
                   "(low < medium < high < very high)", source=file,
                   extra={"format": "climatex", "split": split, "n_items": n,
                          "ties": labels[TIE]})


#: File-name model -> the model's name in :mod:`ppairs_lens.evaluation.published`.
MODEL_NAMES = {"gpt-4": "GPT-4", "gpt-3.5-turbo": "GPT-3.5-turbo",
               "cohere-command-xl": "Cohere Command-XL"}


@dataclass(frozen=True)
class PublishedPredictions:
    """One published model's level per test statement (``None``: its answer named no level)."""

    model: str
    setting: str                          # "zero-shot" | "few-shot"
    levels: dict[str, int | None]         # statement_idx -> level index 0..3, or None
    path: str

    @property
    def n_unparsed(self) -> int:
        return sum(v is None for v in self.levels.values())


def read_published_predictions(path: PathLike) -> PublishedPredictions:
    """One ``<model>_<setting>.csv`` file; a missing or repeated statement id is an error."""
    p = Path(path)
    file = str(p)
    stem = p.stem
    if "_" not in stem:
        raise DataError("the file name must be <model>_<setting>.csv (e.g. gpt-4_few-shot.csv)",
                        file=file)
    model, setting = stem.rsplit("_", 1)
    _, rows = read_table(p, ("statement_idx", "prediction"))
    seen: dict[str, int] = {}
    levels: dict[str, int | None] = {}
    for row, values in rows:
        idx = unique_text(values["statement_idx"], seen, file, row, "statement_idx",
                          "statement_idx")
        pred = text(values["prediction"], file, row, "prediction", allow_empty=True).strip().lower()
        levels[idx] = CLIMATEX_LEVELS.index(pred) if pred in CLIMATEX_LEVELS else None
    return PublishedPredictions(MODEL_NAMES.get(model, model), setting, levels, file)


def published_prediction_sets(folder: PathLike) -> list[PublishedPredictions]:
    """Every prediction file in ``folder``, in name order; [] when the folder is absent."""
    d = Path(folder)
    return [read_published_predictions(f) for f in sorted(d.glob("*.csv"))] if d.is_dir() else []
