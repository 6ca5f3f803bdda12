"""Dataset loading: one loader per file format, plus built-in generated datasets."""

from __future__ import annotations

from ppairs_lens.data.builtin import BUILTIN, BuiltinFactory, builtin_dataset
from ppairs_lens.data.loaders import (
    CLIMATEX_LEVELS,
    FORMATS,
    DataWarning,
    comparisons_within_contexts,
    load_climatex,
    load_dataset,
    load_mctaco,
    load_pairwise_json,
    load_scored_items,
    load_story_cloze,
    load_true_false_csv,
    read_climatex,
    read_scored_items,
    scored_item_aspects,
    sniff_format,
)

__all__ = [
    "BUILTIN", "CLIMATEX_LEVELS", "FORMATS", "BuiltinFactory", "DataWarning",
    "builtin_dataset", "comparisons_within_contexts", "load_climatex", "load_dataset",
    "load_mctaco", "load_pairwise_json", "load_scored_items", "load_story_cloze",
    "load_true_false_csv", "read_climatex", "read_scored_items", "scored_item_aspects",
    "sniff_format",
]
