"""Finetuning a copy of a model's weights on choice examples: LoRA (``peft``) or full.

The user's model is never trained: :func:`hf_model_copy` builds a fresh Hugging Face model
from the weights the bridge runs on now, so the bridge and its hooks are untouched; the global
RNG is left as it was (every draw seeded from :attr:`TrainingConfig.seed` in ``fork_rng``).

The objective is the cross-entropy of the correct choice token over the full vocabulary at the
prompt's last position, on both item orders of each comparison; only that position is
projected onto the vocabulary (``logits_to_keep=1``: ~0.1% of a step's compute on SmolLM2).

A step's batch holds whole comparisons, both orders together, their common prefix run once.
Comparisons are visited in a seeded order in *blocks* (:func:`train_model`'s ``blocks``):
block ``k`` holds comparisons ``blocks[k-1]:blocks[k]``, is shuffled on its own and no batch
crosses its end, so the model after block ``k`` is exactly what a run on the first
``blocks[k]`` comparisons with the same earlier block ends gives (same batches, optimiser state
and dropout draws); a run without those ends shuffles its comparisons across them, a different
draw of the same schedule. One run through nested label sets thus gives every point of a label
curve (``on_block``, during which the clocks stop).
"""

from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor
from tqdm.auto import tqdm

from ppairs_lens.errors import ModelLoadError, PPairsError
from ppairs_lens.finetuning.data import (
    ChoiceBatch,
    ChoiceExample,
    SharedBatch,
    collate,
    collate_shared,
    comparison_groups,
)
from ppairs_lens.models.backend import backend_of

__all__ = ["METHODS", "TrainingConfig", "TrainingLog", "choice_logits", "choice_loss",
           "hf_model_copy", "mean_choice_loss", "prepare_model", "train_model",
           "trainable_parameters"]

#: Finetuning methods: low-rank adapters on every linear module, or every weight.
METHODS: tuple[str, ...] = ("lora", "full")

#: Learning rates when :attr:`TrainingConfig.lr` is None (our choice; the paper does not say).
DEFAULT_LR = {"lora": 2e-4, "full": 2e-5}


@dataclass(frozen=True)
class TrainingConfig:
    """How a judge is finetuned (saved with every result): AdamW, constant learning rate.

    LoRA defaults are the paper's (rank 64, alpha 64, every linear module, one epoch);
    dropout, learning rates, batch size and gradient clipping are ours. ``lr`` None:
    :data:`DEFAULT_LR` of the method.
    """

    method: str = "lora"
    rank: int = 64
    alpha: int = 64
    dropout: float = 0.05
    target_modules: str | tuple[str, ...] = "all-linear"
    epochs: int = 1
    lr: float | None = None
    batch_size: int = 8
    weight_decay: float = 0.0
    max_grad_norm: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise PPairsError(f"finetuning method must be one of {METHODS}, got {self.method!r}")
        if self.rank < 1 or self.epochs < 1 or self.batch_size < 1:
            raise PPairsError("rank, epochs and batch_size must be at least 1")

    @property
    def learning_rate(self) -> float:
        return DEFAULT_LR[self.method] if self.lr is None else float(self.lr)


@dataclass(frozen=True)
class TrainingLog:
    """A training run: every step's loss, examples seen, wall and this process's CPU time."""

    losses: tuple[float, ...]
    n_examples: int
    n_steps: int
    seconds: float
    cpu_seconds: float = float("nan")

    @property
    def examples_per_s(self) -> float:
        return self.n_examples / self.seconds if self.seconds else float("nan")


def _no_init_weights():
    """transformers' context that skips weight initialisation (moved in 5.0)."""
    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # transformers 4.x
        from transformers.modeling_utils import no_init_weights
    return no_init_weights()


