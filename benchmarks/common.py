"""Shared pieces of the benchmarks: data sets, the reference harvesters, a timer.

Every benchmark measures our code and its references side by side in one process, on the
same prompts and model, and prints ratios (never absolute targets baked into tests).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from ppairs_lens.activations.runner import DEFAULT_TOKEN_BUDGET
from ppairs_lens.activations.prompts import ContrastPair
from ppairs_lens.data.records import Dataset, ScoredItem
from ppairs_lens.models.hook_points import READOUT_PRESET, hook_points

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "datasets"

_WORDS = ("the council said new plans for the river park would cost more than expected and "
          "residents asked whether the money could be found before winter when storms often "
          "flood the lower streets near the old market hall where traders sell fish bread and "
          "flowers every morning").split()


def _text(rng: random.Random, n_words: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(n_words)]
    return " ".join(words).capitalize() + "."


def summeval_like(n_articles: int, n_summaries: int, seed: int = 0,
                  path: Path | None = None) -> Dataset:
    """Real SummEval (first articles) when ../shared is present (or from ``path``), else long
    synthetic articles.

    Either way: every article (~400 tokens) is shared by all pairs of its summaries, which is
    what prefix sharing exploits.
    """
    from ppairs_lens.data import comparisons_within_contexts, read_scored_items

    path = path or SHARED / "summeval" / "summeval.jsonl"
    if path.is_file():
        items = read_scored_items(path, "coherence")
        keep: dict[str, list[ScoredItem]] = {}
        for it in items:
            group = keep.setdefault(it.context_id, [])
            if len(group) < n_summaries:
                group.append(it)
            if len(keep) > n_articles:
                break
        chosen = [it for cid in list(keep)[:n_articles] for it in keep[cid]]
        source = f"SummEval ({path})"
    else:
        rng = random.Random(seed)
        chosen = []
        for a in range(n_articles):
            article = " ".join(_text(rng, 18) for _ in range(16))
            chosen += [ScoredItem(f"a{a}/s{s}", _text(rng, rng.randint(25, 55)), rng.random(),
                                  context_id=f"a{a}", context=article) for s in range(n_summaries)]
        source = "synthetic long-context set (no ../shared/datasets)"
    recs = comparisons_within_contexts(chosen)
    return Dataset("summeval_like", "comparison", recs, aspect="coherent", item_name="summary",
                   context_name="article", source=source)


def sync_device() -> None:
    # GPU work is asynchronous: a clock read before it finishes would time only the launches.
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def timed(fn: Callable[[], object], repeat: int = 1) -> tuple[float, object]:
    """Best wall time of ``repeat`` runs (seconds) and the last result."""
    best, out = float("inf"), None
    for _ in range(repeat):
        sync_device()
        t = time.perf_counter()
        out = fn()
        sync_device()
        best = min(best, time.perf_counter() - t)
    return best, out


def hf_copy(bridge_dir: Path, device: str | torch.device = "cpu"):
    """A separate plain HF model (booting a bridge rewires the HF object it wraps)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(bridge_dir), dtype=torch.float32)
    return model.to(device).eval()


@torch.inference_mode()
def one_prompt_at_a_time(hf_model, pairs: Sequence[ContrastPair]) -> torch.Tensor:
    """The original PPairS approach: each prompt alone, ``output_hidden_states=True``."""
    n_layers = hf_model.config.num_hidden_layers
    out = torch.empty(len(pairs), 2, n_layers + 1, hf_model.config.hidden_size)
    dev = hf_model.device
    for i, p in enumerate(pairs):
        for side in range(2):
            ids = torch.tensor([list(p.prefix_ids) + [p.final_ids[side]]], device=dev)
            hs = hf_model(ids, output_hidden_states=True).hidden_states
            # hidden_states[l + 1] is block l's output, except the last entry, which HF
            # (transformers 5.x) gives after the final norm: the last block's raw output is
            # not available this way (NaN here, left out of comparisons).
            out[i, side, :n_layers - 1] = torch.stack([h[0, -1] for h in hs[1:n_layers]]).cpu()
            out[i, side, n_layers - 1] = float("nan")
            out[i, side, n_layers] = hs[n_layers][0, -1].cpu()
    return out


