"""A judge finetuned on labelled comparisons, read exactly like the prompted judge.

:func:`finetune_judge` trains a *copy* of the model's weights (LoRA or full,
:mod:`ppairs_lens.finetuning.train`) on both item orders of every training comparison, then
wraps the trained copy (LoRA merged into its weights) in a TransformerBridge of its own. The
user's model is never changed in place: its weights are copied first, and the copy alone is
trained. A run that is interrupted (Ctrl-C, an error) returns nothing and leaves nothing
applied; only a finished run returns a :class:`FinetunedJudge`.

The finetuned judge answers the prompted judge's question: its log-odds of the two choice
tokens at the prompt's last position, both item orders, swap-calibrated in log-odds
(:func:`ppairs_lens.judges.zero_shot.zero_shot` on the trained bridge), so any difference to
the prompted judge is the training and nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ppairs_lens.activations.prompts import Template
from ppairs_lens.data.records import Dataset
from ppairs_lens.finetuning.cost import Cost, measure
from ppairs_lens.finetuning.data import choice_examples
from ppairs_lens.finetuning.train import (
    FinetuneConfig,
    TrainingLog,
    hf_model_copy,
    prepare_model,
    train_model,
    trainable_parameters,
)
from ppairs_lens.judges.zero_shot import ZeroShotResult, judge_report, zero_shot
from ppairs_lens.models.loading import model_name

__all__ = ["FinetunedJudge", "finetune_judge", "pad_token_id"]


@dataclass(frozen=True)
class FinetunedJudge:
    """A finetuned copy of a model, as a TransformerBridge, with how it was trained.

    ``cost`` covers copying the weights, adding adapters and training (wall time, peak
    memory: :mod:`ppairs_lens.finetuning.cost`); ``trainable_params`` are the parameters the
    optimiser updated (LoRA: the adapters only), ``total_params`` the model's.
    """

    bridge: Any
    config: FinetuneConfig
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
                "n_train": self.n_train, "n_examples": self.log.n_examples,
                "n_steps": self.log.n_steps, "train_seconds": self.log.seconds,
                "examples_per_s": self.log.examples_per_s,
                "cpu_seconds_per_example": self.log.cpu_seconds / self.log.n_examples,
                "loss_first": self.log.losses[0], "loss_last": self.log.losses[-1],
                "trainable_params": self.trainable_params, "total_params": self.total_params,
                "seconds": self.cost.seconds, "cpu_seconds": self.cost.cpu_seconds,
                "peak_mb": self.cost.peak_mb,
                "memory_kind": self.cost.memory_kind}


def pad_token_id(tokenizer) -> int:
    """The id batches are padded with (masked out, so any id works): pad, else end of text."""
    pad = tokenizer.pad_token_id
    return int(pad if pad is not None else (tokenizer.eos_token_id or 0))


def finetune_judge(bridge, train: Dataset, template: Template | None = None,
                   cfg: FinetuneConfig = FinetuneConfig(), *, progress: bool = True
                   ) -> FinetunedJudge:
    """Finetune a copy of ``bridge``'s weights on ``train`` (both orders of every untied
    comparison) and return it as a judge. ``bridge`` itself is not changed.

    ``template``: the prompt the judge is asked (default: the dataset kind's), the same one
    the prompted judge and the probe's store use.
    """
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
