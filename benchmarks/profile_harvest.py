"""Where a harvest spends its time on a device: forward passes, wall time, and the top kernels
(torch.profiler) of one harvest of a SummEval-like set.

Run: ``python -m benchmarks.profile_harvest --device cuda [--model DIR] [--articles 8] [--summaries 16]``.
On a GPU, wall time minus the kernels' busy time is time the GPU waited for the host.
"""

from __future__ import annotations

import argparse
import time

import torch
from torch.profiler import ProfilerActivity, profile

from benchmarks.common import sync_device, summeval_like
from ppairs_lens.activations.harvest import harvest_pairs
from ppairs_lens.models.loading import load_model
from ppairs_lens.activations.prompts import build_contrast_pairs


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--model", default=None, help="a model folder (default: the embedded one)")
    ap.add_argument("--articles", type=int, default=1)
    ap.add_argument("--summaries", type=int, default=16, help="summaries per article")
    ap.add_argument("--rows", type=int, default=12, help="rows of the kernel table")
    args = ap.parse_args(argv)
    bridge = load_model(args.model, device=args.device)
    pairs = build_contrast_pairs(bridge.tokenizer, summeval_like(args.articles, args.summaries))
    passes = [0]
    bridge.original_model.register_forward_hook(lambda *a: passes.__setitem__(0, passes[0] + 1))
    harvest_pairs(bridge, pairs[:20])  # warm-up
    passes[0] = 0
    sync_device()
    t = time.perf_counter()
    harvest_pairs(bridge, pairs)
    sync_device()
    wall = time.perf_counter() - t
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=acts) as prof:
        harvest_pairs(bridge, pairs)
        sync_device()
    sort = "self_device_time_total" if torch.cuda.is_available() else "self_cpu_time_total"
    print(f"{len(pairs)} pairs: {passes[0]} forward passes, wall {wall:.2f} s (unprofiled)")
    print(prof.key_averages().table(sort_by=sort, row_limit=args.rows, max_name_column_width=60))


if __name__ == "__main__":
    main()
