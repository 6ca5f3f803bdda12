"""The verdict on "probe directions agree across datasets" (paper Figure 5).

The statistic is the mean |cos| over every pair of the directions of probes that beat chance
in distribution (directions of probes that do not work say nothing about whether the model's
representations agree). It is compared with the *same* statistic (as many directions) under
two nulls: isotropic random unit vectors, and random vectors drawn from each dataset's own
training contrast covariance, since the residual stream is anisotropic. That covariance is of
the contrasts centred within each label: the label signal would otherwise hand the null the
very direction being tested. The transfer step's verdict holds when the statistic beats both
nulls; not beating them is no evidence of disagreement, so that is *inconclusive*, never
*fails*. For the claims registry (paper Figure 5, which can fail) the evidence also carries a
percentile interval from resampling the datasets and the nulls' means: those claims are
decided on mean |cos| minus its null's mean, one dataset a group.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Any

import numpy as np
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.evaluation.bootstrap import intervals
from ppairs_lens.evaluation.metrics import evaluate
from ppairs_lens.evaluation.store_split import StoreSplit, bootstrap_groups
from ppairs_lens.evaluation.verdicts import HOLDS, INCONCLUSIVE, NOT_TESTED, Verdict, beats_chance
from ppairs_lens.probes.sweep import SweepProbes, fit_sweep

__all__ = ["agreement_verdicts", "cosine_agreement_verdict", "cosine_rule",
           "covariance_mean_abs_cos", "dataset_bootstrap_cis", "in_distribution_accuracy",
           "isotropic_mean_abs_cos", "mean_abs_pairwise_cos", "median_abs_pairwise_cos",
           "pc1_alignment", "permutation_p"]


def mean_abs_pairwise_cos(directions: Float[np.ndarray, "m d"]) -> float:
    """Mean |cos| over every unordered pair of rows."""
    u = np.asarray(directions, dtype=float)
    u = u / np.linalg.norm(u, axis=1, keepdims=True)
    i, j = np.triu_indices(len(u), k=1)
    return float(np.abs((u @ u.T)[i, j]).mean())


def median_abs_pairwise_cos(directions: Float[np.ndarray, "m d"]) -> float:
    """Median |cos| over every unordered pair of rows ("most above 0.7": it is above 0.7)."""
    u = np.asarray(directions, dtype=float)
    u = u / np.linalg.norm(u, axis=1, keepdims=True)
    i, j = np.triu_indices(len(u), k=1)
    return float(np.median(np.abs((u @ u.T)[i, j])))


def _pairwise_stat(u: Float[np.ndarray, "s m d"]) -> Float[np.ndarray, "s"]:
    u = u / np.linalg.norm(u, axis=-1, keepdims=True)
    c = np.einsum("smd,snd->smn", u, u)
    i, j = np.triu_indices(u.shape[1], k=1)
    return np.abs(c[:, i, j]).mean(1)


def isotropic_mean_abs_cos(m: int, d: int, n_sim: int = 2000, seed: int = 0
                           ) -> Float[np.ndarray, "n_sim"]:
    """The statistic for ``m`` independent uniform unit vectors in ``R^d``, ``n_sim`` times."""
    rng = np.random.default_rng(seed)
    out = [_pairwise_stat(rng.standard_normal((min(500, n_sim - s), m, d)))
           for s in range(0, n_sim, 500)]
    return np.concatenate(out)


def covariance_mean_abs_cos(features: Sequence[Float[np.ndarray, "n d"]], n_sim: int = 2000,
                            seed: int = 0) -> Float[np.ndarray, "n_sim"]:
    """The statistic under the residual stream's own geometry, ``n_sim`` times: direction ``i``
    is ``g' X_i`` (``g ~ N(0, I)``, ``X_i`` dataset ``i``'s centred training contrasts, so its
    covariance is ``X_i' X_i``)."""
    rng = np.random.default_rng(seed)
    xs = [np.asarray(x, dtype=float) - np.asarray(x, dtype=float).mean(0) for x in features]
    out = [_pairwise_stat(np.stack([rng.standard_normal((min(500, n_sim - s), len(x))) @ x
                                    for x in xs], axis=1))
           for s in range(0, n_sim, 500)]
    return np.concatenate(out)


