"""Where a model is run: prompts read at their branch tokens, shared prefixes run once.

The harvest, the judges and the interventions all run their prompts through
:func:`run_branches`, as they share a shape and the waste to avoid:

- shared prefixes run once (:mod:`ppairs_lens.activations.prefix_sharing`);
- a token budget by device: small on a CPU (the bridge's attention materialises its scores),
  large on a GPU (a pass costs little per token, much per pass), capped by free GPU memory;
- reads at branch tokens, each seeing the prompt but not its siblings, in the same pass as the
  row's remainder; or the logits at each row's last prompt token (``logits_at="end"``), so a
  harvest gives the prompted judge's answer without running its prompt again.

Positions are explicit and padding is masked from lengths (never from token ids: the pad
token is also the end-of-turn token), so what is read equals an unbatched, unpadded run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from numbers import Integral
from typing import Literal

import torch
from jaxtyping import Float
from torch import Tensor
from transformers import DynamicCache

from ppairs_lens.errors import ModelLoadError, PPairsError
from ppairs_lens.activations.few_logits import (
    no_logits,
    plain_unembedding,
    project_logits,
    unembedding_hooked,
)
from ppairs_lens.activations.hooked_steps import hooked_steps
from ppairs_lens.activations.prefix_sharing import (
    Forward,
    GroupPlan,
    PrefixState,
    Read,
    end_in_tails,
    extend,
    plan,
    run_rows,
)
from ppairs_lens.models.backend import (
    FINAL_NORM_HOOK,
    backend_of,
    hooked_device,
    resolve_hooks,
)
from ppairs_lens.models.hook_points import Hook


#: Rows x (context + new tokens) held per forward pass. Measured on SmolLM2-135M (2-core CPU,
#: a SummEval article with its 120 pairs): 4096 took 61 s, 16384 took 96 s. The bridge's
#: attention materialises its scores (batch x heads x new x cached tokens, in float32);
#: past ~30 MB each such tensor is a fresh mmap whose pages fault in at every layer (16384:
#: 16 million minor faults, 41 s of system time), while below ~1000 new tokens per pass the
#: weights, read once per pass, dominate (1024: 86 s).
DEFAULT_TOKEN_BUDGET = 4096
#: On a GPU a pass costs little per token but much per pass (kernel launches, the bridge's
#: Python hooks). Measured on an H100 (SmolLM2-135M architecture, 960 SummEval pairs): 4096
#: took 20.8 s, 16384 5.6 s, 65536 4.2 s.
GPU_TOKEN_BUDGET = 65536
#: ... capped so a pass's key-value cache stays under this share of the GPU memory free at the
#: start (a part's cache is a gathered copy of its parent's; attention scores come on top).
GPU_MEMORY_SHARE = 0.2


def default_token_budget(model, device: torch.device) -> int:
    """:data:`DEFAULT_TOKEN_BUDGET` on a CPU, else :data:`GPU_TOKEN_BUDGET` capped by memory."""
    if device.type != "cuda":
        return DEFAULT_TOKEN_BUDGET
    cfg = model.cfg
    kv_heads = getattr(cfg, "n_key_value_heads", None) or cfg.n_heads
    itemsize = getattr(cfg, "dtype", torch.float32).itemsize
    per_token = 2 * cfg.n_layers * kv_heads * cfg.d_head * itemsize
    free, _ = torch.cuda.mem_get_info(device)
    fits = int(GPU_MEMORY_SHARE * free // per_token)
    return max(DEFAULT_TOKEN_BUDGET, min(GPU_TOKEN_BUDGET, fits))


@dataclass(frozen=True)
class HarvestSettings:
    """How a harvest batches its work; none of these change the numbers stored."""

    token_budget: int | None = None  # rows x (context + suffix) tokens per pass; None: by device
    share_prefixes: bool = True  # False runs each pair's whole prefix (a reference path)
    out_dtype: torch.dtype = torch.float32
    # True: the contexts of many small groups in one pass (direct scoring: :func:`run_plan`)
    batch_contexts: bool = False

    def __post_init__(self):
        b = self.token_budget  # any integer type (a numpy one from a sweep over budgets too)
        if b is not None and (isinstance(b, bool) or not isinstance(b, Integral) or b < 1):
            raise PPairsError(f"HarvestSettings.token_budget must be a positive number of "
                              f"tokens or None (by device), not {self.token_budget!r}")

    def budget_for(self, model, device: torch.device) -> int:
        return int(self.token_budget or default_token_budget(model, device))


def model_device(model) -> torch.device:
    """Where token ids go: the input embedding's device. Not ``cfg.device`` alone: a bridge
    booted around an HF model records the best available device there wherever the weights
    are. A disk-offloaded embedding is on 'meta': then ``cfg.device``, which
    :func:`ppairs_lens.models.loading.load_model` points at accelerate's execution device."""
    if backend_of(model) == "hooked":
        return hooked_device(model)
    emb = model.original_model.get_input_embeddings()
    dev = next(emb.parameters()).device if emb is not None else torch.device("meta")
    if dev.type != "meta":
        return dev
    cfg_dev = getattr(model.cfg, "device", None)
    return torch.device(cfg_dev) if cfg_dev else next(model.parameters()).device


