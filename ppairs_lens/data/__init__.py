"""Dataset loading: one module per file format, plus built-in generated datasets.

Every loader reads and checks values through ``reading``, so a malformed file is reported at
its (file, row, field); ``formats`` tells formats apart and dispatches ``load_dataset``.
"""

from __future__ import annotations

from ppairs_lens.data.builtin import BUILTIN, BUILTIN_NAMES, BuiltinFactory, builtin_dataset
from ppairs_lens.data.caters import load_caters
from ppairs_lens.data.climatex import CLIMATEX_LEVELS, load_climatex, read_climatex
from ppairs_lens.data.formats import FORMATS, load_dataset, sniff_format
from ppairs_lens.data.hf import comparisons_from_hf, statements_from_hf
from ppairs_lens.data.mctaco import load_mctaco
from ppairs_lens.data.pairwise import load_pairwise_json
from ppairs_lens.data.reading import DataWarning
from ppairs_lens.data.scored_items import (comparisons_within_contexts, load_scored_items,
                                           read_scored_items, scored_item_aspects)
from ppairs_lens.data.story_cloze import load_story_cloze
from ppairs_lens.data.true_false import load_true_false_csv

__all__ = [
    "BUILTIN", "BUILTIN_NAMES", "CLIMATEX_LEVELS", "FORMATS", "BuiltinFactory", "DataWarning",
    "builtin_dataset", "comparisons_from_hf", "comparisons_within_contexts", "load_caters",
    "load_climatex", "load_dataset", "load_mctaco", "load_pairwise_json", "load_scored_items",
    "load_story_cloze", "load_true_false_csv", "read_climatex", "read_scored_items",
    "scored_item_aspects", "sniff_format", "statements_from_hf",
]
