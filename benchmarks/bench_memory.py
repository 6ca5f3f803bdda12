"""Benchmark (d): peak memory of a harvest at two dataset sizes must not grow with the size.

Each harvest runs in a fresh child process (so peaks do not mix) and writes a store shard by
shard; we report the child's peak RSS above its RSS after loading the model.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = """
import json, resource, sys
# ru_maxrss survives exec, so a child forked from a big parent (run_all after the harvest
# benchmarks) would report the parent's peak: reset the kernel's peak-RSS counter instead.
try:
    open('/proc/self/clear_refs', 'w').write('5')
    def peak_rss():
        for line in open('/proc/self/status'):
            if line.startswith('VmHWM:'):
                return int(line.split()[1]) * 1024
except OSError:
    def peak_rss():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
import torch
from ppairs_lens.data import builtin_dataset
from ppairs_lens.activations.pipeline import harvest_dataset
from ppairs_lens.models.loading import load_model
dev = sys.argv[3]
b = load_model(device=dev)
ds = builtin_dataset("story_sentiment", seed=0, n=int(sys.argv[1]))
base = int(open('/proc/self/statm').read().split()[1]) * resource.getpagesize()
gpu = torch.device(dev).type == "cuda"
gpu_base = torch.cuda.memory_allocated(dev) if gpu else 0
harvest_dataset(b, ds, sys.argv[2], shard_size=64, progress=False)
peak = peak_rss()
gpu_peak = torch.cuda.max_memory_allocated(dev) if gpu else 0
print(json.dumps({"base": base, "peak": peak, "gpu_base": gpu_base, "gpu_peak": gpu_peak}))
"""


def measure(n: int, device: str = "cpu") -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, "-c", CHILD, str(n), str(Path(tmp) / "store"),
                              device], capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(f"harvest child failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small", type=int, default=60)
    ap.add_argument("--large", type=int, default=240)
    ap.add_argument("--device", default="cpu", help="e.g. cuda: GPU peaks are reported too")
    args = ap.parse_args(argv)
    small, large = measure(args.small, args.device), measure(args.large, args.device)
    gib = 1 << 20
    d_small = (small["peak"] - small["base"]) / gib
    d_large = (large["peak"] - large["base"]) / gib
    print("\n[harvest peak memory] story_sentiment, shards of 64 pairs")
    print(f"  {args.small:5d} pairs: peak {small['peak'] / gib:7.0f} MiB, above model {d_small:6.0f} MiB")
    print(f"  {args.large:5d} pairs: peak {large['peak'] / gib:7.0f} MiB, above model {d_large:6.0f} MiB")
    print(f"  ratio of peaks large/small: {large['peak'] / small['peak']:.3f} "
          f"(target within 1.10); of harvest overheads: {d_large / max(d_small, 1e-9):.2f}")
    if small["gpu_peak"]:
        g_small, g_large = small["gpu_peak"] / gib, large["gpu_peak"] / gib
        print(f"  GPU memory ({args.device}), model {small['gpu_base'] / gib:.0f} MiB: peak "
              f"{g_small:.0f} MiB at {args.small} pairs, {g_large:.0f} MiB at {args.large} "
              f"pairs; ratio {g_large / g_small:.3f}")
    return {"small": small, "large": large}


if __name__ == "__main__":
    main()
