"""How alike two probe directions are: their cosine, and the cosine of random directions.

Two unit directions fitted on different data agree by ``|cos|``; whether a value means
anything depends on the dimension, so :func:`random_reference` gives the null of
independent uniformly random unit vectors in the same space. Caveat: the residual stream is
anisotropic, so two *unrelated* probe directions can agree more than isotropic random vectors
do; the null says whether a cosine is distinguishable from "no relation in an isotropic
space", not more.
"""

from __future__ import annotations

import math

import numpy as np
from jaxtyping import Float
from scipy.special import gammaln

__all__ = ["cosine", "random_abs_cos", "random_reference"]


def cosine(a: Float[np.ndarray, "*batch d"], b: Float[np.ndarray, "*batch d"]
           ) -> Float[np.ndarray, "*batch"]:
    """Cosine along the last axis (NaN where a vector is NaN / zero)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def random_abs_cos(d: int, n: int = 10_000, seed: int = 0) -> Float[np.ndarray, "n"]:
    """|cos| of ``n`` pairs of independent uniformly random unit vectors in ``R^d``."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((n, d))
    v = rng.standard_normal((n, d))
    return np.abs((u * v).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1)))


def random_reference(d: int, n: int = 10_000, seed: int = 0) -> dict:
    """Summary of the random-direction null: mean (empirical and exact), 95th / 99th pct,
    and the ``samples`` themselves."""
    a = random_abs_cos(d, n, seed)
    # E|cos| = Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2)) ~ sqrt(2 / (pi d))
    exact = math.exp(gammaln(d / 2) - gammaln((d + 1) / 2)) / math.sqrt(math.pi)
    return {"d": d, "n": n, "mean": float(a.mean()), "mean_exact": exact,
            "p95": float(np.quantile(a, 0.95)), "p99": float(np.quantile(a, 0.99)),
            "samples": a}