def hf_model_copy(bridge):
    """A fresh Hugging Face model, on the bridge's device, holding a copy of the weights
    ``bridge`` runs on now (their ``_original_component`` wrappers stripped)."""
    if backend_of(bridge) != "bridge":
        raise ModelLoadError("finetuning needs a TransformerBridge (load_model(), the default "
                             "backend); a HookedTransformer has no Hugging Face model to copy")
    from transformers import AutoModelForCausalLM

    hf = bridge.original_model
    if getattr(hf, "hf_device_map", None) and len(set(hf.hf_device_map.values())) > 1:
        raise ModelLoadError("finetuning copies the model onto one device; this one is spread "
                             "over several (device_map)")
    state = {k.replace("._original_component", ""): v for k, v in hf.state_dict().items()}
    param = next(hf.parameters())
    config = copy.deepcopy(hf.config)
    # No random init (~2 s a copy on a CPU): every weight is overwritten below, and a missing
    # one is refused, so none keeps its uninitialised memory
    with _no_init_weights():
        try:
            model = AutoModelForCausalLM.from_config(config, dtype=param.dtype,
                                                     attn_implementation="sdpa")
        except (ValueError, ImportError):
            model = AutoModelForCausalLM.from_config(config, dtype=param.dtype)
    target = model.state_dict()
    missing = [k for k in target if k not in state]
    tied = {k for k in missing if k.endswith("lm_head.weight")
            and getattr(config, "tie_word_embeddings", False)}
    if set(missing) - tied:
        raise ModelLoadError(f"cannot copy the bridge's weights into a fresh "
                             f"{type(model).__name__}: {len(missing)} missing, e.g. "
                             f"{sorted(set(missing) - tied)[:3]}")
    model.load_state_dict({k: state[k] for k in target if k in state}, strict=False)
    model.tie_weights()
    return model.to(param.device)


def prepare_model(model, cfg: TrainingConfig):
    """``model`` made trainable: seeded LoRA adapters on ``cfg.target_modules``, or all (full)."""
    if cfg.method == "full":
        for p in model.parameters():
            p.requires_grad_(True)
        return model
    from peft import LoraConfig, get_peft_model

    lora = LoraConfig(r=cfg.rank, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout,
                      target_modules=(cfg.target_modules if isinstance(cfg.target_modules, str)
                                      else list(cfg.target_modules)),
                      bias="none", task_type="CAUSAL_LM")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)
        return get_peft_model(model, lora)


def trainable_parameters(model) -> int:
    return int(sum(p.numel() for p in model.parameters() if p.requires_grad))


def choice_logits(model, batch: ChoiceBatch | SharedBatch) -> Tensor:
    """Next-token logits (float32) after each row's prompt. A :class:`SharedBatch` runs each
    group's prefix once, its key-value cache (gradient included) shared by the suffixes."""
    if isinstance(batch, ChoiceBatch):
        out = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                    position_ids=batch.position_ids, use_cache=False, logits_to_keep=1)
        return out.logits[:, -1].float()
    pre = model(input_ids=batch.prefix_ids, attention_mask=batch.prefix_mask,
                position_ids=batch.prefix_pos, use_cache=True,
                logits_to_keep=torch.empty(0, dtype=torch.long))  # no logits: cache only
    cache = pre.past_key_values
    cache.reorder_cache(batch.group)  # one row per example (index_select: gradient kept)
    mask = torch.cat([batch.prefix_mask[batch.group], batch.suffix_mask], dim=1)
    out = model(input_ids=batch.suffix_ids, attention_mask=mask, position_ids=batch.suffix_pos,
                past_key_values=cache, use_cache=True, logits_to_keep=1)
    return out.logits[:, -1].float()


def choice_loss(model, batch: ChoiceBatch | SharedBatch) -> tuple[Tensor, Tensor]:
    """``(mean cross-entropy of the correct choice, detached logit(correct) - logit(other))``."""
    logits = choice_logits(model, batch)
    loss = F.cross_entropy(logits, batch.targets)
    rows = torch.arange(len(batch.targets), device=logits.device)
    margin = (logits[rows, batch.targets] - logits[rows, batch.wrong]).detach()
    return loss, margin