@torch.inference_mode()
def batched_two_sided(bridge, pairs: Sequence[ContrastPair],
                      token_budget: int = DEFAULT_TOKEN_BUDGET) -> torch.Tensor:
    """Both full prompts of every pair, length-sorted right-padded batches, hooks keeping only
    the last real position (a lean harvester without prefix sharing)."""
    names = hook_points(READOUT_PRESET, bridge.cfg.n_layers)
    dev = next(bridge.parameters()).device
    seqs = [(i, s, list(p.prefix_ids) + [p.final_ids[s]]) for i, p in enumerate(pairs)
            for s in range(2)]
    seqs.sort(key=lambda t: -len(t[2]))
    out = torch.empty(len(pairs), 2, len(names), bridge.cfg.d_model)
    start = 0
    while start < len(seqs):
        rows = max(1, min(len(seqs) - start, token_budget // len(seqs[start][2])))
        chunk = seqs[start:start + rows]
        width = len(chunk[0][2])
        ids = torch.zeros(rows, width, dtype=torch.long)
        mask = torch.zeros(rows, width, dtype=torch.long)
        for r, (_, _, s) in enumerate(chunk):
            ids[r, :len(s)] = torch.tensor(s)
            mask[r, :len(s)] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        last = mask.sum(1) - 1
        grabbed: dict[str, torch.Tensor] = {}

        def grabber(name):  # keyed by our name: the bridge reports aliases' canonical names
            def grab(x, hook):
                grabbed[name] = x[torch.arange(rows), last].detach().clone()
                return x
            return grab

        with bridge.hooks(fwd_hooks=[(n, grabber(n)) for n in names]):
            bridge(ids, attention_mask=mask, logits_to_keep=1)
        acts = torch.stack([grabbed[n] for n in names], 1).cpu()
        for r, (i, s, _) in enumerate(chunk):
            out[i, s] = acts[r]
        start += rows
    return out


@torch.inference_mode()
def bare_schedule(hf_model, pairs: Sequence[ContrastPair],
                  token_budget: int = DEFAULT_TOKEN_BUDGET) -> None:
    """The physical limit: a bare HF model (no bridge, no hooks, no read-out) running exactly
    the tokens our harvester computes, on the same schedule (the same prefix-sharing plan,
    executed by the same :func:`ppairs_lens.activations.prefix_sharing.run_rows`)."""
    bare_plan(hf_model, [p.prefix_ids for p in pairs], [p.final_ids for p in pairs],
              [p.group for p in pairs], token_budget)


def bare_steps(hf_model, read_logits: bool = True):
    """A bare HF model as prefix sharing runs it: the cache kept, logits at the read columns
    only (what any pass must compute at least); ``read_logits=False``: at one column (a pass
    that needs a few logits at many columns projects them itself)."""
    def forward(ids, cache, mask, pos):
        return hf_model(ids, past_key_values=cache, attention_mask=mask, position_ids=pos,
                        use_cache=True, logits_to_keep=1).past_key_values

    def read(ids, cache, mask, pos, n_read):
        hf_model(ids, past_key_values=cache, attention_mask=mask, position_ids=pos,
                 logits_to_keep=n_read if read_logits else 1)
        return None, None

    return forward, read


@torch.inference_mode()
def bare_plan(hf_model, prefixes: Sequence[Sequence[int]], branches: Sequence[Sequence[int]],
              groups: Sequence[str], token_budget: int = DEFAULT_TOKEN_BUDGET,
              read_logits: bool = True) -> None:
    """The limit of any prefix-shared pass: ``prefixes`` and their ``branches`` through a bare
    HF model on the plan the harvester would make of them."""
    from ppairs_lens.activations.runner import run_plan
    from ppairs_lens.activations.prefix_sharing import plan

    forward, read = bare_steps(hf_model, read_logits)
    run_plan(plan(prefixes, groups), branches, forward, read, lambda *a: None,
             token_budget=token_budget, device=hf_model.device)


def max_rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest per-vector relative difference, over the read-outs both sides have."""
    err = (a - b).norm(dim=-1) / b.norm(dim=-1).clamp_min(1e-12)
    return err[~err.isnan()].max().item()


def tokens_computed(pairs: Sequence[ContrastPair], shared: bool) -> int:
    """Token positions a harvest runs: with sharing, each shared part once (see
    :mod:`ppairs_lens.activations.prefix_sharing`); without, both full prompts of every pair."""
    from ppairs_lens.activations.prefix_sharing import plan
    from ppairs_lens.activations.prefix_sharing import tokens_computed as count

    if not shared:
        return sum(2 * (len(p.prefix_ids) + 1) for p in pairs)
    return count(plan([p.prefix_ids for p in pairs], [p.group for p in pairs]), 2)
