"""A judge finetuned on labelled comparisons, read exactly like the prompted judge.

:func:`finetune_judge` trains a *copy* of the model's weights on both item orders of every
training comparison and wraps it (LoRA merged) in a TransformerBridge of its own; the user's
model is never changed, and an interrupted run returns nothing and leaves nothing applied. It
answers the prompted judge's question the same way (swap-calibrated log-odds of the two choice
tokens), so any difference to the prompted judge is the training and nothing else.

:func:`finetune_curve` trains one copy through nested label sets and reads the test pairs
after each block with :func:`read_choices` (the same prompts and choice logits, read from the
Hugging Face model directly, LoRA unmerged, equal to the bridge's up to float rounding), so a
point costs the training alone. The label curve of :mod:`analyses.finetuning` (paper Section
5.2) takes nested, stratified label sets (:func:`nested_order`), and :func:`curve_rows` puts a
CI over leak groups on the accuracy averaged over seeds.
"""

from __future__ import annotations

import time

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from ppairs_lens.activations.prompts import Template
from ppairs_lens.data.records import Dataset
from ppairs_lens.evaluation.bootstrap import bootstrap
from ppairs_lens.evaluation.resampled import weighted_accuracy
from ppairs_lens.finetuning.cost import Cost, measure
from ppairs_lens.finetuning.data import choice_examples, collate_shared, prompt_examples
from ppairs_lens.finetuning.train import (
    TrainingConfig,
    TrainingLog,
    choice_logits,
    hf_model_copy,
    prepare_model,
    train_model,
    trainable_parameters,
)
from ppairs_lens.judges.zero_shot import ZeroShotResult, judge_report, zero_shot
from ppairs_lens.models.loading import model_name

__all__ = ["CurvePoint", "FinetunedJudge", "curve_rows", "finetune_curve", "finetune_judge",
           "nested_order", "pad_token_id", "read_choices"]


@dataclass(frozen=True)
class FinetunedJudge:
    """A finetuned copy of a model, as a TransformerBridge, with how it was trained.

    ``cost`` covers copying the weights, adding adapters and training; ``trainable_params``
    are those the optimiser updated (LoRA: the adapters only).
    """

    bridge: Any
    config: TrainingConfig
    base_model: str
    n_train: int
    log: TrainingLog
    trainable_params: int
    total_params: int
    cost: Cost

    def zero_shot(self, dataset: Dataset, template: Template | None = None) -> ZeroShotResult:
        """The finetuned judge's calibrated answers on ``dataset`` (both item orders)."""
        return zero_shot(self.bridge, dataset, template)

    def evaluate(self, dataset: Dataset, template: Template | None = None) -> dict:
        """:func:`ppairs_lens.judges.zero_shot.judge_report` of the finetuned judge."""
        return judge_report(dataset, self.zero_shot(dataset, template))

    def summary(self) -> dict:
        """What to save beside results: config, sizes, cost, first / last training loss."""
        return {"method": self.config.method, "config": self.config, "base_model": self.base_model,
                "n_train": self.n_train, **_log_summary(self.log),
                "trainable_params": self.trainable_params, "total_params": self.total_params,
                **_cost_summary(self.cost)}


def _log_summary(log: TrainingLog) -> dict:
    return {"n_examples": log.n_examples, "n_steps": log.n_steps, "train_seconds": log.seconds,
            "examples_per_s": log.examples_per_s,
            "cpu_seconds_per_example": log.cpu_seconds / max(log.n_examples, 1),
            "loss_first": log.losses[0], "loss_last": log.losses[-1]}


def _cost_summary(cost: Cost) -> dict:
    return {"seconds": cost.seconds, "cpu_seconds": cost.cpu_seconds, "peak_mb": cost.peak_mb,
            "memory_kind": cost.memory_kind}


def pad_token_id(tokenizer) -> int:
    """The id batches are padded with (masked out, so any id works): pad, else end of text."""
    pad = tokenizer.pad_token_id
    return int(pad if pad is not None else (tokenizer.eos_token_id or 0))