@dataclass
class BranchOutputs:
    """What :func:`run_branches` read (``end_logits``: with ``logits_at="end"``)."""

    acts: Float[Tensor, "row branch readout d_model"] | None
    logits: Float[Tensor, "row branch n_ids"] | None
    end_logits: Float[Tensor, "row n_ids"] | None = None


def no_cache_message() -> str:
    """Why a bridge forward returned no key-value cache, with the installed versions."""
    import importlib.metadata as md

    def version(dist: str) -> str:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return "absent"

    return (f"the TransformerBridge returned no key-value cache (transformer-lens "
            f"{version('transformer-lens')}, transformers {version('transformers')}), so "
            "prefix-cached reads would see only their own tokens. transformers 5.24 renamed "
            "the outputs' past_key_values to cache, which transformer-lens 4.3 does not read: "
            "install transformers<5.24 (ppairs-lens pins it).")


_BLOCK_NAME = re.compile(r"^blocks\.(\d+)\.")


def read_depth(model, names: Sequence[str], logit_ids: Sequence[int] | None = None,
               final_hooks: Sequence[Hook] = ()) -> int | None:
    """Blocks a pass must run to read ``names``: one past the deepest named block; None where
    the whole model must run (logits, ``final_hooks``, a name outside the blocks, the last
    block, a HookedTransformer). A block's output depends on the blocks up to it alone, so a
    pass stopped after it reads the same numbers, and its cache serves passes as shallow."""
    if logit_ids is not None or final_hooks or not names or backend_of(model) == "hooked":
        return None
    blocks = [_BLOCK_NAME.match(n) for n in names]
    if not all(blocks):
        return None
    depth = 1 + max(int(b.group(1)) for b in blocks)
    return depth if depth < model.cfg.n_layers else None