def dataset_bootstrap_cis(directions: Float[np.ndarray, "m d"], n_boot: int = 2000,
                          seed: int = 0) -> dict[str, tuple[float, float]]:
    """95% percentile intervals on the mean and median |cos| over pairs, resampling the
    datasets: a resample's pairs are those of two draws of *different* datasets, each weighted
    by how often both were drawn, so a direction is never counted against itself. Below 20
    datasets they decide nothing (and with 2 they are of zero width half the time)."""
    u = np.asarray(directions, dtype=float)
    u = u / np.linalg.norm(u, axis=1, keepdims=True)
    c = np.abs(u @ u.T)
    np.fill_diagonal(c, 0.0)
    off = 1.0 - np.eye(len(u))
    i, j = np.triu_indices(len(u), k=1)
    order = np.argsort(c[i, j], kind="stable")
    vals, pi, pj = c[i, j][order], i[order], j[order]

    def mean(w: Float[np.ndarray, "b m"]) -> Float[np.ndarray, " b"]:
        return np.einsum("bi,ij,bj->b", w, c, w) / np.einsum("bi,ij,bj->b", w, off, w)

    def median(w: Float[np.ndarray, "b m"]) -> Float[np.ndarray, " b"]:
        pw = w[:, pi] * w[:, pj]                       # each pair's weight in each resample
        cum = np.cumsum(pw, axis=1)
        half = cum[:, -1:] / 2
        with np.errstate(invalid="ignore"):
            out = vals[np.minimum((cum < half).sum(axis=1), len(vals) - 1)]
        return np.where(cum[:, -1] > 0, out, np.nan)

    ci = intervals({"mean": mean, "median": median}, len(u), n_boot=n_boot, seed=seed)
    return {k: (v["lo"], v["hi"]) for k, v in ci.items()}


def permutation_p(observed: float, null: Float[np.ndarray, "n"]) -> float:
    """One-sided ``(1 + #{null >= observed}) / (1 + n)``."""
    null = np.asarray(null, dtype=float)
    return float((1 + np.sum(null >= observed)) / (1 + len(null)))


def _frac(p: float, n_sim: int) -> str:
    """A permutation p as the exact count it is, ``k/(n_sim + 1)`` (no rounding to 0)."""
    return f"{round(p * (n_sim + 1))}/{n_sim + 1}"


def cosine_rule(chance: float = 0.5, n_sim: int = 2000, alpha: float = 0.01) -> str:
    """The rule :func:`cosine_agreement_verdict` applies, in words."""
    return (f"mean |cos| over all pairs of directions of probes whose in-distribution accuracy "
            f"CI lower end is above {chance}, against the same statistic for as many random "
            f"directions (isotropic, and drawn from each dataset's training contrast "
            f"covariance; {n_sim} draws each): one-sided p < {alpha} against both holds; "
            f"not beating them is inconclusive (no equivalence test)")


def cosine_agreement_verdict(directions: Sequence[Float[np.ndarray, "d"]],
                             accuracy_lo: Sequence[float | None], *,
                             accuracy_groups: Sequence[int | None] | None = None,
                             features: Sequence[Float[np.ndarray, "n d"]] | None = None,
                             names: Sequence[str] | None = None, n_sim: int = 2000,
                             seed: int = 0, alpha: float = 0.01, chance: float = 0.5
                             ) -> Verdict:
    """Do the directions of probes that work agree across datasets (module doc)?
    ``accuracy_lo[i]``: the lower end of dataset ``i``'s in-distribution accuracy CI (over
    ``accuracy_groups[i]`` test groups); ``features[i]``: its training contrast differences at
    the same read-out (the covariance null; None: the claim cannot hold). Not tested with
    fewer than 2 probes above chance."""
    names = list(names or [str(i) for i in range(len(directions))])
    groups = (list(accuracy_groups) if accuracy_groups is not None
              else [None] * len(accuracy_lo))
    keep = [i for i, (lo, k) in enumerate(zip(accuracy_lo, groups, strict=True))
            if beats_chance(lo, chance, n_groups=k)]
    rule = cosine_rule(chance, n_sim, alpha)
    ev: dict[str, Any] = {"used": [names[i] for i in keep],
                          "below_chance": [names[i] for i in range(len(names)) if i not in keep]}
    if len(keep) < 2:
        return Verdict(NOT_TESTED, f"only {len(keep)} of {len(names)} probes beat chance in "
                       f"distribution at the read-out their directions are compared at (a CI "
                       f"over 2+ test groups whose lower end is above chance); agreement "
                       f"needs at least 2", rule, ev)
    if 1 / (n_sim + 1) >= alpha:  # no draw could pass: the test would be run blind
        return Verdict(NOT_TESTED, f"with {n_sim} null draws the smallest p is 1/{n_sim + 1}, "
                       f"not below {alpha}", rule, ev,
                       needed=f"{int(np.ceil(1 / alpha))} null draws")
    dirs = np.stack([np.asarray(directions[i], dtype=float) for i in keep])
    obs = mean_abs_pairwise_cos(dirs)
    iso = isotropic_mean_abs_cos(len(keep), dirs.shape[1], n_sim, seed)
    ev.update(mean_abs_cos=obs, n_pairs=len(list(combinations(keep, 2))),
              n_datasets=len(keep), median_abs_cos=median_abs_pairwise_cos(dirs),
              **{f"{k}_abs_cos_ci": v for k, v in dataset_bootstrap_cis(dirs, n_sim,
                                                                         seed).items()},
              isotropic_mean=float(iso.mean()),
              isotropic_p99=float(np.quantile(iso, 0.99)), p_isotropic=permutation_p(obs, iso))
    cov = None
    if features is not None:
        cov = covariance_mean_abs_cos([features[i] for i in keep], n_sim, seed + 1)
        ev.update(covariance_mean=float(cov.mean()),
                  covariance_p99=float(np.quantile(cov, 0.99)),
                  p_covariance=permutation_p(obs, cov))
    if ev["p_isotropic"] >= alpha:
        return Verdict(INCONCLUSIVE, f"mean |cos| {obs:.3f} is within the isotropic null (p = "
                       f"{_frac(ev['p_isotropic'], n_sim)})", rule, ev)
    if cov is None:
        return Verdict(INCONCLUSIVE, f"mean |cos| {obs:.3f} beats the isotropic null, but no "
                       "covariance null was drawn (no training contrasts given)", rule, ev)
    if ev["p_covariance"] >= alpha:
        return Verdict(INCONCLUSIVE, f"mean |cos| {obs:.3f} beats isotropic vectors but not random "
                       f"directions of the residual stream's own covariance (p = "
                       f"{_frac(ev['p_covariance'], n_sim)})", rule, ev)
    return Verdict(HOLDS, f"mean |cos| {obs:.3f} beats both nulls (p = "
                   f"{_frac(ev['p_isotropic'], n_sim)}, {_frac(ev['p_covariance'], n_sim)})",
                   rule, ev)


