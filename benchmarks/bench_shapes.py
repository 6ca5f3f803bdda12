"""Every model pass of a study against its limit, at the embedded model's shape and at an
8B model's: the harvest, the zero-shot judge and the ablation's many directions, each beside a
bare HF forward of the same plan, with model-FLOPs utilisation.

Weights are seeded random, built in memory from a config (Llama-3.1-8B's layer sizes or
SmolLM2-135M's) with the embedded tokenizer, in bf16 by default; nothing is downloaded. A
pass costs the same whatever the weights hold. The bare model shares the bridge's weight
tensors (no second copy), runs HF's SDPA attention and reads nothing.

Rows (each ours and its limit alternating for ``--rounds`` rounds, best kept):

* harvest: :func:`harvest_with_judge` (every read-out plus the judge's answer at the prompt's
  end, what a store's harvest runs) against :func:`benchmarks.common.bare_schedule`;
* zero-shot judge: both item orders, against the bare plan of the same prompts;
* ablation: ``--directions`` directions in one pass per prompt
  (:func:`judge_under_directions`), against the bare plan with as many read-out tokens.

Each on a long set (SummEval-like: an article shared by every pair of its summaries) and a
short one (``larger_number``). MFU counts 2 x (non-embedding parameters) FLOPs per token
computed (the plan's tokens, padding not counted), against the device's dense peak.

Run: ``python -m benchmarks.bench_shapes --device cuda [--shapes llama-8b smollm2-135m]``;
``--shapes tiny`` on a CPU is a smoke run.
"""

from __future__ import annotations

import argparse
import contextlib
from dataclasses import dataclass, replace

import torch

from benchmarks.bench_harvest import compare
from benchmarks.bench_judges import judge_rows, side_by_side
from benchmarks.common import bare_plan, summeval_like
from ppairs_lens.activations.prefix_sharing import plan, tokens_computed
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.data import builtin_dataset
from ppairs_lens.interventions.batched import judge_under_directions
from ppairs_lens.interventions.directions import random_directions
from ppairs_lens.judges.zero_shot import swapped_dataset, zero_shot
from ppairs_lens.models.fused_attention import set_fused_attention
from ppairs_lens.models.tokenizer import load_tokenizer

#: Target of every pass: at most this many times its limit.
TARGET = 1.2


@dataclass(frozen=True)
class Shape:
    """A Llama-style decoder's sizes (the vocabulary is the tokenizer's)."""

    d_model: int
    d_mlp: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    rope_theta: float
    tied: bool


SHAPES = {
    "llama-8b": Shape(4096, 14336, 32, 32, 8, 500000.0, False),   # Llama-3.1-8B's layers
    "smollm2-135m": Shape(576, 1536, 30, 9, 3, 100000.0, True),   # the embedded model's
    "tiny": Shape(64, 128, 2, 4, 2, 10000.0, True),               # a CPU smoke run
}

#: Dense peak FLOP/s by device-name fragment and dtype (NVIDIA's data sheets, SXM parts).
PEAKS = {("H100", torch.bfloat16): 989e12, ("H200", torch.bfloat16): 989e12,
         ("H100", torch.float32): 67e12, ("H200", torch.float32): 67e12}


def peak_flops(device: torch.device, dtype: torch.dtype) -> float | None:
    if device.type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for (k, dt), v in PEAKS.items() if k in name and dt == dtype), None)


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype):
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(old)


def build(shape: Shape, tok, device: torch.device, dtype: torch.dtype, seed: int = 0):
    """(bridge, bare HF model sharing its weights, non-embedding parameter count)."""
    from transformer_lens.model_bridge import TransformerBridge
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=shape.d_model,
                      intermediate_size=shape.d_mlp, num_hidden_layers=shape.n_layers,
                      num_attention_heads=shape.n_heads, num_key_value_heads=shape.n_kv_heads,
                      rope_theta=shape.rope_theta, max_position_embeddings=8192,
                      tie_word_embeddings=shape.tied, bos_token_id=tok.bos_token_id,
                      eos_token_id=tok.eos_token_id, pad_token_id=tok.pad_token_id)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []), \
            default_dtype(dtype), torch.device(device):
        torch.manual_seed(seed)
        hf = LlamaForCausalLM(cfg).eval()
        bare = LlamaForCausalLM(cfg).eval()
    # One copy of the weights: the bare model takes the bridge's tensors (taken before the
    # bridge wraps the HF modules, which renames them).
    bare.load_state_dict(hf.state_dict(), assign=True)
    n_params = sum(p.numel() for n, p in hf.named_parameters() if "embed_tokens" not in n
                   and "lm_head" not in n)
    bridge = TransformerBridge.boot_transformers("random-llama", hf_model=hf, tokenizer=tok,
                                                 device=device)
    bridge.eval()
    set_fused_attention(bridge)
    bridge.ppairs_model_name = f"random-{shape.n_layers}x{shape.d_model}-seed{seed}"
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return bridge, bare, n_params