def bridge_steps(bridge, names: Sequence[str] = (), logit_ids: Sequence[int] | None = None,
                 final_hooks: Sequence[Hook] = (), depth: int | None = None
                 ) -> tuple[Forward, Read]:
    """The bridge's :mod:`~ppairs_lens.activations.prefix_sharing` steps: a forward keeping
    only the cache, and a read of ``names`` / ``logit_ids`` at a pass's last columns under
    ``final_hooks``. A plain, unhooked unembedding computes no logits: ``logit_ids`` are
    projected from ``ln_final.hook_out``. Every pass stops before block ``depth``."""
    names = list(names)
    plain = plain_unembedding(bridge)
    final_key = "final norm, for logits"  # its own key: names may hold ln_final.hook_out too

    def skip_unembedding() -> bool:  # called under the pass's hooks: they may hook unembed
        return plain and not unembedding_hooked(bridge)

    def forward(ids, cache, mask, pos):
        if depth is not None:
            # A pass stopped early returns no cache: HF extends the one it is handed in place.
            cache = DynamicCache() if cache is None else cache
            bridge(ids, return_type=None, stop_at_layer=depth, past_key_values=cache,
                   attention_mask=mask, position_ids=pos)
            return cache
        keep = no_logits() if skip_unembedding() else 1
        _, cache = bridge(ids, return_type="logits_and_cache", logits_to_keep=keep,
                          past_key_values=cache, attention_mask=mask, position_ids=pos)
        if cache is None:
            # Without it every later pass would see its own tokens only: wrong, not slow.
            raise ModelLoadError(no_cache_message())
        return cache

    def read(ids, cache, mask, pos, n_read):
        grabbed: dict[str, Tensor] = {}

        def grabber(name):  # keyed by our name: the bridge reports aliases' canonical names
            def grab(x, hook):
                # A copy on the model's device: one transfer per pass below, not one
                # device-to-host sync per hook point (which stalls a GPU at every layer).
                grabbed[name] = x[:, -n_read:].to(torch.float32, copy=True)
                return x
            return grab

        # Grabbers after final_hooks on the same point, so they see what those hooks did
        # (the last sees what the unembedding would get).
        grab_final = plain and logit_ids is not None
        fwd = (list(final_hooks) + [(n, grabber(n)) for n in names]
               + ([(FINAL_NORM_HOOK, grabber(final_key))] if grab_final else []))
        with bridge.hooks(fwd_hooks=fwd):
            skip = skip_unembedding()
            full = logit_ids is not None and not skip
            stop = {} if depth is None else {"stop_at_layer": depth}
            out = bridge(ids, past_key_values=cache, attention_mask=mask, position_ids=pos,
                         logits_to_keep=no_logits() if skip else n_read,
                         return_type="logits" if full else None, **stop)
        acts = (torch.stack([grabbed[n].to(ids.device) for n in names], 2).flatten(0, 1).cpu()
                if names else None)
        if logit_ids is None:
            lg = None
        elif full:
            lg = out[:, -n_read:, list(logit_ids)].float().cpu().flatten(0, 1)
        else:
            lg = project_logits(bridge, grabbed[final_key], logit_ids).cpu().flatten(0, 1)
        return acts, lg

    return forward, read


def model_steps(model, names: Sequence[str] = (), logit_ids: Sequence[int] | None = None,
                final_hooks: Sequence[Hook] = (), depth: int | None = None
                ) -> tuple[Forward, Read]:
    """:func:`bridge_steps`, or a HookedTransformer's (always the whole model)."""
    if backend_of(model) == "hooked":
        return hooked_steps(model, names, logit_ids, final_hooks)
    return bridge_steps(model, names, logit_ids, final_hooks, depth)


def context_chunks(plans: Sequence[GroupPlan], token_budget: int) -> list[list[int]]:
    """Indices of ``plans`` with a context (a row of only padding would see no key), longest
    first, in chunks whose padded size fits ``token_budget`` (one at least)."""
    order = sorted((i for i, g in enumerate(plans) if g.context),
                   key=lambda i: -len(plans[i].context))
    chunks: list[list[int]] = []
    for i in order:
        if chunks and (len(chunks[-1]) + 1) * len(plans[chunks[-1][0]].context) <= token_budget:
            chunks[-1].append(i)
        else:
            chunks.append([i])
    return chunks


def run_plan(plans: Sequence[GroupPlan], branches: Sequence[Sequence[int]], forward: Forward,
             read: Read, emit: Callable[[list[int], Tensor | None, Tensor | None], None], *,
             token_budget: int, device: torch.device, fuse: bool = True,
             logits_at_end: bool = False, batch_contexts: bool = False) -> None:
    """Each group's context once (batch 1), then
    :func:`~ppairs_lens.activations.prefix_sharing.run_rows` from it.

    That is two passes a group at least: with many small groups (direct scoring, G-Eval) those
    are most of a GPU's cost. ``batch_contexts`` runs as many contexts as the budget holds in
    one right-padded pass, then all their rows from that cache; each row still sees exactly its
    own context, so the numbers equal the per-group run's up to float rounding."""
    plans = end_in_tails(plans) if logits_at_end else list(plans)
    kw = dict(token_budget=token_budget, fuse=fuse, logits_at_end=logits_at_end)
    chunks = context_chunks(plans, token_budget) if batch_contexts else []
    batched = {i for c in chunks for i in c}
    for i, g in enumerate(plans):
        if i not in batched:
            start = extend(PrefixState.empty(device), [0], [g.context], forward)
            run_rows(start, g.subgroups, branches, forward, read, emit, **kw)
    for chunk in chunks:
        start = extend(PrefixState.empty(device), [0] * len(chunk),
                       [plans[i].context for i in chunk], forward)
        subs = [(r, s) for r, i in enumerate(chunk) for s in plans[i].subgroups]
        run_rows(start, [s for _, s in subs], branches, forward, read, emit,
                 roots=[r for r, _ in subs], **kw)


