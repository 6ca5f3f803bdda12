"""The prompted zero-shot evaluator: ask the model and read its answer token's probability.

This is the baseline every probe is compared with. After the prompt up to "... is Choice ", the
model's next-token logits for "1" and "2" (or " True" / " False") give P(choice 1) as a softmax
over those two logits alone; its log-odds ``ld`` = logit("1") - logit("2") is read in float64.
LLM judges prefer one position, so comparisons are calibrated as in the paper's Section 4.3:
each is also asked with the items swapped, and the two answers are combined in log-odds,
``z = (ld_original - ld_swapped) / 2``, ``p = sigmoid(z)``
(:func:`ppairs_lens.judges.calibration.swap_calibrated_logodds`). Statements have no order and
are not calibrated (``z`` = their raw log-odds of " True").

The logits are read with :func:`ppairs_lens.activations.runner.run_branches` (prefix = prompt
without its last token, branch = that last token), so long shared contexts run once, exactly as
in a harvest, and ablation hooks plug in the same way. A harvest's prompt up to its last token
is this judge's prompt in the items' order: the harvest reads the same log-odds in its own
passes, the store keeps them, and :func:`ppairs_lens.judges.study.judge_study` runs only the
swapped order where they are stored.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float

from ppairs_lens.activations.few_logits import choice_columns, choice_logodds
from ppairs_lens.activations.harvest import check_context_length
from ppairs_lens.activations.runner import HarvestSettings, run_branches
from ppairs_lens.models.hook_points import Hook
from ppairs_lens.activations.prompts import ContrastPair, Template, build_contrast_pairs
from ppairs_lens.data.records import ITEM1, ITEM2, TIE, Comparison, Dataset
from ppairs_lens.errors import TemplateError
from ppairs_lens.evaluation.metrics import evaluate
from ppairs_lens.judges.calibration import (
    judge_diagnostics,
    sigmoid,
    swap_calibrated_logodds,
)
from ppairs_lens.judges.progress import judge_bar
from ppairs_lens.models.backend import backend_of


def swap_comparison(rec: Comparison) -> Comparison:
    """The same comparison with the items in the other order (label flipped, ties kept)."""
    label = {ITEM1: ITEM2, ITEM2: ITEM1}.get(rec.label, rec.label)
    return dataclasses.replace(rec, item1=rec.item2, item2=rec.item1, label=label,
                               item1_id=rec.item2_id, item2_id=rec.item1_id,
                               score1=rec.score2, score2=rec.score1)


def swapped_dataset(dataset: Dataset) -> Dataset:
    """``dataset`` with every comparison asked in the other order."""
    if dataset.kind != "comparison":
        raise ValueError("only comparisons have an order to swap")
    return dataclasses.replace(dataset, name=f"{dataset.name}:swapped",
                               records=[swap_comparison(r) for r in dataset.records])


@torch.inference_mode()
def choice_logodds_of(bridge, pairs: Sequence[ContrastPair], *, hooks: Sequence[Hook] = (),
                      final_hooks: Sequence[Hook] = (),
                      settings: HarvestSettings = HarvestSettings(), n_branch: int = 1,
                      desc: str = "prompted judge"
                      ) -> Float[np.ndarray, "pair"] | Float[np.ndarray, "pair branch"]:
    """logit(first choice) - logit(second choice) per pair, after the prefix (float64).

    Rows with the same ``pair.group`` share their common prefix (run once). ``final_hooks``
    act on the step that reads the logits (the prompt's last token). ``n_branch > 1`` reads
    the last token ``n_branch`` times from the same prefix cache, each a position of its own
    in the read pass (final hooks may treat each differently: batched ablation), and returns
    ``[pair, n_branch]``. ``desc`` names the progress bar (prompts done, time left).
    """
    if not pairs:
        return np.zeros(0)
    short = [p.pair_id for p in pairs if len(p.prefix_ids) < 2]
    if short:
        raise TemplateError(f"prompt prefix shorter than 2 tokens for pair(s) {short[:5]}")
    prefixes = [p.prefix_ids[:-1] for p in pairs]
    check_context_length(bridge, [p.pair_id for p in pairs], prefixes)
    ids, columns = choice_columns([p.final_ids for p in pairs])
    with judge_bar(len(pairs), desc, branches=n_branch) as update:
        out = run_branches(bridge, prefixes, [(p.prefix_ids[-1],) * n_branch for p in pairs],
                           [p.group for p in pairs], logit_ids=ids, hooks=hooks,
                           final_hooks=final_hooks, settings=settings,
                           progress=update).logits  # [pair, branch, ids]
    ld = np.stack([choice_logodds(out[:, j], columns) for j in range(n_branch)], axis=1)
    return ld[:, 0] if n_branch == 1 else ld


def choice_probabilities(bridge, pairs: Sequence[ContrastPair], **options: Any
                         ) -> Float[np.ndarray, "pair"]:
    """P(first choice token) per pair: softmax over the two choice logits after the prefix
    (``sigmoid`` of :func:`choice_logodds_of`, whose ``options`` it takes)."""
    return sigmoid(choice_logodds_of(bridge, pairs, **options))


@dataclass(frozen=True)
class ZeroShotResult:
    """P(item 1 preferred) per record, its log-odds, the uncalibrated parts, and the rows run.

    ``z`` is the calibrated log-odds (``(ld_original - ld_swapped) / 2``; uncalibrated: the raw
    ``ld_original``) and ``p = sigmoid(z)``. ``ld_*`` are logit(choice 1) - logit(choice 2) per
    order, read from the logits in float64; ``p_*`` = ``sigmoid(ld_*)``.
    """

    p: Float[np.ndarray, "record"]  # calibrated where calibrate=True
    p_original: Float[np.ndarray, "record"]  # P(choice 1), items in the dataset's order
    p_swapped: Float[np.ndarray, "record"] | None  # P(choice 1), items swapped
    n_rows: int  # prompts run through the model (each a full forward of one prompt)
    z: Float[np.ndarray, "record"]
    ld_original: Float[np.ndarray, "record"]
    ld_swapped: Float[np.ndarray, "record"] | None

    @classmethod
    def from_logodds(cls, ld_original: Float[np.ndarray, "record"],
                     ld_swapped: Float[np.ndarray, "record"] | None, n_rows: int
                     ) -> ZeroShotResult:
        """The result of one or both orders' log-odds (``ld_swapped`` None: uncalibrated)."""
        ld_o = np.asarray(ld_original, dtype=np.float64)
        ld_s = None if ld_swapped is None else np.asarray(ld_swapped, dtype=np.float64)
        z = ld_o if ld_s is None else swap_calibrated_logodds(ld_o, ld_s)
        return cls(sigmoid(z), sigmoid(ld_o), None if ld_s is None else sigmoid(ld_s), n_rows,
                   z, ld_o, ld_s)


def judge_prompts(tokenizer, dataset: Dataset, template: Template | None = None, *,
                  calibrate: bool = True) -> list[ContrastPair]:
    """The prompts :func:`zero_shot` runs: each record, then (comparisons, ``calibrate``) each
    record in swapped order. A run's cost can be planned from them before it starts."""
    pairs = build_contrast_pairs(tokenizer, dataset, template)
    if calibrate and dataset.kind == "comparison":
        pairs = pairs + build_contrast_pairs(tokenizer, swapped_dataset(dataset), template)
    return pairs


#: One side of a zero-shot pass: records (one order of them), their template, and the
#: answers already known by pair id (the harvest's, on the items' own order; None: none).
Side = tuple[Dataset, Template | None, Mapping[str, float] | None]


def sides_logodds(bridge, sides: Sequence[Side], *, desc: str = "zero-shot judge",
                  **options: Any) -> tuple[list[Float[np.ndarray, "record"]], list[int]]:
    """The zero-shot judge's log-odds on every record of every side, and per side how many
    prompts ran: every prompt whose answer is not known, of all sides, in ONE
    :func:`choice_logodds_of` call (``options``: its ``hooks``, ``final_hooks``,
    ``settings``), so a context shared by several sides (both orders, several datasets) runs
    once: :func:`zero_shot` (one dataset, both orders) and
    :func:`ppairs_lens.judges.study.judge_study` (every dataset) both call it."""
    prompts, answers = [], []
    for dataset, template, known in sides:
        ps = build_contrast_pairs(bridge.tokenizer, dataset, template)
        got = np.array([(known or {}).get(p.pair_id, np.nan) for p in ps], dtype=np.float64)
        answers.append(got)
        prompts += [p for p, v in zip(ps, got) if np.isnan(v)]
    runs = [int(np.isnan(got).sum()) for got in answers]
    ld = iter(choice_logodds_of(bridge, prompts, desc=desc, **options))
    for got, n in zip(answers, runs):  # the answers run, in order, where none was known
        got[np.isnan(got)] = [next(ld) for _ in range(n)]
    return answers, runs


def zero_shot(bridge, dataset: Dataset, template: Template | None = None, *,
              calibrate: bool = True, hooks: Sequence[Hook] = (),
              final_hooks: Sequence[Hook] = (), settings: HarvestSettings = HarvestSettings()
              ) -> ZeroShotResult:
    """P(item 1 preferred) per record (P(True) for statements), with its log-odds and parts.

    Comparisons are position-calibrated in log-odds unless ``calibrate=False``; both orders run
    in one :func:`run_branches` call (:func:`sides_logodds`), so a shared context serves both.
    ``hooks`` / ``final_hooks`` as in :func:`choice_logodds_of`.
    """
    backend_of(bridge)  # first: an object that is no TransformerLens model gets a clear error
    calibrate = calibrate and dataset.kind == "comparison" and len(dataset) > 0
    sides = [(dataset, template, None)]
    if calibrate:   # the prompts of judge_prompts, in its order
        sides.append((swapped_dataset(dataset), template, None))
    ld, runs = sides_logodds(bridge, sides, desc=f"zero-shot judge {dataset.name}",
                             hooks=hooks, final_hooks=final_hooks, settings=settings)
    return ZeroShotResult.from_logodds(ld[0], ld[1] if calibrate else None, sum(runs))


def judge_report(dataset: Dataset, res: ZeroShotResult) -> dict:
    """Metrics, diagnostics and per-record answers of a prompted judge's ``res`` on ``dataset``.

    Metrics (``{metric: {value, lo, hi}}``) leave ties out and bootstrap over the records'
    leak groups; ``p_by_pair`` / ``z_by_pair`` map each pair_id to its calibrated P(item 1) /
    log-odds, so a study can pair the judge with a probe on the same records.
    """
    labels = np.asarray(dataset.labels())
    keep = labels != TIE
    groups = list(np.asarray(dataset.group_ids(), dtype=object)[keep])
    metrics = evaluate(labels[keep], res.p[keep], groups=groups) if keep.any() else {}
    ids = [r.pair_id for r in dataset.records]
    return {
        "metrics": metrics,
        "proba": res.p,
        "p_by_pair": {k: float(v) for k, v in zip(ids, res.p)},
        "z_by_pair": {k: float(v) for k, v in zip(ids, res.z)},
        "diagnostics": judge_diagnostics(res, labels),
        "n_records": len(dataset),
        "n_scored": int(keep.sum()),
        "n_ties": int((~keep).sum()),
        "calibrated": res.p_swapped is not None,
        "n_rows": res.n_rows,
    }


def evaluate_zero_shot(bridge, dataset: Dataset, template: Template | None = None,
                       calibrate: bool = True, **options: Any) -> dict:
    """:func:`judge_report` of :func:`zero_shot` (``options``: its ``hooks``, ``final_hooks``,
    ``settings``) on ``dataset``, ties left out; its ``n_rows``, the prompts run (twice the
    records when calibrating), is the cost to set against a probe's harvest."""
    return judge_report(dataset, zero_shot(bridge, dataset, template, calibrate=calibrate,
                                           **options))
