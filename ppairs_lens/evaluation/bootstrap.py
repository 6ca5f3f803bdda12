"""The one bootstrap: every confidence interval of the package is drawn here.

Records that share a leak group (a context, an item block, a template pool) are not
independent, so a resample draws whole *groups* with replacement (as many draws as groups;
records when no groups are given). A statistic maps the weights matrix ``[b, n]`` (how often
each record was drawn) to one value per resample, so all resamples cost one matrix product.
Statistics scored on the same call see the *same* resamples: that is what makes a paired
difference's interval the interval of the difference. A draw is kept as :class:`Resamples`,
so it serves any number of statistics (:func:`batch_intervals`: a sweep's every layer and
probe kind through the groups' sums, not a ``[b, n]`` matrix per layer).

The rules, written once: a 95% percentile interval; resamples where a statistic is undefined
(NaN) are skipped and counted (``n_boot_used``); an interval over fewer than
:data:`MIN_BOOTSTRAP_GROUPS` distinct groups carries ``ci_counts: False`` (a resample of few
groups says little: such a CI is shown, with its caption, but a claim must not count it).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from jaxtyping import Float, Int

from ppairs_lens.errors import ProbeError

__all__ = ["ALPHA", "MIN_BOOTSTRAP_GROUPS", "N_BOOT", "Interval", "Resamples", "batch_intervals",
           "bootstrap", "draw_resamples", "intervals", "mean_ci", "resample_weights"]

#: Resamples of every interval unless a caller asks otherwise (quick runs).
N_BOOT: int = 2000
#: Two-sided level of every interval (95%).
ALPHA: float = 0.05
#: Fewest distinct groups an interval needs to count toward a claim: a percentile interval
#: over fewer is too narrow (at 10 groups of 2-3 pairs a simulated 5% test rejects 7% of the
#: time); below it a claim is tested by the sign-flip test on group-level differences
#: (:mod:`ppairs_lens.evaluation.sign_flip`).
MIN_BOOTSTRAP_GROUPS: int = 20

#: ``{"value", "lo", "hi", "n_boot_used", "n_groups", "ci_counts"}``.
Interval = dict[str, float]
Statistic = Callable[[Float[np.ndarray, "b n"]], Float[np.ndarray, " b"]]
#: A statistic of many columns (a sweep's layers) at once: resamples -> ``[b, k]``.
BatchStatistic = Callable[["Resamples"], Float[np.ndarray, "b k"]]


def _codes(n: int, groups: Sequence[Hashable] | None) -> np.ndarray:
    if groups is None:
        return np.arange(n)
    if len(groups) != n:
        raise ProbeError(f"{len(groups)} group ids for {n} records")
    first: dict[Hashable, int] = {}
    return np.array([first.setdefault(g, len(first)) for g in groups], dtype=np.int64)


@dataclass(frozen=True)
class Resamples:
    """``n_boot`` resamples as the multiplicity of each *group* in each resample
    (``counts[b, g]``) and each record's group (``codes[i]``): a record's weight in resample
    ``b`` is ``counts[b, codes[i]]``."""

    counts: Float[np.ndarray, "b g"]
    codes: Int[np.ndarray, " n"]

    @property
    def n(self) -> int:
        return len(self.codes)

    @property
    def n_groups(self) -> int:
        return self.counts.shape[1]

    def weights(self) -> Float[np.ndarray, "b n"]:
        return self.counts[:, self.codes]

    def group_sums(self, x: Float[np.ndarray, "n *k"]) -> Float[np.ndarray, "g *k"]:
        """Sums of ``x`` (per record, a column per statistic) within each group."""
        order = np.argsort(self.codes, kind="stable")
        starts = np.flatnonzero(np.r_[True, np.diff(self.codes[order]) != 0])
        return np.add.reduceat(np.asarray(x, dtype=float)[order], starts, axis=0)

    def sums(self, x: Float[np.ndarray, "n *k"]) -> Float[np.ndarray, "b *k"]:
        """``weights() @ x`` through the group sums, without the ``[b, n]`` matrix. Exactly
        equal where ``x`` holds counts (integers and halves: hits, class memberships), as
        every sum of such numbers is exact; a rounding apart otherwise."""
        return self.counts @ self.group_sums(x)


def draw_resamples(n: int, groups: Sequence[Hashable] | None, n_boot: int = N_BOOT,
                   seed: int = 0) -> Resamples:
    """The :class:`Resamples` of ``n`` records: the only place in the package that draws
    bootstrap resamples."""
    if n_boot < 1:
        raise ProbeError(f"n_boot must be at least 1, got {n_boot}")
    codes = _codes(n, groups)
    n_groups = int(codes.max()) + 1 if n else 0
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_groups, size=(n_boot, n_groups))
    counts = np.zeros((n_boot, n_groups))
    np.add.at(counts, (np.arange(n_boot)[:, None], draws), 1.0)
    return Resamples(counts, codes)


def resample_weights(n: int, groups: Sequence[Hashable] | None, n_boot: int = N_BOOT,
                     seed: int = 0) -> Float[np.ndarray, "b n"]:
    """:func:`draw_resamples`' weights ``[n_boot, n]``."""
    return draw_resamples(n, groups, n_boot, seed).weights()


