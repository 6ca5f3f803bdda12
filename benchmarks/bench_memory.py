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
from ppairs_lens.data import builtin_dataset
from ppairs_lens.harvest_to_store import harvest_dataset
from ppairs_lens.models import load_model
b = load_model()
ds = builtin_dataset("story_sentiment", seed=0, n=int(sys.argv[1]))
base = int(open('/proc/self/statm').read().split()[1]) * resource.getpagesize()
harvest_dataset(b, ds, sys.argv[2], shard_size=64, progress=False)
peak = peak_rss()
print(json.dumps({"base": base, "peak": peak}))
"""


def measure(n: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run([sys.executable, "-c", CHILD, str(n), str(Path(tmp) / "store")],
                             capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--small", type=int, default=60)
    ap.add_argument("--large", type=int, default=240)
    args = ap.parse_args(argv)
    small, large = measure(args.small), measure(args.large)
    gib = 1 << 20
    d_small = (small["peak"] - small["base"]) / gib
    d_large = (large["peak"] - large["base"]) / gib
    print(f"\n[harvest peak memory] story_sentiment, shards of 64 pairs")
    print(f"  {args.small:5d} pairs: peak {small['peak'] / gib:7.0f} MiB, above model {d_small:6.0f} MiB")
    print(f"  {args.large:5d} pairs: peak {large['peak'] / gib:7.0f} MiB, above model {d_large:6.0f} MiB")
    print(f"  ratio of peaks large/small: {large['peak'] / small['peak']:.3f} "
          f"(target within 1.10); of harvest overheads: {d_large / max(d_small, 1e-9):.2f}")
    return {"small": small, "large": large}


if __name__ == "__main__":
    main()
