"""Pairwise JSON files (LLMBar, MT-Bench): which of two outputs answers an instruction better.

The file is a JSON list of ``{input, output_1, output_2, label}`` objects with label 1 or 2.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from ppairs_lens.data.reading import (
    ITEM_LABELS,
    PathLike,
    choice,
    dataset_name,
    get,
    kind_of,
    read_json_document,
    text,
)
from ppairs_lens.data.records import Comparison, Dataset
from ppairs_lens.errors import DataError

__all__ = ["load_pairwise_json"]


def load_pairwise_json(path: PathLike, *, name: str | None = None, aspect: str = "helpful",
                       aspect_description: str | None = (
                           "follows the instruction precisely and answers it honestly and "
                           "helpfully")) -> Dataset:
    """Comparisons from a JSON list of ``{input, output_1, output_2, label}``.

    Records with the same instruction (the context) share a context id (MT-Bench has several
    pairs per question), so splits keep them together and the harvester runs it once. Rows in
    errors are 1-based list positions, except JSON syntax errors, placed at a line.
    """
    p = Path(path)
    file = str(p)
    data = read_json_document(p)
    if not isinstance(data, list):
        raise DataError(f"expected a JSON list of comparisons, got {kind_of(data)}", file=file,
                        row=1)
    if not data:
        raise DataError("the JSON list is empty", file=file, row=1)
    records: list[Comparison] = []
    seen: dict[tuple[str, str, str], int] = {}
    for row, obj in enumerate(data, 1):
        if not isinstance(obj, dict):
            raise DataError(f"expected an object, got {kind_of(obj)}", file=file, row=row)
        instruction = text(get(obj, "input", file, row), file, row, "input")
        out1 = text(get(obj, "output_1", file, row), file, row, "output_1", allow_empty=True)
        out2 = text(get(obj, "output_2", file, row), file, row, "output_2", allow_empty=True)
        label = choice(get(obj, "label", file, row), ITEM_LABELS, file, row, "label",
                       "label must be 1 or 2 (the better output)")
        key = (instruction, out1, out2)
        if key in seen:
            raise DataError(f"duplicate comparison: same input and outputs as row {seen[key]}",
                            file=file, row=row, field="input")
        seen[key] = row
        ctx_id = f"in-{hashlib.sha1(instruction.encode()).hexdigest()[:10]}"
        records.append(Comparison(pair_id=f"row{row}", item1=out1, item2=out2, label=label,
                                  context=instruction, context_id=ctx_id,
                                  item1_id=f"row{row}/1", item2_id=f"row{row}/2"))
    return Dataset(name=name or dataset_name(p), kind="comparison", records=records,
                   aspect=aspect, item_name="output", context_name="instruction",
                   aspect_description=aspect_description, source=file,
                   extra={"format": "pairwise"})