def finetune_judge(bridge, train: Dataset, template: Template | None = None,
                   cfg: TrainingConfig = TrainingConfig(), *, progress: bool = True
                   ) -> FinetunedJudge:
    """A copy of ``bridge``'s weights finetuned on ``train`` as a judge; ``template``: the
    prompt (default: the dataset kind's), the same as the prompted judge's and the store's."""
    from transformer_lens.model_bridge import TransformerBridge

    examples = choice_examples(bridge.tokenizer, train, template)
    device = next(bridge.original_model.parameters()).device
    with measure(device) as m:
        model = prepare_model(hf_model_copy(bridge), cfg)
        n_trainable = trainable_parameters(model)
        log = train_model(model, examples, cfg, pad_token_id(bridge.tokenizer),
                          progress=progress, desc=f"{cfg.method} {train.name}")
        if cfg.method == "lora":
            model = model.merge_and_unload()
    for p in model.parameters():
        p.requires_grad_(False)
    model.eval()
    n_total = int(sum(p.numel() for p in model.parameters()))
    base = model_name(bridge)
    trained = TransformerBridge.boot_transformers(base, hf_model=model,
                                                  tokenizer=bridge.tokenizer, device=device)
    trained.eval()
    trained.ppairs_model_name = f"{base}+{cfg.method}-seed{cfg.seed}"
    assert m.cost is not None
    return FinetunedJudge(trained, cfg, base, len(train), log, n_trainable, n_total, m.cost)


@torch.no_grad()
def read_choices(model, tokenizer, dataset: Dataset, template: Template | None = None, *,
                 batch_size: int = 8) -> ZeroShotResult:
    """The swap-calibrated answers of a Hugging Face ``model`` (LoRA merged or not) on
    ``dataset``, as :func:`ppairs_lens.judges.zero_shot.zero_shot` reads a bridge's;
    ``batch_size`` comparisons a pass."""
    was = model.training
    model.eval()
    ex = prompt_examples(tokenizer, dataset, template)
    dev = next(model.parameters()).device
    pad = pad_token_id(tokenizer)
    ld = np.zeros(len(ex))
    for i in range(0, len(ex), 2 * batch_size):
        b = collate_shared(ex[i:i + 2 * batch_size], pad, dev)
        logits = choice_logits(model, b)
        rows = torch.arange(len(b.targets), device=logits.device)
        ld[i:i + len(b.targets)] = (logits[rows, b.targets].double()
                                    - logits[rows, b.wrong].double()).cpu().numpy()
    model.train(was)
    return ZeroShotResult.from_logodds(ld[0::2], ld[1::2], len(ex))


@dataclass(frozen=True)
class CurvePoint:
    """The finetuned judge after ``n_train`` comparisons of a curve run: test answers, log so
    far, and the cost of training up to here (earlier points' test reads left out)."""

    n_train: int
    result: ZeroShotResult
    log: TrainingLog
    trainable_params: int
    cost: Cost

    def summary(self, cfg: TrainingConfig) -> dict:
        return {"method": cfg.method, "config": cfg, "n_train": self.n_train,
                **_log_summary(self.log), "trainable_params": self.trainable_params,
                **_cost_summary(self.cost)}