@torch.inference_mode()
def run_branches(
    model,
    prefixes: Sequence[Sequence[int]],
    branches: Sequence[Sequence[int]],
    groups: Sequence[str],
    *,
    names: Sequence[str] = (),
    logit_ids: Sequence[int] | None = None,
    hooks: Sequence[Hook] = (),
    final_hooks: Sequence[Hook] = (),
    settings: HarvestSettings = HarvestSettings(),
    progress: Callable[[int], None] | None = None,
    logits_at: Literal["branches", "end"] = "branches",
    stop_after_reads: bool = False,
) -> BranchOutputs:
    """For each row, run ``prefix`` once and read the model at each token of ``branches[row]``
    appended to it alone; prefixes shared within a ``groups`` key run once.

    ``names`` are hook points read at the branch token, ``logit_ids`` the next-token logits
    there. ``hooks`` act on every pass; ``final_hooks`` only on the branch step, which then
    holds the branch tokens alone (otherwise they share their row's tail pass).

    ``logits_at="end"`` reads ``logit_ids`` at each row's last prefix token instead
    (``end_logits``), in that fused pass. Where there is no such pass (``final_hooks``) or its
    layout is not a bridge's (a HookedTransformer), ``end_logits`` is None, never wrong.

    ``stop_after_reads``: passes stop after the deepest block read (:func:`read_depth`), so
    ``hooks`` on later blocks do not run.
    """
    n_branch = len(branches[0])
    if any(len(b) != n_branch for b in branches):
        raise ValueError("every row needs the same number of branch tokens")
    if logits_at not in ("branches", "end") or (logits_at == "end" and logit_ids is None):
        raise ValueError(f"logits_at must be 'branches' or 'end' (with logit_ids), "
                         f"not {logits_at!r}")
    at_end = logits_at == "end" and not final_hooks and backend_of(model) != "hooked"
    dev = model_device(model)
    # Allocated at the first read, at the read-outs' width (d_model, or an SAE's d_sae).
    out: dict[str, Tensor] = {}
    n_ids = len(logit_ids) if logit_ids is not None else 0
    logits = (torch.empty(len(prefixes), n_branch, n_ids)
              if logit_ids is not None and logits_at == "branches" else None)
    end_logits = torch.empty(len(prefixes), n_ids) if at_end else None
    read_ids = logit_ids if logits is not None or at_end else None
    depth = read_depth(model, names, read_ids, final_hooks) if stop_after_reads else None
    forward, read = model_steps(model, names, read_ids, final_hooks, depth)

    def emit(rows: list[int], a: Tensor | None, lg: Tensor | None) -> None:
        if names:
            a = a.view(len(rows), n_branch, len(names), -1)
            if "acts" not in out:
                out["acts"] = torch.empty(len(prefixes), n_branch, len(names), a.shape[-1],
                                          dtype=settings.out_dtype)
            out["acts"][rows] = a.to(settings.out_dtype)
        if logits is not None:
            logits[rows] = lg.view(len(rows), n_branch, -1)
        if end_logits is not None:
            end_logits[rows] = lg
        if progress is not None:
            progress(len(rows))

    # final_hooks act on every position of the pass they are in: that pass must hold the
    # branch tokens alone, so a row's tail then runs in a pass of its own.
    with model.hooks(fwd_hooks=resolve_hooks(model, hooks)):
        run_plan(plan(prefixes, groups, share=settings.share_prefixes), branches, forward,
                 read, emit, token_budget=settings.budget_for(model, dev), device=dev,
                 fuse=not final_hooks, logits_at_end=at_end,
                 batch_contexts=settings.batch_contexts)
    acts = out.get("acts")
    if names and acts is None:  # no rows
        acts = torch.empty(0, n_branch, len(names), model.cfg.d_model, dtype=settings.out_dtype)
    return BranchOutputs(acts, logits, end_logits)