def _interval(value: float, stats: np.ndarray, n_groups: int, alpha: float) -> Interval:
    stats = stats[np.isfinite(stats)]
    lo, hi = (np.quantile(stats, [alpha / 2, 1 - alpha / 2]) if len(stats)
              else (float("nan"), float("nan")))
    return {"value": float(value), "lo": float(lo), "hi": float(hi),
            "n_boot_used": int(len(stats)), "n_groups": int(n_groups),
            "ci_counts": bool(n_groups >= MIN_BOOTSTRAP_GROUPS and len(stats) > 0)}


def batch_intervals(stats: Mapping[str, BatchStatistic], resamples: Resamples,
                    values: Mapping[str, Sequence[float]], *, alpha: float = ALPHA
                    ) -> list[dict[str, Interval]]:
    """One ``{name: Interval}`` per column (e.g. a sweep's layer) of several batched statistics,
    all on the same ``resamples``: ``stats[name](r)`` gives ``[b, k]``, ``values[name]`` the
    ``k`` values on all records."""
    if not 0.0 < alpha < 1.0:
        raise ProbeError(f"alpha must be in (0, 1), got {alpha}")
    out: list[dict[str, Interval]] = []
    for name, fn in stats.items():
        with np.errstate(invalid="ignore", divide="ignore"):
            per = np.asarray(fn(resamples), dtype=float)
        vals = values[name]
        if per.ndim != 2 or per.shape[1] != len(vals):
            raise ProbeError(f"statistic {name!r} gave shape {per.shape} for {len(vals)} values")
        if not out:
            out = [{} for _ in vals]
        for j, v in enumerate(vals):
            out[j][name] = _interval(v, per[:, j], resamples.n_groups, alpha)
    return out


def intervals(stats: Mapping[str, Statistic], n: int, groups: Sequence[Hashable] | None = None,
              *, values: Mapping[str, float] | None = None, n_boot: int = N_BOOT,
              seed: int = 0, alpha: float = ALPHA,
              resamples: Resamples | None = None) -> dict[str, Interval]:
    """``{name: Interval}`` of several statistics of the same ``n`` records on the same
    resamples (so differences of them are paired). ``stats[name](w)`` maps weights ``[b, n]``
    to ``[b]``; the value is the statistic on unit weights unless ``values`` gives it (an exact
    form, e.g. with undefined cases handled). ``resamples``: already drawn, reused."""
    if not 0.0 < alpha < 1.0:
        raise ProbeError(f"alpha must be in (0, 1), got {alpha}")
    if n == 0:
        raise ProbeError("cannot bootstrap zero records")
    if resamples is None:
        resamples = draw_resamples(n, groups, n_boot, seed)
    elif resamples.n != n:
        raise ProbeError(f"resamples of {resamples.n} records for {n} records")
    w = resamples.weights()
    ones = np.ones((1, n))
    vals = {}
    for name, fn in stats.items():
        with np.errstate(invalid="ignore", divide="ignore"):
            vals[name] = [values[name] if values is not None and name in values
                          else float(np.asarray(fn(ones))[0])]
    batched = {name: (lambda _, fn=fn: np.asarray(fn(w), dtype=float)[:, None])
               for name, fn in stats.items()}
    return batch_intervals(batched, resamples, vals, alpha=alpha)[0]


def bootstrap(stat: Statistic, n: int, groups: Sequence[Hashable] | None = None, *,
              value: float | None = None, n_boot: int = N_BOOT, seed: int = 0,
              alpha: float = ALPHA, resamples: Resamples | None = None) -> Interval:
    """The :data:`Interval` of one statistic (see :func:`intervals`)."""
    vals = None if value is None else {"s": value}
    return intervals({"s": stat}, n, groups, values=vals, n_boot=n_boot, seed=seed,
                     alpha=alpha, resamples=resamples)["s"]


def mean_ci(values: Sequence[float], groups: Sequence[Hashable] | None = None, *,
            n_boot: int = N_BOOT, seed: int = 0, alpha: float = ALPHA,
            resamples: Resamples | None = None) -> Interval:
    """The mean of ``values`` with its interval, resampling ``groups`` (None: the values)."""
    v = np.asarray(values, dtype=float)
    return bootstrap(lambda w: (w @ v) / w.sum(axis=1), len(v), groups, n_boot=n_boot,
                     seed=seed, alpha=alpha, resamples=resamples)
