"""Benchmarks (a) and (b): our harvester vs batched two-sided full passes vs one prompt at a
time with HF ``output_hidden_states`` (the original PPairS approach), plus the limit: a bare
HF forward of exactly the tokens our harvester computes.

Run: ``python -m benchmarks.bench_harvest [--articles 1 --summaries 16 --short-pairs 64]``;
``--backend hooked`` also times the harvest on a HookedTransformer (transformer-lens<4) built
from the same weights, on the same pairs, against the same limit.
"""

from __future__ import annotations

import argparse
import random

import torch

from benchmarks.common import (batched_two_sided, bare_schedule, hf_copy, max_rel_err,
                               one_prompt_at_a_time, summeval_like, timed, tokens_computed)
from ppairs_lens.data import builtin_dataset
from ppairs_lens.activations.harvest import harvest_pairs, harvest_with_judge
from ppairs_lens.activations.runner import DEFAULT_TOKEN_BUDGET, HarvestSettings
from ppairs_lens.models.embedded import embedded_model_dir
from ppairs_lens.models.loading import load_model
from ppairs_lens.activations.prompts import build_contrast_pairs


#: The limit is also timed with batches this many times larger: the bare model (HF SDPA
#: attention, no materialised scores) may prefer bigger batches than the bridge does.
LIMIT_BIG = 4


def compare(name: str, bridge, hf, pairs, with_original: bool = True,
            reference_pairs: int | None = None, rounds: int = 3,
            token_budget: int = DEFAULT_TOKEN_BUDGET, hooked=None) -> dict:
    """Time ours, the references and the limit on the same pairs.

    Ours and the limit (same plan, same batches) alternate for ``rounds`` rounds and the best
    of each is kept, so slow spells of a shared machine hit both alike; the limit is also
    timed once with ``LIMIT_BIG`` times larger batches and the faster limit is reported too.
    ``reference_pairs``: time the two references (which handle every pair independently, so
    their time is a sum over pairs) on a seeded random subset of that many pairs and scale by
    ``len(pairs) / k``; ours and the limit always run on all pairs (sharing is not per pair).
    ``hooked``: a HookedTransformer of the same weights, whose harvest is timed in the same
    rounds (and compared with the bridge's).
    """
    warm = pairs[:2]
    settings = HarvestSettings(token_budget=token_budget)
    harvest_with_judge(bridge, warm, settings)  # warm-up: first-call allocations are not the steady state
    bare_schedule(hf, warm, token_budget)
    if hooked is not None:
        harvest_pairs(hooked, warm, settings)
    t_ours = t_bare = t_hooked = float("inf")
    for _ in range(rounds):
        # what a store's harvest runs: the activations and the judge's answer at the end
        t, ours = timed(lambda: harvest_with_judge(bridge, pairs, settings).acts)
        t_ours = min(t_ours, t)
        if hooked is not None:
            t, theirs = timed(lambda: harvest_pairs(hooked, pairs, settings))
            t_hooked = min(t_hooked, t)
        t_bare = min(t_bare, timed(lambda: bare_schedule(hf, pairs, token_budget))[0])
    t_big, _ = timed(lambda: bare_schedule(hf, pairs, token_budget * LIMIT_BIG))
    sub = list(range(len(pairs)))
    if reference_pairs and reference_pairs < len(pairs):
        sub = sorted(random.Random(0).sample(sub, reference_pairs))
    scale = len(pairs) / len(sub)
    ref = [pairs[i] for i in sub]
    t_full, full = timed(lambda: batched_two_sided(bridge, ref, token_budget))
    res = {"set": name, "pairs": len(pairs), "rounds": rounds, "budget": token_budget,
           "ours_s": t_ours,
           "two_sided_s": t_full * scale, "bare_limit_s": t_bare, "bare_limit_big_s": t_big,
           "reference_pairs": len(sub),
           "tokens_ours": tokens_computed(pairs, True), "tokens_full": tokens_computed(pairs, False),
           "err_vs_two_sided": max_rel_err(ours[sub], full)}
    if hooked is not None:
        res.update(hooked_s=t_hooked, err_hooked_vs_bridge=max_rel_err(theirs, ours))
    if with_original:
        t_one, one = timed(lambda: one_prompt_at_a_time(hf, ref))
        res.update(one_at_a_time_s=t_one * scale, err_vs_original=max_rel_err(ours[sub], one))
    return res


