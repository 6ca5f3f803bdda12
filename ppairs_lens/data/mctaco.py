"""MC-TACO TSV files: a plausible vs an implausible answer to a temporal question.

Headerless rows of sentence, question, answer, yes/no, category; answers to one question
are paired yes against no.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

from ppairs_lens.data.reading import (
    PathLike,
    check_width,
    choice,
    dataset_name,
    read_delimited,
    text,
    warn,
)
from ppairs_lens.data.records import ITEM1, ITEM2, Comparison, Dataset
from ppairs_lens.errors import DataError

__all__ = ["MCTACO_COLUMNS", "load_mctaco"]

#: The columns of an MC-TACO row, in file order (the file has no header).
MCTACO_COLUMNS: tuple[str, ...] = ("sentence", "question", "answer", "label", "category")
_YES_NO = {"yes": True, "no": False}


def load_mctaco(path: PathLike, *, name: str | None = None, max_pairs_per_question: int = 3,
                seed: int = 0) -> Dataset:
    """Plausible vs implausible answers to one temporal question about a sentence.

    All yes x no pairs would weigh questions by answer count, so at most
    ``max_pairs_per_question`` are drawn per question (seeded); item 1 is a seeded coin per
    pair, balancing labels. One-sided questions give no pairs (a warning). The context is
    (sentence, question); the ``group_id`` is the sentence, which several questions share, so a
    split never tests on a passage seen in training.
    """
    if max_pairs_per_question < 1:
        raise DataError(f"max_pairs_per_question must be at least 1, got "
                        f"{max_pairs_per_question}", field="max_pairs_per_question")
    p = Path(path)
    file = str(p)
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for row, values in read_delimited(p, delimiter="\t", quoted=False, columns=MCTACO_COLUMNS):
        check_width(values, MCTACO_COLUMNS, file, row)
        fields = dict(zip(MCTACO_COLUMNS, values))
        for column in ("sentence", "question", "answer", "category"):
            text(fields[column], file, row, column)
        plausible = choice(fields["label"], _YES_NO, file, row, "label",
                           "label must be yes or no")
        group = groups.setdefault((fields["sentence"].strip(), fields["question"].strip()),
                                  {"row": row, "answers": {}, "yes": [], "no": []})
        answer = fields["answer"].strip()
        if answer in group["answers"]:
            raise DataError(f"answer {answer!r} appears twice for this question (first at row "
                            f"{group['answers'][answer]})", file=file, row=row, field="answer")
        group["answers"][answer] = row
        group["yes" if plausible else "no"].append((row, answer))
    records: list[Comparison] = []
    one_sided = 0
    for (sentence, question), group in groups.items():
        if not group["yes"] or not group["no"]:
            one_sided += 1
            continue
        ctx_id = f"q{group['row']}"
        sentence_id = f"s-{hashlib.sha1(sentence.encode()).hexdigest()[:10]}"
        rng = random.Random(f"{seed}:{sentence}\n{question}")
        pairs = [(y, n) for y in group["yes"] for n in group["no"]]
        if len(pairs) > max_pairs_per_question:
            pairs = sorted(rng.sample(pairs, max_pairs_per_question))
        for (yes_row, yes), (no_row, no) in pairs:
            yes_first = rng.random() < 0.5
            a, b = ((yes_row, yes), (no_row, no)) if yes_first else ((no_row, no), (yes_row, yes))
            records.append(Comparison(
                pair_id=f"{ctx_id}:{min(yes_row, no_row)}|{max(yes_row, no_row)}",
                item1=a[1], item2=b[1], label=ITEM1 if yes_first else ITEM2,
                context=f"{sentence}\nQuestion: {question}", context_id=ctx_id,
                item1_id=f"row{a[0]}", item2_id=f"row{b[0]}",
                score1=1.0 if yes_first else 0.0, score2=0.0 if yes_first else 1.0,
                group_id=sentence_id))
    if not records:
        raise DataError(f"no question has both a 'yes' and a 'no' answer ({len(groups)} "
                        "questions), so there is nothing to compare", file=file, field="label")
    if one_sided:
        warn(f"{file}: {one_sided} of {len(groups)} questions have only 'yes' or only 'no' "
             "answers and give no comparisons")
    return Dataset(name=name or dataset_name(p), kind="comparison", records=records,
                   aspect="plausible", item_name="answer", context_name="passage and question",
                   aspect_description="a sensible answer given common sense about time "
                   "(duration, order, frequency, typical time, stationarity)",
                   source=file, extra={"format": "mctaco", "n_questions": len(groups),
                                       "questions_without_pairs": one_sided})
