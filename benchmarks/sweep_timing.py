"""Timing check (not a test): batched ``fit_sweep`` vs a per-layer scikit-learn loop.

Random activations of shape n=2000 pairs, 31 layers, d=576 (SmolLM2-135M-sized) with a weak
planted direction per layer. Prints wall time of the supervised probe fitted (a) by a loop of
``SupervisedProbe`` (sklearn lbfgs) over layers and (b) by ``fit_sweep`` for all layers at
once, their ratio, the worst direction cosine and accuracy gap between the two, and the same
for all three kinds (loop of the single-layer estimators vs one sweep).

    .venv/bin/python benchmarks/sweep_timing.py [--device cuda] [--n 2000 --layers 31 --d 576]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch

from ppairs_lens.probes import MassMeanProbe, PCAProbe, SupervisedProbe
from ppairs_lens.sweep import fit_sweep


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--layers", type=int, default=31)
    ap.add_argument("--d", type=int, default=576)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    rng = np.random.default_rng(a.seed)
    n, n_layers, d = a.n, a.layers, a.d
    s = rng.choice([-1.0, 1.0], size=n)
    r = rng.normal(size=(n_layers, d))
    r /= np.linalg.norm(r, axis=1, keepdims=True)
    base = rng.normal(size=(n, 1, n_layers, d)).astype(np.float32) * 4
    acts = base + rng.normal(size=(n, 2, n_layers, d)).astype(np.float32)
    acts[:, 0] += (0.25 * s[:, None, None] * r).astype(np.float32)
    acts[:, 1] -= (0.25 * s[:, None, None] * r).astype(np.float32)
    labels = np.where(s > 0, 1, 2)
    acts_t = torch.from_numpy(acts)
    print(f"n={n} layers={n_layers} d={d} torch threads={torch.get_num_threads()} "
          f"device={a.device}")

    t0 = time.perf_counter()
    loop = [SupervisedProbe().fit(acts[:, :, layer], labels) for layer in range(n_layers)]
    t_loop = time.perf_counter() - t0

    fit_sweep(acts_t[:50, :, :2], labels[:50], kinds=("supervised",), device=a.device)  # warm-up
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    sweep = fit_sweep(acts_t, labels, kinds=("supervised",), device=a.device)
    if a.device.startswith("cuda"):
        torch.cuda.synchronize()
    t_sweep = time.perf_counter() - t0

    t0 = time.perf_counter()
    fit_sweep(acts_t, labels, device=a.device)
    t_all = time.perf_counter() - t0

    t0 = time.perf_counter()
    for layer in range(n_layers):
        PCAProbe().fit(acts[:, :, layer], labels)
        MassMeanProbe().fit(acts[:, :, layer], labels)
    t_loop_all = t_loop + time.perf_counter() - t0

    cos = [float(np.dot(p.direction_, sweep.directions["supervised"][i].numpy()))
           for i, p in enumerate(loop)]
    acc_loop = np.array([p.score(acts[:, :, i], labels) for i, p in enumerate(loop)])
    acc_sweep = sweep.score(acts_t, labels)["supervised"]
    print(f"sklearn loop (supervised): {t_loop:.2f} s")
    print(f"fit_sweep   (supervised): {t_sweep:.2f} s   "
          f"(Newton steps per layer: {sweep.n_iter.min().item()}-{sweep.n_iter.max().item()})")
    print(f"ratio loop / sweep: {t_loop / t_sweep:.2f}x")
    print(f"all three kinds: loop {t_loop_all:.2f} s, fit_sweep {t_all:.2f} s, "
          f"ratio {t_loop_all / t_all:.2f}x")
    print(f"min cosine sweep vs sklearn: {min(cos):.6f}; "
          f"max |train accuracy gap|: {np.abs(acc_loop - acc_sweep).max() * 100:.3f} points")


if __name__ == "__main__":
    main()
