"""Cost of the ablation step per number of directions: 8, 108 and 1008 directions, same pairs.

The ablation analysis evaluates every direction in one pass per prompt
(:func:`ppairs_lens.interventions.batched.judge_under_directions`: the prompt's prefix runs
once, then one read-out token per direction, each with its own direction rejected), so 100
more directions should cost far less than 100 more passes. Targets: 108 directions in at most
4x the time of 8, 1008 in at most 10x. Each count is also timed against its limit, a bare HF
forward of the same prompts with the same number of read-out tokens (no hooks) on the same
plan, alternating: the limit's own 1008 / 8 ratio is what the token count alone costs. Also
times the unablated zero-shot judge (one read-out per prompt) on the same pairs, for scale.

Run: ``python -m benchmarks.ablation_directions [--pairs 16 --dataset larger_number]``
(the embedded SmolLM2; ``--tiny`` for a smoke run on the tiny random model).
"""

from __future__ import annotations

import argparse

import torch

from benchmarks.common import bare_plan, hf_copy, timed
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.data import builtin_dataset
from ppairs_lens.interventions.batched import judge_under_directions
from ppairs_lens.interventions.directions import random_directions
from ppairs_lens.models.embedded import embedded_model_dir
from ppairs_lens.judges.zero_shot import swapped_dataset, zero_shot

#: Most time n directions may take, as a multiple of the time of the fewest.
TARGETS = {108: 4.0, 1008: 10.0}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", default="larger_number")
    ap.add_argument("--pairs", type=int, default=16)
    ap.add_argument("--counts", type=int, nargs="+", default=[8, 108, 1008])
    ap.add_argument("--preset", default="paper")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--tiny", action="store_true", help="the tiny random model (smoke run)")
    args = ap.parse_args(argv)
    if args.tiny:
        from ppairs_lens.models.tokenizer import load_tokenizer
        from ppairs_lens.models.tiny import tiny_model

        bridge = tiny_model(seed=0, tokenizer=load_tokenizer())
    else:
        from ppairs_lens.models.loading import load_model

        bridge = load_model()
    ds = builtin_dataset(args.dataset, n=args.pairs, seed=0)
    d = bridge.cfg.d_model
    hf = None if args.tiny else hf_copy(embedded_model_dir())
    pairs = (build_contrast_pairs(bridge.tokenizer, ds)
             + build_contrast_pairs(bridge.tokenizer, swapped_dataset(ds)))
    prefixes = [p.prefix_ids[:-1] for p in pairs]
    groups = [p.group for p in pairs]
    t_plain, _ = timed(lambda: zero_shot(bridge, ds), repeat=args.repeat)
    times, limits = {}, {}
    for n in args.counts:
        dirs = torch.cat([torch.zeros(1, d), random_directions(n - 1, d, seed=n)])
        times[n], _ = timed(lambda dirs=dirs: judge_under_directions(bridge, ds, None, dirs,
                                                                     args.preset),
                            repeat=args.repeat)
        if hf is not None:  # right after, so a slow spell of a shared machine hits both
            branches = [(p.prefix_ids[-1],) * n for p in pairs]
            limits[n], _ = timed(lambda b=branches: bare_plan(hf, prefixes, b, groups,
                                                           read_logits=False),
                                 repeat=args.repeat)
    print(f"\n[ablation directions] {args.dataset}: {len(ds)} pairs x 2 orders, preset "
          f"{args.preset!r}, read-out token ablated, {torch.get_num_threads()} threads")
    print(f"  zero-shot judge, no ablation   {t_plain:8.2f} s")
    lo = min(times)
    for n, t in times.items():
        lim = (f"   limit {limits[n]:7.2f} s   ours / limit {t / limits[n]:5.2f}x"
               if n in limits else "")
        print(f"  {n:4d} directions (one pass)    {t:8.2f} s{lim}")
    ratios = {}
    for n in times:
        if n == lo:
            continue
        ratios[n] = times[n] / times[lo]
        target = TARGETS.get(n)
        verdict = (f" (target <= {target:g}x: {'met' if ratios[n] <= target else 'not met'})"
                   if target else "")
        bound = (f"; the limit's own ratio {limits[n] / limits[lo]:.2f}x" if n in limits
                 else "")
        print(f"  {n} / {lo} directions: {ratios[n]:.2f}x{verdict}{bound}")
    return {"plain_s": t_plain, "seconds": times, "limit_seconds": limits, "ratios": ratios}


if __name__ == "__main__":
    main()