def report(r: dict) -> None:
    print(f"\n[{r['set']}] {r['pairs']} pairs; tokens computed: ours {r['tokens_ours']}, "
          f"two-sided {r['tokens_full']} ({r['tokens_full'] / r['tokens_ours']:.1f}x)")
    if r["reference_pairs"] < r["pairs"]:
        print(f"  (references timed on {r['reference_pairs']} random pairs, scaled by "
              f"{r['pairs'] / r['reference_pairs']:.2f}: they run every pair on its own)")
    print(f"  (ours and the limit: best of {r['rounds']} alternating runs; token budget "
          f"{r['budget']})")
    print(f"  ours                 {r['ours_s']:8.2f} s")
    if "hooked_s" in r:
        print(f"  ours, HookedTransformer {r['hooked_s']:5.2f} s   hooked / bridge "
              f"{r['hooked_s'] / r['ours_s']:5.2f}x   hooked / limit "
              f"{r['hooked_s'] / r['bare_limit_s']:5.2f}x   max relative difference "
              f"{r['err_hooked_vs_bridge']:.1e}")
    print(f"  batched two-sided    {r['two_sided_s']:8.2f} s   speed-up {r['two_sided_s'] / r['ours_s']:5.2f}x")
    if "one_at_a_time_s" in r:
        print(f"  one at a time (HF)   {r['one_at_a_time_s']:8.2f} s   speed-up "
              f"{r['one_at_a_time_s'] / r['ours_s']:5.2f}x")
    print(f"  bare limit (HF)      {r['bare_limit_s']:8.2f} s   ours / limit "
          f"{r['ours_s'] / r['bare_limit_s']:5.2f}x   (same plan and batches)")
    best = min(r["bare_limit_s"], r["bare_limit_big_s"])
    print(f"  bare limit, x{LIMIT_BIG} batch {r['bare_limit_big_s']:8.2f} s   ours / faster limit "
          f"{r['ours_s'] / best:5.2f}x")
    print(f"  max relative difference of stored values: vs two-sided {r['err_vs_two_sided']:.1e}"
          + (f", vs original {r['err_vs_original']:.1e}" if "err_vs_original" in r else ""))


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--articles", type=int, default=1)
    ap.add_argument("--summaries", type=int, default=16, help="per article (SummEval has 16)")
    ap.add_argument("--reference-pairs", type=int, default=30,
                    help="pairs the per-pair references are timed on (0: all)")
    ap.add_argument("--short-pairs", type=int, default=64)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--device", default="cpu", help="e.g. cuda (every side runs there)")
    ap.add_argument("--model", default=None,
                    help="a model folder (default: the embedded SmolLM2)")
    ap.add_argument("--token-budget", type=int, default=None,
                    help="tokens per forward pass, for ours, the limit and two-sided alike "
                         "(default: the harvester's default for the device)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternating timed rounds of ours and the limit (best kept)")
    ap.add_argument("--backend", choices=("bridge", "hooked"), default="bridge",
                    help="hooked: also time a HookedTransformer harvest (transformer-lens<4)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    bridge = load_model(args.model, device=args.device)
    hooked = (load_model(args.model, device=args.device, backend="hooked")
              if args.backend == "hooked" else None)
    hf = hf_copy(args.model or embedded_model_dir(), args.device)
    budget = HarvestSettings(token_budget=args.token_budget).budget_for(
        bridge, torch.device(args.device))
    long_ds = summeval_like(args.articles, args.summaries)
    short_ds = builtin_dataset("larger_number", seed=0, n=args.short_pairs)
    where = (torch.cuda.get_device_name(args.device) if torch.device(args.device).type == "cuda"
             else f"CPU, torch threads {torch.get_num_threads()}")
    print(f"model {bridge.ppairs_model_name} on {where}; long set: {long_ds.source}")
    results = []
    for name, ds in [("summeval-like", long_ds), ("short prompts", short_ds)]:
        pairs = build_contrast_pairs(bridge.tokenizer, ds)
        r = compare(name, bridge, hf, pairs,
                    reference_pairs=args.reference_pairs if name == "summeval-like" else None,
                    token_budget=budget, hooked=hooked, rounds=args.rounds)
        report(r)
        results.append(r)
    return results


if __name__ == "__main__":
    main()
