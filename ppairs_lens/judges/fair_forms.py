"""A prompted judge's answers in each fair form, so a probe is compared with its best.

A small model's prompted judge can give the same raw answer in both item orders; its
calibrated log-odds then decide only through a small leftover. Three forms are reported, each
from the same two forward passes per comparison (both item orders):

* ``paper``: the probability of item 1 marginalised over the two positions, as the paper
  reports it: ``(P_AB(choice 1) + P_BA(choice 2)) / 2``;
* ``threshold``: the calibrated log-odds ``z`` against a decision threshold fitted on the
  training split's labels (the labels a supervised probe sees);
* AUROC of ``z``, which no threshold changes (scored by the metrics beside the accuracy).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from jaxtyping import Float

from ppairs_lens.judges.calibration import sigmoid, swap_calibrated_logodds

__all__ = ["JudgeForms", "fit_threshold", "judge_forms", "paper_probability"]


def paper_probability(ld_original: Float[np.ndarray, " n"], ld_swapped: Float[np.ndarray, " n"]
                      ) -> Float[np.ndarray, " n"]:
    """P(item 1) marginalised over the two positions (the paper's calibrated comparison); its
    side of 0.5 is the sign of ``ld_original - ld_swapped``, so a calibrated tie
    (:data:`~ppairs_lens.judges.calibration.TIE_LOGODDS`) is exactly 0.5 here too."""
    p = (sigmoid(np.asarray(ld_original)) + sigmoid(-np.asarray(ld_swapped))) / 2
    return np.where(swap_calibrated_logodds(ld_original, ld_swapped) == 0, 0.5, p)


def fit_threshold(z_train: Float[np.ndarray, " n"], item1_better: Float[np.ndarray, " n"]
                  ) -> float:
    """The threshold ``t`` for "item 1 when z > t" with the best training accuracy (the middle
    of the best interval between sorted training scores; 0 without training scores)."""
    z = np.asarray(z_train, dtype=np.float64)
    y = np.asarray(item1_better, dtype=bool)
    if not len(z):
        return 0.0
    s = np.unique(z)
    cuts = np.concatenate([[s[0] - 1.0], (s[:-1] + s[1:]) / 2, [s[-1] + 1.0]])
    acc = np.array([np.mean((z > t) == y) for t in cuts])
    best = np.flatnonzero(acc == acc.max())
    return float(cuts[best[len(best) // 2]])


@dataclass(frozen=True)
class JudgeForms:
    """P(item 1) per evaluated comparison in each form, and the fitted threshold."""

    paper: Float[np.ndarray, " n"]
    threshold: Float[np.ndarray, " n"]
    z: Float[np.ndarray, " n"]
    t: float
    n_train: int


def judge_forms(ld_original: Float[np.ndarray, " n"], ld_swapped: Float[np.ndarray, " n"],
                z_train: Float[np.ndarray, " m"], item1_better_train: Float[np.ndarray, " m"]
                ) -> JudgeForms:
    """The forms of one judge on the evaluated comparisons (log-odds of both orders), its
    threshold fitted on training comparisons' calibrated log-odds and labels."""
    ld_o, ld_s = np.asarray(ld_original, float), np.asarray(ld_swapped, float)
    z = np.asarray(swap_calibrated_logodds(ld_o, ld_s), dtype=np.float64)
    t = fit_threshold(z_train, item1_better_train)
    return JudgeForms(paper_probability(ld_o, ld_s), sigmoid(z - t), z, t, len(z_train))
