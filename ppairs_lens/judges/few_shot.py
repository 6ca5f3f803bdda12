"""A few-shot prompted judge: solved demonstrations as earlier chat turns, then the question.

A small model's zero-shot judge may answer one position whatever the items. The few-shot judge
first shows ``k`` solved comparisons (a user turn, and the template's answer as the assistant
turn), then asks the test comparison, read and calibrated as the zero-shot judge is (both
orders of the *test* pair; the demonstrations keep theirs). Demonstrations are:

* drawn (seeded) from the training records only, none sharing a leak group or an item (text
  or id) with an evaluated record;
* balanced: half answer the first choice (a comparison is presented in the order that gives
  the wanted answer; statements are drawn half true), in a seeded random order;
* one prefix for every row (one group key), so prefix sharing runs them once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.models.hook_points import Hook
from ppairs_lens.activations.prompts import (
    ContrastPair,
    StatementTemplate,
    Template,
    chat_turns_text,
    default_template,
    render_record,
    split_finals,
)
from ppairs_lens.data.records import ITEM1, TIE, Comparison, Dataset, Statement
from ppairs_lens.errors import DataError, TemplateError
from ppairs_lens.judges.zero_shot import (
    ZeroShotResult,
    choice_logodds_of,
    judge_report,
    swap_comparison,
    swapped_dataset,
)
from ppairs_lens.models.backend import backend_of

__all__ = ["DEMO_GROUP", "Demo", "build_few_shot_pairs", "evaluate_few_shot", "few_shot",
           "few_shot_prompts", "record_group", "select_demos"]

#: The prefix-sharing group key of every few-shot row: one group, so the demonstrations (the
#: prompt's common start) run once for all rows.
DEMO_GROUP: str = "__few_shot__"


@dataclass(frozen=True)
class Demo:
    """One demonstration: a record, presented as it stands, and its answer (0: the first
    choice, "Choice 1" / " True"; 1: the second)."""

    record: Comparison | Statement
    answer: int


def record_group(rec: Comparison | Statement) -> str:
    """A record's leak group: ``group_id``, else its context, else its own pair id."""
    for key in (getattr(rec, "group_id", None), rec.context_id):
        if key is not None:
            return str(key)
    return rec.pair_id


def _items(rec: Comparison | Statement) -> set[str]:
    if isinstance(rec, Statement):
        return {rec.statement}
    return {x for x in (rec.item1, rec.item2, rec.item1_id, rec.item2_id) if x is not None}


def _answer(rec: Comparison | Statement) -> int:
    if isinstance(rec, Statement):
        return 0 if rec.label else 1
    return 0 if rec.label == ITEM1 else 1


def select_demos(train: Dataset, evaluated: Dataset, *, k: int = 4, seed: int = 0) -> list[Demo]:
    """``k`` balanced demonstrations from ``train`` sharing no leak group and no item with
    ``evaluated`` (ties never used); :class:`DataError` when too few are left."""
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if train.kind != evaluated.kind:
        raise DataError(f"few-shot demonstrations from a {train.kind} dataset ({train.name}) "
                        f"cannot serve a {evaluated.kind} dataset ({evaluated.name})", field="kind")
    groups = {record_group(r) for r in evaluated.records}
    items: set[str] = set().union(*(_items(r) for r in evaluated.records))
    pool = [r for r, y in zip(train.records, train.labels())
            if y != TIE and record_group(r) not in groups and not (_items(r) & items)]
    rng = np.random.default_rng(seed)
    n_first = k // 2 + (int(rng.integers(2)) if k % 2 else 0)  # odd k: a coin for the extra one
    if train.kind == "statement":
        by_answer = [[r for r in pool if _answer(r) == a] for a in (0, 1)]
        want = (n_first, k - n_first)
        if any(len(b) < w for b, w in zip(by_answer, want)):
            raise DataError(f"few-shot needs {want[0]} true and {want[1]} false training "
                            f"statements unrelated to the evaluated ones; {train.name} has "
                            f"{len(by_answer[0])} and {len(by_answer[1])}", field="k")
        chosen = [Demo(by_answer[a][i], a) for a in (0, 1)
                  for i in rng.choice(len(by_answer[a]), want[a], replace=False)]
        return [chosen[i] for i in rng.permutation(k)]
    if len(pool) < k:
        raise DataError(f"few-shot needs {k} training comparisons sharing no group or item "
                        f"with the evaluated ones; {train.name} has {len(pool)} of "
                        f"{len(train)}", field="k")
    picks = [pool[i] for i in rng.choice(len(pool), k, replace=False)]
    answers = rng.permutation([0] * n_first + [1] * (k - n_first))
    # A comparison gives either answer: present it in the order whose answer is wanted.
    return [Demo(r if _answer(r) == a else swap_comparison(r), int(a))
            for r, a in zip(picks, answers)]


