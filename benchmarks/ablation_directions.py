"""Cost of the ablation step per number of directions: 8 directions vs 108, same pairs.

The ablation analysis evaluates every direction in one pass per prompt
(:func:`ppairs_lens.interventions.batched.judge_under_directions`: the prompt's prefix runs
once, then one read-out token per direction, each with its own direction rejected), so 100
more directions should cost far less than 100 more passes. Target: 108 directions in at most
4x the time of 8. Also times the unablated zero-shot judge (one read-out per prompt) on the
same pairs, for scale.

Run: ``python -m benchmarks.ablation_directions [--pairs 100 --dataset larger_number]``
(the embedded SmolLM2; ``--tiny`` for a smoke run on the tiny random model).
"""

from __future__ import annotations

import argparse

import torch

from benchmarks.common import timed
from ppairs_lens.data import builtin_dataset
from ppairs_lens.interventions.batched import judge_under_directions
from ppairs_lens.interventions.directions import random_directions
from ppairs_lens.judges.zero_shot import zero_shot


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dataset", default="larger_number")
    ap.add_argument("--pairs", type=int, default=100)
    ap.add_argument("--counts", type=int, nargs="+", default=[8, 108])
    ap.add_argument("--preset", default="paper")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--tiny", action="store_true", help="the tiny random model (smoke run)")
    args = ap.parse_args(argv)
    if args.tiny:
        from ppairs_lens.models.loading import load_tokenizer
        from ppairs_lens.models.tiny import tiny_model

        bridge = tiny_model(seed=0, tokenizer=load_tokenizer())
    else:
        from ppairs_lens.models.loading import load_model

        bridge = load_model()
    ds = builtin_dataset(args.dataset, n=args.pairs, seed=0)
    d = bridge.cfg.d_model
    t_plain, _ = timed(lambda: zero_shot(bridge, ds), repeat=args.repeat)
    times = {}
    for n in args.counts:
        dirs = torch.cat([torch.zeros(1, d), random_directions(n - 1, d, seed=n)])
        times[n], _ = timed(lambda dirs=dirs: judge_under_directions(bridge, ds, None, dirs,
                                                                     args.preset),
                            repeat=args.repeat)
    print(f"\n[ablation directions] {args.dataset}: {len(ds)} pairs x 2 orders, preset "
          f"{args.preset!r}, read-out token ablated, {torch.get_num_threads()} threads")
    print(f"  zero-shot judge, no ablation   {t_plain:8.2f} s")
    for n, t in times.items():
        print(f"  {n:4d} directions (one pass)    {t:8.2f} s")
    lo, hi = min(times), max(times)
    ratio = times[hi] / times[lo]
    print(f"  {hi} / {lo} directions: {ratio:.2f}x (target <= 4x)")
    return {"plain_s": t_plain, "seconds": times, "ratio": ratio}


if __name__ == "__main__":
    main()
