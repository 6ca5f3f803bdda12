"""What pinning the CPU kernels costs: the embedded model's forward with the command line's
settings (:data:`ppairs_lens.cpu_numerics.CPU_NUMERICS`: MKL's strict AVX2 path, PyTorch's and
oneDNN's AVX2 kernels) against the host's own choice (none set), on the same prompts.

Each library reads its setting once per process, so every measurement is a fresh process;
the two settings alternate (``--rounds``, best of each), so a slow spell hits both. Prints
each setting's kernels and seconds, the ratio, and the largest difference of the logits.

Run: ``python -m benchmarks.bench_cpu_numerics [--rounds 3] [--prompts 16] [--threads 2]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from ppairs_lens.cpu_numerics import CPU_NUMERICS

_CHILD = """
import json, sys, time, numpy as np, torch
from ppairs_lens.models.loading import load_model
n, threads, out = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
torch.set_num_threads(threads)
model = load_model()
text = "the council said the plans for the river park would cost more than expected " * 40
base = model.tokenizer(text, return_tensors="pt").input_ids[0]
ids = torch.stack([base[i:i + 200] for i in range(n)])     # n windows of 200 tokens
with torch.inference_mode():
    model(ids[:1, :8])                                    # warm: first-call set-up not timed
    t0 = time.perf_counter()
    logits = model(ids)[:, -1]
    seconds = time.perf_counter() - t0
np.save(out, logits.double().numpy())
print(json.dumps({"seconds": seconds, "kernels": torch.backends.cpu.get_cpu_capability()}))
"""


def _run(env_set: dict[str, str], n: int, threads: int, out: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in CPU_NUMERICS}
    env.update(env_set)
    done = subprocess.run([sys.executable, "-c", _CHILD, str(n), str(threads), str(out)],
                          env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def _setting(text: str) -> dict[str, str]:
    """``--also``'s ``NAME=VALUE[;NAME=VALUE]`` as an environment."""
    pairs = [kv.split("=", 1) for kv in text.split(";") if kv]
    if not pairs or any(len(kv) != 2 or not kv[0] for kv in pairs):
        raise SystemExit(f"--also {text!r}: expected NAME=VALUE[;NAME=VALUE]")
    return dict(pairs)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--prompts", type=int, default=16)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--also", action="append", default=[], metavar="NAME=VALUE[;NAME=VALUE]",
                   help="a further setting to time beside the two (repeatable), e.g. "
                        "'MKL_CBWR=COMPATIBLE,STRICT'; its logits are compared with the pinned")
    args = p.parse_args(argv)
    settings = {"pinned": dict(CPU_NUMERICS), "own": {},
                **{a: _setting(a) for a in args.also}}
    best: dict[str, float] = {}
    kernels: dict[str, str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        logits = {}
        for _ in range(args.rounds):
            for name, env in settings.items():
                path = Path(tmp) / f"{len(logits)}.npy"
                got = _run(env, args.prompts, args.threads, path)
                best[name] = min(best.get(name, float("inf")), got["seconds"])
                kernels[name] = got["kernels"]
                logits[name] = np.load(path)
    print(f"{args.prompts} prompts of 200 tokens, {args.threads} threads, best of "
          f"{args.rounds} fresh processes each")
    for name in settings:
        what = ("pinned (" + ", ".join(f"{k}={v}" for k, v in CPU_NUMERICS.items()) + ")"
                if name == "pinned" else "the host's own choice" if name == "own" else name)
        diff = float(np.abs(logits[name] - logits["pinned"]).max())
        print(f"  {what}: {kernels[name]} kernels, {best[name]:.3f} s, "
              f"x{best[name] / best['own']:.2f} of the host's own; largest logit difference "
              f"from pinned {diff:.2e}")


if __name__ == "__main__":
    main()