def in_distribution_accuracy(split: StoreSplit, sweep: SweepProbes, kind: str, li: int, *,
                             n_boot: int, seed: int) -> dict[str, float] | None:
    """``{value, lo, hi, n_groups}``: held-out accuracy of ``kind``'s probe at read-out ``li``
    on its own test split (None where the probe is degenerate)."""
    if bool(sweep.degenerate[kind][li]):
        return None
    p = sweep.to_probe(kind, li).predict_proba(split.acts_test[:, :, li])[:, 1]
    acc = evaluate(split.labels_test, p, groups=bootstrap_groups(split)[0], n_boot=n_boot,
                   seed=seed)["accuracy"]
    return {"value": acc["value"], "lo": acc["lo"], "hi": acc["hi"],
            "n_groups": acc.get("n_groups")}


def _within_label(split: StoreSplit, li: int) -> np.ndarray:
    """Training contrast differences at ``li``, each label's mean removed."""
    x = (split.acts_train[:, 0, li] - split.acts_train[:, 1, li]).double().numpy()
    y = np.asarray(split.labels_train)
    for lab in np.unique(y):
        x[y == lab] -= x[y == lab].mean(0)
    return x


def agreement_verdicts(stores: Sequence[tuple[str, StoreSplit, SweepProbes]],
                       kinds: Sequence[str], li: int, *, n_boot: int, seed: int,
                       n_sim: int = 2000, alpha: float = 0.01) -> dict[str, dict]:
    """Per kind: the agreement verdict at read-out ``li`` over every dataset's
    ``(name, split, sweep)``, with ``in_distribution`` accuracies."""
    out = {}
    for kind in kinds:
        accs = {n: in_distribution_accuracy(sp, sw, kind, li, n_boot=n_boot, seed=seed)
                for n, sp, sw in stores}
        dirs = [sw.directions[kind][li].double().numpy() for _, _, sw in stores]
        feats = [_within_label(sp, li) for _, sp, _ in stores]
        v = cosine_agreement_verdict(
            dirs, [a["lo"] if a else None for a in accs.values()],
            accuracy_groups=[a["n_groups"] if a else None for a in accs.values()],
            features=feats,
            names=[n for n, _, _ in stores], n_sim=n_sim, seed=seed, alpha=alpha)
        out[kind] = {**v.as_dict(), "in_distribution": accs}
    return out


def pc1_alignment(acts: Float[Tensor, "n 2 layer d"], labels: Sequence[int], layer: int, *,
                  kind: str, seed: int = 0) -> float:
    """``|cos|`` between ``kind``'s direction and the first principal component of the same
    pairs' centred differences at ``layer``, both fitted on all of them (thesis Section 4.3.3:
    the probe lies close to PC1). A value, not an estimate with an interval: a direction
    refitted on a few hundred comparisons that share their items has a cosine biased away from
    the population's, and no interval of known coverage exists here for such a statistic."""
    kinds = tuple(dict.fromkeys((kind, "pca")))
    sw = fit_sweep(acts[:, :, layer:layer + 1], np.asarray(labels), kinds=kinds,
                   n_sign_boot=1, seed=seed)
    u, v = (sw.directions[k][0].double() for k in (kind, "pca"))
    return float((u @ v).abs() / (u.norm() * v.norm()))