def build_few_shot_pairs(tokenizer, dataset: Dataset, demos: Sequence[Demo],
                         template: Template | None = None) -> list[ContrastPair]:
    """Contrast pairs of ``dataset``'s records, each after the same demonstration turns (asked
    with ``dataset``'s question, answered as assistant prefix + choice)."""
    template = template or default_template(dataset)
    if (dataset.kind == "statement") != isinstance(template, StatementTemplate):
        raise TemplateError(f"{type(template).__name__} does not fit a {dataset.kind} dataset "
                            f"({dataset.name})")
    turns = []
    for d in demos:
        user, assistant = render_record(template, dataset, d.record)
        turns.append((user, assistant + template.choices[d.answer]))
    name = f"{type(template).__name__} (few-shot)"
    texts = []
    for rec in dataset.records:
        user, assistant = render_record(template, dataset, rec)
        texts.append(chat_turns_text(tokenizer, template.system, turns, user) + assistant)
    return [ContrastPair(rec.pair_id, tuple(prefix), finals, DEMO_GROUP, label)
            for rec, label, (prefix, finals) in zip(
                dataset.records, dataset.labels(),
                split_finals(tokenizer, texts, template.choices, name))]


def few_shot_prompts(tokenizer, dataset: Dataset, demos: Sequence[Demo],
                     template: Template | None = None, *, calibrate: bool = True
                     ) -> list[ContrastPair]:
    """The prompts :func:`few_shot` runs: each record, then each swapped (comparisons,
    ``calibrate``)."""
    pairs = build_few_shot_pairs(tokenizer, dataset, demos, template)
    if calibrate and dataset.kind == "comparison":
        pairs += build_few_shot_pairs(tokenizer, swapped_dataset(dataset), demos, template)
    return pairs


def few_shot(bridge, dataset: Dataset, train_dataset: Dataset, template: Template | None = None,
             *, k: int = 4, seed: int = 0, demos: Sequence[Demo] | None = None,
             calibrate: bool = True, hooks: Sequence[Hook] = (),
             final_hooks: Sequence[Hook] = (), settings: HarvestSettings = HarvestSettings()
             ) -> ZeroShotResult:
    """P(item 1 preferred) per record of ``dataset`` from the few-shot judge, its ``k``
    demonstrations drawn from ``train_dataset`` unless ``demos`` are given; other options as
    in :func:`ppairs_lens.judges.zero_shot.zero_shot`."""
    backend_of(bridge)
    if demos is None:
        demos = select_demos(train_dataset, dataset, k=k, seed=seed)
    pairs = few_shot_prompts(bridge.tokenizer, dataset, demos, template, calibrate=calibrate)
    n = len(dataset)
    calibrate = len(pairs) > n
    ld = choice_logodds_of(bridge, pairs, hooks=hooks, final_hooks=final_hooks,
                           settings=settings, desc=f"few-shot judge {dataset.name}")
    return ZeroShotResult.from_logodds(ld[:n], ld[n:] if calibrate else None, len(pairs))


def evaluate_few_shot(bridge, dataset: Dataset, train_dataset: Dataset,
                      template: Template | None = None, *, k: int = 4, seed: int = 0,
                      calibrate: bool = True, **options: Any) -> dict:
    """:func:`ppairs_lens.judges.zero_shot.judge_report` of the few-shot judge, plus
    ``few_shot``: ``k``, ``seed`` and the demonstrations (pair ids, answers 1 = first choice)."""
    demos = select_demos(train_dataset, dataset, k=k, seed=seed)
    res = few_shot(bridge, dataset, train_dataset, template, demos=demos, calibrate=calibrate,
                   **options)
    report = judge_report(dataset, res)
    report["few_shot"] = {"k": k, "seed": seed,
                          "demo_pair_ids": [d.record.pair_id for d in demos],
                          "demo_answers": [d.answer + 1 for d in demos]}
    return report
