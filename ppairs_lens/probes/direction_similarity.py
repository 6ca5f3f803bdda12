"""How alike two probe directions are: their cosine, and the cosine of random directions.

What a ``|cos|`` means depends on the dimension, so :func:`random_reference` gives the null of
independent uniformly random unit vectors. Caveat: the residual stream is anisotropic, so two
*unrelated* probe directions can agree more than that; the null only says whether a cosine is
distinguishable from "no relation in an isotropic space". The tables are the cross-dataset
analysis' ``cosine.csv`` and ``layer_cosine.csv``.
"""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
from jaxtyping import Float
from scipy.special import gammaln

__all__ = ["cosine", "cosine_pair_rows", "layer_cosine_table", "random_reference"]


def cosine(a: Float[np.ndarray, "*batch d"], b: Float[np.ndarray, "*batch d"]
           ) -> Float[np.ndarray, "*batch"]:
    """Cosine along the last axis (NaN where a vector is NaN / zero)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def random_reference(d: int, n: int = 10_000, seed: int = 0) -> dict:
    """The random-direction null: |cos| of ``n`` pairs of independent uniformly random unit
    vectors in ``R^d``, its mean (empirical and exact), 95th / 99th pct, and the ``samples``."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((n, d))
    v = rng.standard_normal((n, d))
    a = np.abs((u * v).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1)))
    # E|cos| = Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2)) ~ sqrt(2 / (pi d))
    exact = math.exp(gammaln(d / 2) - gammaln((d + 1) / 2)) / math.sqrt(math.pi)
    return {"d": d, "n": n, "mean": float(a.mean()), "mean_exact": exact,
            "p95": float(np.quantile(a, 0.95)), "p99": float(np.quantile(a, 0.99)),
            "samples": a}


def cosine_pair_rows(directions: dict[tuple[str, str], np.ndarray],
                     halves: dict[tuple[str, str], tuple[np.ndarray, np.ndarray]] | None = None,
                     *, layer: int, hook: str) -> list[dict]:
    """One row per unordered pair of ``(dataset, kind)`` directions (self-pairs excluded;
    ``relation`` "between_datasets" (same kind), "between_kinds" (same dataset) or "other"),
    and one "split_half" row per ``halves`` entry (one kind fitted on two halves of one
    dataset). Directions oriented by their training labels make the sign meaningful: -1 is the
    same axis read the other way."""
    keys = list(directions)
    rows = []
    for (da, ka), (db, kb) in combinations(keys, 2):
        c = float(cosine(directions[(da, ka)], directions[(db, kb)]))
        relation = ("between_datasets" if ka == kb else
                    "between_kinds" if da == db else "other")
        rows.append({"dataset_a": da, "kind_a": ka, "dataset_b": db, "kind_b": kb,
                     "relation": relation, "cos": c, "abs_cos": abs(c), "layer": layer,
                     "hook": hook})
    for (name, k), (a, b) in (halves or {}).items():
        c = float(cosine(a, b))
        rows.append({"dataset_a": name, "kind_a": k, "dataset_b": name, "kind_b": k,
                     "relation": "split_half", "cos": c, "abs_cos": abs(c), "layer": layer,
                     "hook": hook})
    return rows


def layer_cosine_table(directions: dict[str, dict[str, np.ndarray]], hooks: list[str]
                       ) -> list[dict]:
    """Per-read-out cosines of ``{dataset: {kind: [read-out, d]}}`` directions.

    ``view="adjacent_layers"``: ``layer`` = l compares read-out l with l + 1 (one kind).
    ``view="between_kinds"``: ``kind`` = "a~b" at read-out ``layer`` (one dataset).
    ``view="between_datasets"``: ``dataset`` = "A~B" at read-out ``layer`` (one kind).
    """
    rows = []

    def add(view, dataset, kind, c):
        for li, v in enumerate(c):
            rows.append({"view": view, "dataset": dataset, "kind": kind, "layer": li,
                         "hook": hooks[li], "cos": float(v), "abs_cos": float(abs(v))})

    for name, by_kind in directions.items():
        for k, d in by_kind.items():
            add("adjacent_layers", name, k, cosine(d[:-1], d[1:]))
        for ka, kb in combinations(by_kind, 2):
            add("between_kinds", name, f"{ka}~{kb}", cosine(by_kind[ka], by_kind[kb]))
    for a, b in combinations(directions, 2):
        for k in directions[a]:
            add("between_datasets", f"{a}~{b}", k, cosine(directions[a][k], directions[b][k]))
    return rows
