"""The ClimateX paper's own per-statement predictions on its 300-statement test split.

``../shared/datasets/climatex/published_predictions/`` holds one CSV per (model, setting),
named ``<model>_<setting>.csv`` (``gpt-4_few-shot.csv``): the dataset's columns plus
``prediction``, a level name or the model's unparsed text (``idk``). Our insertion tags are
paired with these statement by statement (:mod:`ppairs_lens.evaluation.level_agreement`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ppairs_lens.data.climatex import CLIMATEX_LEVELS
from ppairs_lens.data.fields import text, unique_text
from ppairs_lens.data.reading import PathLike, read_table
from ppairs_lens.errors import DataError

__all__ = ["PublishedPredictions", "read_published_predictions", "published_prediction_sets"]

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
    """One ``<model>_<setting>.csv`` file; a row without a statement id or with a repeated one
    is an error naming the file and row."""
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
        pred = text(values["prediction"], file, row, "prediction", allow_empty=True)
        pred = pred.strip().lower()
        levels[idx] = CLIMATEX_LEVELS.index(pred) if pred in CLIMATEX_LEVELS else None
    return PublishedPredictions(MODEL_NAMES.get(model, model), setting, levels, file)


def published_prediction_sets(folder: PathLike) -> list[PublishedPredictions]:
    """Every prediction file in ``folder``, in name order; [] when the folder is absent."""
    d = Path(folder)
    return [read_published_predictions(f) for f in sorted(d.glob("*.csv"))] if d.is_dir() \
        else []
