"""The label curve of :mod:`analyses.finetuning` (paper Section 5.2): nested, stratified label sets
(:func:`nested_order`) and the curve's rows, a CI over leak groups of the accuracy averaged
over seeds (:func:`curve_rows`)."""

from __future__ import annotations

import numpy as np

from ppairs_lens.evaluation.bootstrap import bootstrap
from ppairs_lens.evaluation.resampled import weighted_accuracy

__all__ = ["curve_rows", "nested_order"]


def nested_order(labels: np.ndarray, sizes, seed: int) -> np.ndarray:
    """A seeded order of the training pairs whose first ``n`` are a stratified draw for every
    ``n`` in ``sizes`` (each class in its share, at least 2 of each where there are; each size
    keeps the smaller sizes' pairs); ties and the rest come last, each block sorted."""
    y = np.asarray(labels)
    rng = np.random.default_rng(seed)
    pools = {c: rng.permutation(np.flatnonzero(y == c)) for c in (1, 2)}
    n12 = len(pools[1]) + len(pools[2])
    taken = {1: 0, 2: 0}
    out: list[np.ndarray] = []
    for size in sorted({min(int(n), n12) for n in sizes if int(n) > 0}):
        k1 = int(round(size * len(pools[1]) / max(n12, 1)))
        k1 = min(max(k1, min(2, len(pools[1])), size - len(pools[2])), len(pools[1]),
                 size - min(2, len(pools[2])))
        k1 = min(max(k1, taken[1]), size - taken[2])
        k = {1: k1, 2: size - k1}
        out.append(np.sort(np.concatenate([pools[c][taken[c]:k[c]] for c in (1, 2)])))
        taken = k
    rest = np.setdiff1d(np.arange(len(y)), np.concatenate(out) if out else [])
    return np.concatenate([*out, np.sort(rest)]).astype(int)


def curve_rows(name: str, n_all: int, cfg, run, y: np.ndarray,
               groups: list) -> list[dict]:
    """Per (method, size): accuracy of each seed, and the mean over seeds with a CI over
    leak groups (every seed scored on each resample of the test groups)."""
    rows = []
    for m in cfg.curve_methods:
        for n in sorted({min(k, n_all) for k in cfg.sizes_of(m)}):
            accs, ps = [], []
            for seed in cfg.curve_seeds:
                s = run(m, n, seed)
                accs.append(float(np.mean((s.p > 0.5) == (y == 1))))
                ps.append(s.p)
                rows.append({"dataset": name, "method": m, "n_labels": n, "seed": seed,
                             "accuracy": accs[-1], "train_seconds": s.cost.seconds,
                             "train_cpu_seconds": s.cost.cpu_seconds})
            ci = bootstrap(lambda w, ps=ps: np.mean([weighted_accuracy(w, y, p) for p in ps],
                                                    axis=0),
                           len(y), groups, **cfg.settings.boot_kwargs())
            lo, hi = ci["lo"], ci["hi"]
            rows.append({"dataset": name, "method": m, "n_labels": n, "seed": "mean",
                         "accuracy": float(np.mean(accs)), "lo": float(lo), "hi": float(hi),
                         "ci_counts": ci["ci_counts"], "n_seeds": len(accs)})
    return rows