@torch.no_grad()
def mean_choice_loss(model, examples: Sequence[ChoiceExample], pad_id: int,
                     batch_size: int = 8) -> float:
    """Mean :func:`choice_loss` over ``examples`` in eval mode (no dropout, no gradients)."""
    was = model.training
    model.eval()
    dev = next(model.parameters()).device
    total = 0.0
    for i in range(0, len(examples), batch_size):
        part = examples[i:i + batch_size]
        loss, _ = choice_loss(model, collate(part, pad_id, dev))
        total += float(loss) * len(part)
    model.train(was)
    return total / len(examples)


def train_model(model, examples: Sequence[ChoiceExample], cfg: TrainingConfig, pad_id: int, *,
                progress: bool = True, desc: str = "finetune",
                on_step: Callable[[int, float], None] | None = None,
                blocks: Sequence[int] | None = None,
                on_block: Callable[[int, TrainingLog], None] | None = None) -> TrainingLog:
    """Train ``model`` (from :func:`prepare_model`) in place on ``examples``.

    Each step takes ``max(1, cfg.batch_size // 2)`` comparisons (both orders: about
    ``cfg.batch_size`` examples). ``blocks``: comparison counts that end a block (module doc;
    several need one epoch); after each, ``on_block(comparisons so far, log so far)``, the
    model in training mode (its eval-mode reads are the caller's; they draw no random
    numbers)."""
    if not examples:
        raise PPairsError("no training examples")
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise PPairsError("the model has no trainable parameters")
    groups = comparison_groups(examples)
    ends = sorted({int(b) for b in (blocks or ()) if 0 < int(b) < len(groups)} | {len(groups)})
    if len(ends) > 1 and cfg.epochs != 1:
        raise PPairsError("training in blocks (a label curve) needs epochs=1")
    per = max(1, cfg.batch_size // 2)
    dev = params[0].device
    opt = torch.optim.AdamW(params, lr=cfg.learning_rate, weight_decay=cfg.weight_decay)
    rng = np.random.default_rng(cfg.seed)
    starts = [0, *ends[:-1]]
    n_steps = cfg.epochs * sum(math.ceil((e - b) / per) for b, e in zip(starts, ends))
    losses: list[float] = []
    seen = 0
    t0, c0 = time.perf_counter(), time.process_time()
    paused = [0.0, 0.0]  # seconds, CPU seconds spent in on_block: not training

    def log() -> TrainingLog:
        return TrainingLog(tuple(losses), seen, len(losses),
                           time.perf_counter() - t0 - paused[0],
                           time.process_time() - c0 - paused[1])

    model.train()
    with torch.inference_mode(False), torch.enable_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(cfg.seed)  # dropout masks
        bar = tqdm(total=n_steps, desc=desc, unit="step", disable=not progress)
        for _ in range(cfg.epochs):
            for b, e in zip(starts, ends):
                order = b + rng.permutation(e - b)
                for i in range(0, len(order), per):
                    part = [examples[j] for g in order[i:i + per] for j in groups[g]]
                    loss, _ = choice_loss(model, collate_shared(part, pad_id, dev))
                    if not torch.isfinite(loss):
                        raise PPairsError(f"training loss is {float(loss)} at step "
                                          f"{len(losses)}; lower the learning rate or use "
                                          "float32")
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    if cfg.max_grad_norm:
                        torch.nn.utils.clip_grad_norm_(params, cfg.max_grad_norm)
                    opt.step()
                    seen += len(part)
                    losses.append(loss.detach().item())
                    if on_step is not None:
                        on_step(len(losses), losses[-1])
                    bar.update(1)
                    bar.set_postfix(loss=f"{losses[-1]:.3f}")
                if on_block is not None and cfg.epochs == 1:
                    p, q = time.perf_counter(), time.process_time()
                    on_block(e, log())
                    model.train()
                    paused[0] += time.perf_counter() - p
                    paused[1] += time.process_time() - q
        bar.close()
    if on_block is not None and cfg.epochs != 1:
        on_block(len(groups), log())
    model.eval()
    return log()