def finetune_curve(bridge, train: Dataset, test: Dataset, sizes: Sequence[int],
                   template: Template | None = None, cfg: TrainingConfig = TrainingConfig(),
                   *, progress: bool = True) -> list[CurvePoint]:
    """A copy of ``bridge``'s weights trained on ``train`` in order, read on ``test`` after
    the first ``n`` records for every ``n`` in ``sizes`` (and all): each point is the judge a
    run on those ``n`` gives with blocks at the same smaller sizes (without them, a reshuffle).
    ``train``'s order is the nesting, so draw it seeded and stratified."""
    examples = choice_examples(bridge.tokenizer, train, template)
    # untied comparisons before each record position: a size counts records, blocks count
    # the comparisons trained on
    untied = np.cumsum([0] + [r.label != 0 for r in train.records])
    want = sorted({min(int(n), len(train.records)) for n in sizes} | {len(train.records)})
    ends = {int(untied[n]): n for n in want if untied[n] > 0}
    device = next(bridge.original_model.parameters()).device
    points: list[CurvePoint] = []
    read_s = [0.0, 0.0]
    with measure(device) as m:
        model = prepare_model(hf_model_copy(bridge), cfg)
        n_trainable = trainable_parameters(model)

        def at_block(n_groups: int, log: TrainingLog) -> None:
            # The point's cost is taken before its own read, minus the earlier points' reads;
            # the read is timed with plain clocks (a nested measure would reset the GPU's
            # peak-memory counter and lose the training peak).
            so_far = m.elapsed()
            cost = Cost(so_far.seconds - read_s[0], so_far.peak_mb, so_far.memory_kind,
                        so_far.cpu_seconds - read_s[1])
            t, c = time.perf_counter(), time.process_time()
            res = read_choices(model, bridge.tokenizer, test, template)
            read_s[0] += time.perf_counter() - t
            read_s[1] += time.process_time() - c
            points.append(CurvePoint(ends[n_groups], res, log, n_trainable, cost))

        train_model(model, examples, cfg, pad_token_id(bridge.tokenizer), progress=progress,
                    desc=f"{cfg.method} {train.name}", blocks=sorted(ends), on_block=at_block)
    del model
    return points


def nested_order(labels: np.ndarray, sizes, seed: int) -> np.ndarray:
    """A seeded order of the training pairs whose first ``n`` are a stratified draw (at least
    2 of each class where there are) for every ``n`` in ``sizes``, each keeping the smaller
    sizes' pairs; ties and the rest last, each block sorted."""
    y = np.asarray(labels)
    rng = np.random.default_rng(seed)
    pools = {c: rng.permutation(np.flatnonzero(y == c)) for c in (1, 2)}
    n12 = len(pools[1]) + len(pools[2])
    taken = {1: 0, 2: 0}
    out: list[np.ndarray] = []
    for size in sorted({min(int(n), n12) for n in sizes if int(n) > 0}):
        k1 = int(round(size * len(pools[1]) / max(n12, 1)))
        k1 = min(max(k1, min(2, len(pools[1])), size - len(pools[2])), len(pools[1]),
                 size - min(2, len(pools[2])))
        k1 = min(max(k1, taken[1]), size - taken[2])
        k = {1: k1, 2: size - k1}
        out.append(np.sort(np.concatenate([pools[c][taken[c]:k[c]] for c in (1, 2)])))
        taken = k
    rest = np.setdiff1d(np.arange(len(y)), np.concatenate(out) if out else [])
    return np.concatenate([*out, np.sort(rest)]).astype(int)


def curve_rows(name: str, n_all: int, cfg, run, y: np.ndarray,
               groups: list) -> list[dict]:
    """Per (method, size): accuracy of each seed, and the mean over seeds with a CI over
    leak groups (every seed scored on each resample of the test groups)."""
    rows = []
    for m in cfg.curve_methods:
        for n in sorted({min(k, n_all) for k in cfg.sizes_of(m)}):
            accs, ps = [], []
            for seed in cfg.curve_seeds:
                s = run(m, n, seed)
                accs.append(float(np.mean((s.p > 0.5) == (y == 1))))
                ps.append(s.p)
                rows.append({"dataset": name, "method": m, "n_labels": n, "seed": seed,
                             "accuracy": accs[-1], "train_seconds": s.cost.seconds,
                             "train_cpu_seconds": s.cost.cpu_seconds})
            ci = bootstrap(lambda w, ps=ps: np.mean([weighted_accuracy(w, y, p) for p in ps],
                                                    axis=0),
                           len(y), groups, **cfg.settings.boot_kwargs())
            lo, hi = ci["lo"], ci["hi"]
            rows.append({"dataset": name, "method": m, "n_labels": n, "seed": "mean",
                         "accuracy": float(np.mean(accs)), "lo": float(lo), "hi": float(hi),
                         "ci_counts": ci["ci_counts"], "n_seeds": len(accs)})
    return rows
