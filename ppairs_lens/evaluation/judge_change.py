"""How much an intervention changes a judge's answers, with paired CIs over leak groups.

For one condition against the unablated baseline, on the same records (``z``: the judge's
calibrated log-odds that item 1 is preferred): ΔF1 (macro, the statistic the paper's Table 2
publishes), Δaccuracy and ΔAUROC (paired, groups resampled jointly) and the Δlog-odds margin,
the mean signed change of ``z`` towards the gold item; each with a 95% CI and the 90% CI that
an equivalence test (TOST at 5%) reads. :func:`judge_baseline` says whether the unablated
judge decides at all.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import numpy as np
from jaxtyping import Float

from ppairs_lens.evaluation.bootstrap import mean_ci
from ppairs_lens.evaluation.metrics import evaluate_targets
from ppairs_lens.evaluation.null_test import direction_effects, sign_accuracy
from ppairs_lens.evaluation.paired import paired_target_difference

__all__ = ["condition_change", "judge_baseline", "judge_change", "proba_from_logodds"]


def proba_from_logodds(z: Float[np.ndarray, "n"], tol: float = 0.0) -> Float[np.ndarray, "n"]:
    """P(item 1) = sigmoid(z), exactly 0.5 where ``|z| <= tol`` (no answer: half credit)."""
    z = np.asarray(z, dtype=float)
    return np.where(np.abs(z) <= tol, 0.5, 1.0 / (1.0 + np.exp(-z)))


def judge_change(y: Float[np.ndarray, "n"], z_base: Float[np.ndarray, "n"],
                 z_cond: Float[np.ndarray, "n"], groups: Sequence[Hashable], *, n_boot: int,
                 seed: int, tol: float = 0.0, alpha: float = 0.05) -> dict[str, float]:
    """ΔF1, Δaccuracy, ΔAUROC and Δlog-odds margin of ``z_cond`` minus ``z_base`` (``y``: 1
    where item 1 is gold, else 0; not 1/2), each with ``_lo``/``_hi`` (``1 - alpha``) and
    ``_tost_lo``/``_tost_hi`` (``1 - 2 alpha``); ``delta_ci_counts``: whether the CIs resample
    enough groups to count toward a claim."""
    y = np.asarray(y)
    pa, pb = proba_from_logodds(z_cond, tol), proba_from_logodds(z_base, tol)
    out: dict[str, float] = {}
    for metric in ("f1", "accuracy", "auroc"):
        for a, tag in ((alpha, ""), (2 * alpha, "_tost")):
            d = paired_target_difference(y, pa, pb, groups, metric=metric, n_boot=n_boot,
                                         seed=seed, alpha=a)
            out[f"delta_{metric}"] = d["value"]
            # fewer leak groups than a CI needs: shown, but not counted toward a claim
            out["delta_ci_counts"] = bool(d.get("ci_counts", True))
            out[f"delta_{metric}{tag}_lo"], out[f"delta_{metric}{tag}_hi"] = d["lo"], d["hi"]
    signed = np.where(y == 1, 1.0, -1.0) * (np.asarray(z_cond, float) - np.asarray(z_base, float))
    out["delta_logodds"] = float(signed.mean())
    for a, tag in ((alpha, ""), (2 * alpha, "_tost")):
        ci = mean_ci(signed, groups, n_boot=n_boot, seed=seed, alpha=a)
        out[f"delta_logodds{tag}_lo"], out[f"delta_logodds{tag}_hi"] = ci["lo"], ci["hi"]
    return out


def judge_baseline(y: Float[np.ndarray, "n"], z: Float[np.ndarray, "n"],
                   ld_original: Float[np.ndarray, "n"], ld_swapped: Float[np.ndarray, "n"] | None,
                   groups: Sequence[Hashable], *, n_boot: int, seed: int, tol: float = 0.0
                   ) -> dict[str, float]:
    """The unablated judge's F1, accuracy and AUROC with CIs, and ``same_answer_share``: the
    share of records given the same raw answer whatever the items (comparisons: the same
    position in both orders; statements: the majority answer)."""
    ev = evaluate_targets(np.asarray(y), proba_from_logodds(z, tol), groups=groups,
                          n_boot=n_boot, seed=seed)
    ld_o = np.asarray(ld_original, dtype=float)
    if ld_swapped is not None:
        same = float(np.mean(np.sign(ld_o) == np.sign(np.asarray(ld_swapped, dtype=float))))
    else:
        first = float(np.mean(ld_o > 0))
        same = max(first, 1.0 - first)
    return {**{f"judge_{m}{tag}": ev[m][key] for m in ("f1", "accuracy", "auroc")
               for tag, key in (("", "value"), ("_lo", "lo"), ("_hi", "hi"))},
            "same_answer_share": same}


def condition_change(y: Float[np.ndarray, "n"], z_base: Float[np.ndarray, "n"],
                     z_cond: Float[np.ndarray, "n"], groups: Sequence[Hashable], *, n_boot: int,
                     seed: int, tol: float = 0.0) -> dict[str, float]:
    """One condition's row: ``effect`` (mean |Δz|), ``margin``, ``accuracy`` (of sign(z)),
    ``accuracy_delta``, ``mean_abs_z`` and :func:`judge_change`'s CIs."""
    z = np.column_stack([np.asarray(z_base, float), np.asarray(z_cond, float)])
    eff, margin = direction_effects(z[:, 0], z, y)
    acc = [sign_accuracy(z[:, j], y, tol) for j in (0, 1)]
    return {"effect": float(eff[1]), "margin": float(margin[1]), "accuracy": acc[1],
            "accuracy_delta": acc[1] - acc[0], "mean_abs_z": float(np.abs(z[:, 1]).mean()),
            **judge_change(y, z_base, z_cond, groups, n_boot=n_boot, seed=seed, tol=tol)}
