"""From a judge's two choice logits to P(item 1 preferred): log-odds and swap calibration.

A prompted judge's answer is the float64 log-odds ``ld = logit(choice 1) - logit(choice 2)``
(:func:`ppairs_lens.activations.few_logits.choice_logodds`, beside the logits it reads so that
a harvest computes it too); P(choice 1) = ``sigmoid(ld)``, the softmax over those two alone.

LLM judges favour one position, so a comparison is also asked with its items swapped, and the
answers combine in log-odds: ``z = (ld_original - ld_swapped) / 2``, P(item 1) =
``sigmoid(z)``. A constant position bias ``b`` (``ld = s + b``, then ``-s + b``) cancels
exactly and ``s`` keeps its full scale. (Averaging probabilities instead shrinks every answer
of a judge sure of one position towards 0.5, by an amount that changes with the bias, e.g.
under an ablation.) Every judge, comparator and ranking comparison calibrates through here.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, TypeVar

import numpy as np
from jaxtyping import Float, Int
from torch import Tensor

from ppairs_lens.activations.few_logits import choice_logodds

__all__ = ["LOGIT_EPS", "TIE_LOGODDS", "logit", "sigmoid", "swap_calibrated_logodds",
           "swap_calibrate", "swap_calibrated", "choice_probability", "judge_diagnostics"]

#: ``compare(a, b)`` = probability that item ``a`` is preferred over (is "more X" than) ``b``:
#: what a judge gives and the sorts of :mod:`ppairs_lens.ranking` take.
Comparator = Callable[[Hashable, Hashable], float]

P = TypeVar("P", float, np.ndarray)

#: Probabilities are clipped to [LOGIT_EPS, 1 - LOGIT_EPS] before a logit (|logit| <= 27.6),
#: so a judge that is certain (p rounded to 0 or 1 in float64) still gives a finite log-odds.
LOGIT_EPS: float = 1e-12
#: A calibrated answer within this many log-odds of its tie is a tie (``z = 0``, P = 0.5,
#: half a hit): a comparison the judge cannot tell apart sits at ``z = 0`` up to the last bits
#: of float32 logits, which the batch's make-up, the thread count and the CPU's kernels move
#: (the embedded model's ``z`` moved by up to 1.7e-5 between token budgets and thread counts
#: on one host); left as they came, those bits decided its answer, and two hosts disagreed.
#: 2e-4 is ten times that noise and five times below the smallest answer seen on real pairs
#: (1e-3).
TIE_LOGODDS: float = 2e-4


def logit(p: P) -> P:
    """``log(p / (1 - p))`` of probabilities clipped to ``[LOGIT_EPS, 1 - LOGIT_EPS]``."""
    q = np.clip(np.asarray(p, dtype=np.float64), LOGIT_EPS, 1.0 - LOGIT_EPS)
    out = np.log(q) - np.log1p(-q)
    return float(out) if np.ndim(out) == 0 else out


def sigmoid(z: P) -> P:
    """``1 / (1 + exp(-z))`` in float64, without overflow for large ``|z|``."""
    x = np.asarray(z, dtype=np.float64)
    out = np.exp(-np.logaddexp(0.0, -x))
    return float(out) if np.ndim(out) == 0 else out


def swap_calibrated_logodds(ld_original: P, ld_swapped: P) -> P:
    """Calibrated log-odds of item 1 preferred, ``z = (ld_original - ld_swapped) / 2``:
    ``z(a, b) = -z(b, a)``, ``z(a, a) = 0``; ``|z| <`` :data:`TIE_LOGODDS` is a tie, ``z = 0``."""
    z = (np.asarray(ld_original, dtype=np.float64) - np.asarray(ld_swapped, dtype=np.float64)) / 2
    z = np.where(np.abs(z) < TIE_LOGODDS, 0.0, z)      # a tie by rule (TIE_LOGODDS)
    return float(z) if np.ndim(z) == 0 else z


def swap_calibrate(p_original: P, p_swapped: P) -> P:
    """P(item 1 preferred) from both orders' P(first position preferred), through clipped
    logits (:data:`LOGIT_EPS`): callers that have the logits should use
    :func:`swap_calibrated_logodds` on them."""
    return sigmoid(swap_calibrated_logodds(logit(p_original), logit(p_swapped)))


def swap_calibrated(fn: Comparator) -> Comparator:
    """The comparator ``p'(a, b) = swap_calibrate(fn(a, b), fn(b, a))`` (asks ``fn(a, b)``
    first)."""

    def calibrated(a: Hashable, b: Hashable) -> float:
        return float(swap_calibrate(float(fn(a, b)), float(fn(b, a))))

    return calibrated


def choice_probability(logits: Float[Tensor, "pair n_ids"], columns: Int[Tensor, "pair 2"]
                       ) -> Float[np.ndarray, "pair"]:
    """P(first choice) per prompt: float64 softmax over its two choice logits only."""
    return sigmoid(choice_logodds(logits, columns))


def judge_diagnostics(res: Any, labels: Sequence[int] | None = None) -> dict[str, Any]:
    """How far a prompted judge decides, from a
    :class:`~ppairs_lens.judges.zero_shot.ZeroShotResult`.

    ``position_bias_logodds``: mean ``(ld_original + ld_swapped) / 2``, the log-odds given
    choice 1 whatever the items (statements: mean raw log-odds of " True"); ``p_first_choice``:
    mean P(choice 1) over all prompts run (both orders); ``same_raw_answer_share``: records
    whose raw answer names the same position in both orders, i.e. the items did not decide it
    (None for statements); ``first_answer_share``: prompts answered "choice 1"; ``z_abs_mean``:
    how strongly the calibrated judge decides; with ``labels`` (1 / 2 / 0 tie, in the records'
    order): ``accuracy_original`` / ``accuracy_swapped`` (uncalibrated, per order) and
    ``accuracy_calibrated``, ties left out.
    """
    ld_o = np.asarray(res.ld_original, dtype=np.float64)
    ld_s = None if res.ld_swapped is None else np.asarray(res.ld_swapped, dtype=np.float64)
    both = ld_o if ld_s is None else np.concatenate([ld_o, ld_s])
    out: dict[str, Any] = {
        "n": int(len(ld_o)),
        "position_bias_logodds": float(np.mean(both if ld_s is None else (ld_o + ld_s) / 2))
        if len(ld_o) else float("nan"),
        "p_first_choice": float(np.mean(sigmoid(both))) if len(both) else float("nan"),
        "first_answer_share": float(np.mean(both > 0)) if len(both) else float("nan"),
        "same_raw_answer_share": (None if ld_s is None else
                                  float(np.mean(np.sign(ld_o) == np.sign(ld_s)))
                                  if len(ld_o) else float("nan")),
        "z_abs_mean": float(np.mean(np.abs(res.z))) if len(ld_o) else float("nan"),
    }
    if labels is not None:
        y = np.asarray(labels)
        keep = y != 0
        if keep.any():
            first = y[keep] == 1
            out["accuracy_original"] = float(np.mean((ld_o[keep] > 0) == first))
            if ld_s is not None:  # swapped: item 1 sits in position 2
                out["accuracy_swapped"] = float(np.mean((ld_s[keep] < 0) == first))
            out["accuracy_calibrated"] = float(np.mean((np.asarray(res.z)[keep] > 0) == first))
    return out