def judge_tokens(prefixes, groups) -> int:
    return tokens_computed(plan(prefixes, groups), 1)


def run_shape(name: str, shape: Shape, tok, device: torch.device, dtype: torch.dtype,
              args) -> list[dict]:
    bridge, bare, n_params = build(shape, tok, device, dtype)
    budget = HarvestSettings(token_budget=args.token_budget).budget_for(bridge, device)
    peak = peak_flops(device, dtype)
    rows: list[dict] = []

    def add(pass_: str, set_: str, t_o: float, t_l: float, tokens: int, units: int,
            unit: str) -> None:
        flop = 2 * n_params * tokens
        r = {"shape": name, "pass": pass_, "set": set_, "ours_s": t_o, "limit_s": t_l,
             "ratio": t_o / t_l, "tokens": tokens, "units": units, "unit": unit,
             "mfu": flop / t_o / peak if peak else None,
             "mfu_limit": flop / t_l / peak if peak else None}
        rows.append(r)
        mfu = (f"  MFU {100 * r['mfu']:5.1f}% (limit {100 * r['mfu_limit']:5.1f}%)" if peak
               else "")
        print(f"  {name:13s} {pass_:22s} {set_:6s} ours {t_o:7.2f} s  limit {t_l:7.2f} s  "
              f"{r['ratio']:5.2f}x ({'met' if r['ratio'] <= TARGET else 'not met'}: "
              f"<= {TARGET}x)  {units / t_o:8.0f} {unit}/s  {tokens / t_o:9.0f} tok/s{mfu}",
              flush=True)

    sets = {"long": summeval_like(args.articles, args.summaries),
            "short": builtin_dataset("larger_number", seed=0, n=args.short_pairs)}
    for set_, ds in sets.items():
        pairs = build_contrast_pairs(tok, ds)
        h = compare(f"{name} {set_}", bridge, bare, pairs, with_original=False,
                    reference_pairs=min(args.reference_pairs, len(pairs)), rounds=args.rounds,
                    token_budget=budget)
        add("harvest", set_, h["ours_s"], min(h["bare_limit_s"], h["bare_limit_big_s"]),
            h["tokens_ours"], len(pairs), "pairs")
        rows[-1]["limit_same_plan_s"] = h["bare_limit_s"]
        rows[-1]["err_vs_two_sided"] = h["err_vs_two_sided"]

        zs = pairs + build_contrast_pairs(tok, swapped_dataset(ds))
        pre, br, gr = judge_rows(zs)
        t_o, t_l = side_by_side(lambda: zero_shot(bridge, ds),
                                lambda: bare_plan(bare, pre, br, gr, budget), args.rounds)
        add("zero-shot judge", set_, t_o, t_l, judge_tokens(pre, gr), len(zs), "prompts")

        k = args.directions
        # the ablation judges the first pairs of the set (all its directions per prompt)
        abl = replace(ds, records=ds.records[:args.ablation_pairs])
        abl_pairs = (build_contrast_pairs(tok, abl)
                     + build_contrast_pairs(tok, swapped_dataset(abl)))
        dirs = torch.cat([torch.zeros(1, shape.d_model),
                          random_directions(k - 1, shape.d_model, seed=k)])
        apre = [p.prefix_ids[:-1] for p in abl_pairs]
        agr = [p.group for p in abl_pairs]
        abr = [(p.prefix_ids[-1],) * k for p in abl_pairs]
        t_o, t_l = side_by_side(
            lambda: judge_under_directions(bridge, abl, None, dirs, "paper"),
            lambda: bare_plan(bare, apre, abr, agr, budget, read_logits=False), args.rounds)
        add(f"ablation, {k} dirs", set_, t_o, t_l, tokens_computed(plan(apre, agr), k),
            len(abl_pairs) * k, "prompt-dirs")
    del bridge, bare
    if device.type == "cuda":
        torch.cuda.empty_cache()
    return rows


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--shapes", nargs="+", default=["llama-8b", "smollm2-135m"],
                    choices=sorted(SHAPES))
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"))
    ap.add_argument("--tokenizer", default=None, help="a tokenizer folder (default: embedded)")
    ap.add_argument("--articles", type=int, default=8)
    ap.add_argument("--summaries", type=int, default=16)
    ap.add_argument("--short-pairs", type=int, default=256)
    ap.add_argument("--ablation-pairs", type=int, default=32)
    ap.add_argument("--directions", type=int, default=64)
    ap.add_argument("--reference-pairs", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--token-budget", type=int, default=None)
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    dtype = getattr(torch, args.dtype)
    tok = load_tokenizer(args.tokenizer)
    where = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    print(f"[bench_shapes] {where}, {args.dtype}, seeded random weights, embedded tokenizer "
          f"(vocabulary {len(tok)}); limit = bare HF (SDPA) forward of the same plan, the "
          f"faster of its own batches and {4}x larger ones for the harvest")
    rows = []
    for name in args.shapes:
        rows += run_shape(name, SHAPES[name], tok, device, dtype, args)
    return rows


if __name__ == "__main__":
    main()
