"""The prompted zero-shot evaluator: ask the model and read its answer token's probability.

This is the baseline every probe is compared with. After the prompt up to "... is Choice ", the
model's next-token logits for "1" and "2" (or " True" / " False") give P(choice 1) as a softmax
over those two logits alone. LLM judges prefer one position, so comparisons are calibrated as
in the paper's Section 4.3: each is also asked with the items swapped and the two answers are
averaged (:func:`ppairs_lens.judges.calibration.swap_calibrate`). Statements have no order and
are not calibrated.

The logits are read with :func:`ppairs_lens.activations.harvest.run_branches` (prefix = prompt
without its last token, branch = that last token), so long shared contexts run once, exactly as
in a harvest, and ablation hooks plug in the same way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float

from ppairs_lens.errors import TemplateError
from ppairs_lens.evaluation.metrics import evaluate
from ppairs_lens.activations.harvest import (
    HarvestSettings,
    Hook,
    check_context_length,
    run_branches,
)
from ppairs_lens.activations.prompts import ContrastPair, Template, build_contrast_pairs
from ppairs_lens.data.records import ITEM1, ITEM2, TIE, Comparison, Dataset
from ppairs_lens.judges.calibration import choice_columns, choice_probability, swap_calibrate
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
def choice_probabilities(
    bridge,
    pairs: Sequence[ContrastPair],
    *,
    hooks: Sequence[Hook] = (),
    final_hooks: Sequence[Hook] = (),
    settings: HarvestSettings = HarvestSettings(),
) -> Float[np.ndarray, "pair"]:
    """P(first choice token) per pair: softmax over the two choice logits after the prefix.

    ``final_hooks`` act on the step that reads the logits (the prompt's last token).
    """
    if not pairs:
        return np.zeros(0)
    short = [p.pair_id for p in pairs if len(p.prefix_ids) < 2]
    if short:
        raise TemplateError(f"prompt prefix shorter than 2 tokens for pair(s) {short[:5]}")
    prefixes = [p.prefix_ids[:-1] for p in pairs]
    check_context_length(bridge, [p.pair_id for p in pairs], prefixes)
    ids, columns = choice_columns([p.final_ids for p in pairs])
    out = run_branches(bridge, prefixes, [(p.prefix_ids[-1],) for p in pairs],
                       [p.group for p in pairs], logit_ids=ids, hooks=hooks,
                       final_hooks=final_hooks, settings=settings).logits[:, 0]  # [pair, n_ids]
    return choice_probability(out, columns)


@dataclass(frozen=True)
class ZeroShotResult:
    """P(item 1 preferred) per record, the uncalibrated parts, and the rows it cost."""

    p: Float[np.ndarray, "record"]  # calibrated where calibrate=True
    p_original: Float[np.ndarray, "record"]  # P(choice 1), items in the dataset's order
    p_swapped: Float[np.ndarray, "record"] | None  # P(choice 1), items swapped
    n_rows: int  # prompts run through the model (each a full forward of one prompt)


def zero_shot(
    bridge,
    dataset: Dataset,
    template: Template | None = None,
    *,
    calibrate: bool = True,
    hooks: Sequence[Hook] = (),
    final_hooks: Sequence[Hook] = (),
    settings: HarvestSettings = HarvestSettings(),
) -> ZeroShotResult:
    """P(item 1 preferred) per record (P(True) for statements), with its uncalibrated parts.

    Comparisons are position-calibrated unless ``calibrate=False``; both orders run in one
    :func:`run_branches` call, so a shared context serves both. ``hooks`` / ``final_hooks`` as
    in :func:`choice_probabilities`.
    """
    backend_of(bridge)  # first: an object that is no TransformerLens model gets a clear error
    pairs = build_contrast_pairs(bridge.tokenizer, dataset, template)
    n = len(pairs)
    calibrate = calibrate and dataset.kind == "comparison"
    if calibrate:
        pairs = pairs + build_contrast_pairs(bridge.tokenizer, swapped_dataset(dataset), template)
    p = choice_probabilities(bridge, pairs, hooks=hooks, final_hooks=final_hooks,
                             settings=settings)
    orig = p[:n]
    if not calibrate:
        return ZeroShotResult(orig, orig, None, n)
    swapped = p[n:]
    return ZeroShotResult(swap_calibrate(orig, swapped), orig, swapped, 2 * n)


def evaluate_zero_shot(bridge, dataset: Dataset, template: Template | None = None,
                       calibrate: bool = True, **options: Any) -> dict:
    """Score the zero-shot evaluator on ``dataset`` (ties left out); ``options`` (``hooks``,
    ``final_hooks``, ``settings``) go to :func:`zero_shot`.

    Returns the metrics (``{metric: {value, lo, hi}}`` under ``"metrics"``), the per-record
    probabilities, how many records were scored, and ``n_rows``: prompts run through the model
    (twice the records when calibrating), the cost to set against a probe's harvest.
    """
    res = zero_shot(bridge, dataset, template, calibrate=calibrate, **options)
    labels = np.asarray(dataset.labels())
    keep = labels != TIE
    groups = list(np.asarray(dataset.context_ids(), dtype=object)[keep])
    metrics = evaluate(labels[keep], res.p[keep], groups=groups) if keep.any() else {}
    return {
        "metrics": metrics,
        "proba": res.p,
        "n_records": len(dataset),
        "n_scored": int(keep.sum()),
        "n_ties": int((~keep).sum()),
        "calibrated": res.p_swapped is not None,
        "n_rows": res.n_rows,
    }
