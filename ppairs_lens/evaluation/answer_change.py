"""How a judge's answers change under a condition (an intervention) against a baseline.

Both are the judge's P(item 1) on the same records; :func:`condition_rows` reports each
metric's value under the condition and its change from the baseline, with a paired bootstrap
(records resampled jointly for both, by context). Metrics (targets ``y``: 1 = item 1
preferred, 0 = item 2):

* ``accuracy``: p within ``tol`` of 0.5 counts half (an exact tie is no answer, and scoring it
  by the ``p >= 0.5`` convention would make a judge stuck at 0.5 score the fraction of
  label-1 pairs);
* ``auroc`` (ties, including p within ``tol`` of 0.5, count half), ``p_correct`` (mean
  probability on the gold item);
* ``mean_abs_dev`` (mean |p - 0.5|: how decided the judge is), ``tie_fraction``
  (|p - 0.5| <= ``tol``);
* ``p_first_choice`` (when given): mean P(first choice token) over both item orders, before
  calibration (the position bias; 0.5 = none), which calibration hides;
* :data:`CHANGE_METRICS`: ``flip_rate`` (fraction of records whose answer differs from the
  baseline's) and ``mean_abs_dp`` (mean |p - p_baseline|), how much the judgement moves,
  gold labels aside. Their value is already a change, so ``delta == value``.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np
from jaxtyping import Float

from ppairs_lens.evaluation.metrics import auroc, bootstrap_ci
from ppairs_lens.probes.estimators import PROBE_KINDS

__all__ = ["BASELINE", "CHANGE_METRICS", "CONDITION_ORDER", "CONTROL", "RANDOM_NULL",
           "condition_rows"]

#: Condition names of an intervention study: no intervention, the positive control, and
#: the random-direction null (its ``random_XX`` rows and their summary row).
BASELINE = "none"
CONTROL = "unembedding"
RANDOM_NULL = "random"
#: Order of conditions in tables and figures (random_XX in between, then the summary row).
CONDITION_ORDER = (BASELINE, *PROBE_KINDS, RANDOM_NULL, CONTROL)

#: Metrics whose value is itself a change from the baseline (delta == value).
CHANGE_METRICS = ("flip_rate", "mean_abs_dp")

Metric = Callable[[np.ndarray, np.ndarray], float]


def _answer(p: np.ndarray, tol: float) -> np.ndarray:
    """1 (item 1), 0 (item 2) or 0.5 (no answer: p within ``tol`` of 0.5)."""
    return np.where(np.abs(p - 0.5) <= tol, 0.5, (p > 0.5).astype(float))


def _metric_fns(tol: float) -> dict[str, Metric]:
    def acc(y, p):
        a = _answer(p, tol)
        return float(np.mean(np.where(a == 0.5, 0.5, a == y)))

    return {
        "accuracy": acc,
        "auroc": lambda y, p: auroc(y, np.where(np.abs(p - 0.5) <= tol, 0.5, p)),
        "p_correct": lambda y, p: float(np.mean(np.where(y == 1, p, 1.0 - p))),
        "mean_abs_dev": lambda y, p: float(np.mean(np.abs(p - 0.5))),
        "tie_fraction": lambda y, p: float(np.mean(np.abs(p - 0.5) <= tol)),
    }


def _change_fns(tol: float) -> dict[str, Metric]:
    """Functions of (y, [p_base, p_cond]) measuring how the answers moved."""
    return {
        "flip_rate": lambda y, s: float(np.mean(_answer(s[:, 0], tol) != _answer(s[:, 1], tol))),
        "mean_abs_dp": lambda y, s: float(np.mean(np.abs(s[:, 1] - s[:, 0]))),
    }


def condition_rows(y: Float[np.ndarray, "n"], p_base: Float[np.ndarray, "n"],
                   p_cond: Float[np.ndarray, "n"], groups: Sequence[Hashable],
                   *, tol: float, n_boot: int, seed: int,
                   first_base: Float[np.ndarray, "n"] | None = None,
                   first_cond: Float[np.ndarray, "n"] | None = None) -> list[dict]:
    """``{metric, value, delta, lo, hi, value_lo, value_hi}`` for one condition.

    ``lo``/``hi`` bound the *delta* by a paired bootstrap (the same resampled records, by
    context, for baseline and condition); ``value_lo``/``value_hi`` bound the value itself.
    The same ``seed`` gives every condition the same resamples. ``first_base`` /
    ``first_cond`` (optional) are P(first choice token) per record, averaged over both item
    orders: their mean is the metric ``p_first_choice`` (the position bias; 0.5 = none).
    """
    both = np.stack([p_base, p_cond], axis=1)
    fns = dict(_metric_fns(tol))
    if first_base is not None and first_cond is not None:
        fns["p_first_choice"] = None  # computed from the first-choice arrays below
    out = []
    for name, fn in fns.items():
        if name == "p_first_choice":
            arr = np.stack([first_base, first_cond, first_base, first_cond], axis=1)
            f1 = lambda yy, q: float(np.mean(q[:, 1]))  # noqa: E731
            f0 = lambda yy, q: float(np.mean(q[:, 0]))  # noqa: E731
        else:
            arr, f1, f0 = both, (lambda yy, q, fn=fn: fn(yy, q[:, 1])), \
                (lambda yy, q, fn=fn: fn(yy, q[:, 0]))
        val = bootstrap_ci(f1, y, arr, n_boot=n_boot, seed=seed, groups=groups)
        dlt = bootstrap_ci(lambda yy, q, f1=f1, f0=f0: f1(yy, q) - f0(yy, q), y, arr,
                           n_boot=n_boot, seed=seed, groups=groups)
        out.append({"metric": name, "value": val["value"], "delta": dlt["value"],
                    "lo": dlt["lo"], "hi": dlt["hi"], "value_lo": val["lo"],
                    "value_hi": val["hi"]})
    for name, fn in _change_fns(tol).items():
        ch = bootstrap_ci(fn, y, both, n_boot=n_boot, seed=seed, groups=groups)
        out.append({"metric": name, "value": ch["value"], "delta": ch["value"], "lo": ch["lo"],
                    "hi": ch["hi"], "value_lo": ch["lo"], "value_hi": ch["hi"]})
    return out
