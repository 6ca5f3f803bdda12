"""Predictors under distribution shift, on any datasets: trained on some, scored on the
held-out pairs of those (in distribution) and on every pair of others (shifted).

The generic core of a shift test (the paper's Figure 4 is one instance): :func:`pooled_split`
pools the training stores' splits into one (leak groups prefixed by their dataset, so none
spans two), :func:`every_pair` reads a shifted store whole (nothing of it was trained on), and
:func:`shift_rows` scores every predictor on every set (accuracy, 95% CI over leak groups) and
each method's drop (in distribution minus shifted, both sets resampled at once), and for each
probe kind the judge's drop minus the probe's, with its verdict (:func:`gap_verdict`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.activations.pair_info import PairInfo
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import TIE
from ppairs_lens.evaluation.bootstrap import bootstrap
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.evaluation.resampled import weighted_accuracy
from ppairs_lens.evaluation.store_split import StoreSplit, pair_groups
from ppairs_lens.evaluation.claim_families import FAMILIES
from ppairs_lens.evaluation.verdicts import NOT_TESTED, Verdict, interval_verdict

__all__ = ["SHIFT_DELTA", "IN_DISTRIBUTION", "SHIFTED", "ScoredSet", "every_pair", "gap_verdict",
           "pooled_split", "scored_set", "shift_rows"]

#: Smallest difference of drops worth reporting: the registry's "robustness to shift" δ.
SHIFT_DELTA: float = FAMILIES["robustness to shift"].delta

IN_DISTRIBUTION = "in distribution"
SHIFTED = "shifted"


@dataclass(frozen=True)
class ScoredSet:
    """One set a shift test scores: its targets (1.0 where item 1 is preferred), leak groups
    (prefixed by the set's name) and each method's P(item 1) on every one of its pairs."""

    name: str
    role: str                                  # IN_DISTRIBUTION or SHIFTED
    targets: Float[np.ndarray, " n"]
    groups: tuple[str, ...]
    preds: dict[str, np.ndarray]


def pooled_split(splits: Sequence[StoreSplit], name: str) -> StoreSplit:
    """Several stores' splits as one: training sides together, held-out sides together, each
    pair's leak group prefixed by its dataset (so a validation split keeps it whole)."""
    if len(splits) == 1:
        return splits[0]
    used = sorted({s.split_used for s in splits})

    def groups(side: str) -> list[str]:
        return [f"{s.name}/{g}" for s in splits for g in getattr(s, f"groups_{side}")]

    return StoreSplit(name, torch.cat([s.acts_train for s in splits]),
                      torch.cat([s.acts_test for s in splits]),
                      np.concatenate([s.labels_train for s in splits]),
                      np.concatenate([s.labels_test for s in splits]),
                      [p for s in splits for p in s.pairs_test],
                      [p for s in splits for p in s.pairs_train],
                      groups("train"), groups("test"), "+".join(used),
                      list(splits[0].hook_names))


def every_pair(store: ActivationStore
               ) -> tuple[Float[Tensor, "n 2 layer d_model"], np.ndarray, list[PairInfo]]:
    """``(acts, labels, pairs)`` of every untied pair of ``store``: a shifted set is scored
    whole, as nothing of it was trained on."""
    pairs = store.pairs()
    keep = [i for i, p in enumerate(pairs) if p.label != TIE]
    acts = store.load()
    if len(keep) < len(pairs):
        acts = acts[keep]
    kept = [pairs[i] for i in keep]
    return acts, np.array([p.label for p in kept]), kept


def scored_set(name: str, role: str, labels: np.ndarray, pairs: Sequence[PairInfo],
               preds: dict[str, np.ndarray]) -> ScoredSet:
    """A :class:`ScoredSet` from a set's labels (1 / 2) and pairs."""
    return ScoredSet(name, role, (np.asarray(labels) == 1).astype(float),
                     tuple(f"{name}/{g}" for g in pair_groups(pairs)), dict(preds))


def gap_verdict(d: dict, in_dist: dict[str, float], kind: str, judge: str = "zero_shot"
                ) -> Verdict:
    """"``kind`` probes lose less than prompting" from the CI of (judge's drop - probe's drop);
    a drop is a loss only for a method above chance in distribution (its CI's lower end). The
    reason names the claim (a row's ``verdict`` column is the record's ``text``)."""
    claim = f" (claim: {kind} probes lose less than prompting)"
    at_chance = [m for m in (kind, judge) if not in_dist.get(m, float("nan")) > 0.5]
    if at_chance:
        return Verdict(NOT_TESTED, f"{' and '.join(at_chance)} at chance in distribution (95% "
                       f"CI lower end <= 0.5), so a drop is no loss{claim}",
                       rule="a drop is a loss only above chance in distribution")
    v = interval_verdict(d, SHIFT_DELTA)
    return replace(v, reason=v.reason + claim)


def shift_rows(sets: Sequence[ScoredSet], settings: EvalSettings, *,
               kinds: Sequence[str], judge: str | None = "zero_shot"
               ) -> tuple[list[dict], list[dict]]:
    """``(rows, drops)``: each method's accuracy on each set (95% CI over its leak groups),
    and against the first in-distribution set each method's drop on every shifted set and,
    for each probe kind in ``kinds``, ``judge``'s drop minus the probe's, with its verdict."""
    boot = settings.boot_kwargs()
    rows = []
    for s in sets:
        for method, p in s.preds.items():
            ci = bootstrap(lambda w, p=p, t=s.targets: weighted_accuracy(w, t, p),
                           len(s.targets), list(s.groups), **boot)
            rows.append({"dataset": s.name, "role": s.role, "method": method,
                         "accuracy": ci["value"], "lo": ci["lo"], "hi": ci["hi"],
                         "ci_counts": ci["ci_counts"], "n": len(s.targets)})
    src = next((s for s in sets if s.role == IN_DISTRIBUTION), None)
    if src is None:
        return rows, []
    in_dist = {r["method"]: r["lo"] for r in rows if r["dataset"] == src.name
               and r["role"] == IN_DISTRIBUTION}
    drops = []
    n1 = len(src.targets)
    for s in sets:
        if s.role != SHIFTED:
            continue
        tt = np.concatenate([src.targets, s.targets])
        gg = list(src.groups) + list(s.groups)
        # two sets resampled side by side: the interval is as good as the smaller one's groups
        # (no group-level differences exist across two sets, so no sign-flip test either)
        n_groups = min(len(set(src.groups)), len(set(s.groups)))

        def acc(w, p, part, tt=tt):  # accuracy on one of the two sets, under joint resampling
            sl = slice(0, n1) if part == 0 else slice(n1, None)
            return weighted_accuracy(w[:, sl], tt[sl], p)

        def drop(w, m):
            return acc(w, src.preds[m], 0) - acc(w, s.preds[m], 1)

        shared = [m for m in src.preds if m in s.preds]
        for m in shared:
            d = bootstrap(lambda w, m=m: drop(w, m), len(tt), gg, **boot)
            drops.append({"shifted": s.name, "method": m, "drop": d["value"], "lo": d["lo"],
                          "hi": d["hi"], "ci_counts": d["ci_counts"], "n_groups": n_groups})
        if judge is None or judge not in shared:
            continue
        for k in (k for k in kinds if k in shared):
            d = bootstrap(lambda w, k=k: drop(w, judge) - drop(w, k), len(tt), gg, **boot)
            drops.append({"shifted": s.name, "method": f"{judge} drop - {k} drop",
                          "drop": d["value"], "lo": d["lo"], "hi": d["hi"],
                          "ci_counts": d["ci_counts"], "n_groups": n_groups,
                          "verdict": gap_verdict({**d, "n_groups": n_groups}, in_dist, k,
                                                 judge).text})
    return rows, drops
