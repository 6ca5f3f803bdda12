"""Predictors under distribution shift, on any datasets: trained on some, scored on the
held-out pairs of those (in distribution) and on every pair of others (shifted).

The generic core of a shift test (the paper's Figure 4 is one instance): training splits are
pooled with leak groups prefixed by their dataset (so none spans two), a shifted store is
scored whole, and :func:`shift_rows` scores every predictor on every set and each method's
drop (in distribution minus shifted, both sets resampled at once).
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
from ppairs_lens.evaluation.bootstrap import MIN_BOOTSTRAP_GROUPS, bootstrap
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.evaluation.resampled import weighted_accuracy
from ppairs_lens.evaluation.store_split import StoreSplit, pair_groups
from ppairs_lens.evaluation.verdicts import ACCURACY_DELTA, NO_SKILL, Verdict, interval_verdict

__all__ = ["SHIFT_DELTA", "IN_DISTRIBUTION", "SHIFTED", "ScoredSet", "every_pair", "gap_verdict",
           "pooled_split", "scored_set", "shift_rows"]

#: Smallest difference of drops worth reporting (the replication's "robustness to shift" δ).
SHIFT_DELTA: float = ACCURACY_DELTA

IN_DISTRIBUTION = "in distribution"
SHIFTED = "shifted"


@dataclass(frozen=True)
class ScoredSet:
    """One set a shift test scores: targets (1.0 where item 1 is preferred, else 0), leak
    groups (prefixed by the set's name) and each method's P(item 1) on every one of its pairs."""

    name: str
    role: str                                  # IN_DISTRIBUTION or SHIFTED
    targets: Float[np.ndarray, " n"]
    groups: tuple[str, ...]
    preds: dict[str, np.ndarray]


def pooled_split(splits: Sequence[StoreSplit], name: str) -> StoreSplit:
    """Several stores' splits as one, each leak group prefixed by its dataset."""
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
    """``(acts, labels, pairs)`` of every untied pair of ``store`` (nothing of it trained on)."""
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
    a drop is a loss only for a method above chance in distribution (its CI's lower end)."""
    claim = f" (claim: {kind} probes lose less than prompting)"
    at_chance = [m for m in (kind, judge) if not in_dist.get(m, float("nan")) > 0.5]
    if at_chance:
        return Verdict(NO_SKILL, f"{' and '.join(at_chance)} at chance in distribution (95% "
                       f"CI lower end <= 0.5), so a drop is no loss{claim}",
                       rule="a drop is a loss only above chance in distribution")
    v = interval_verdict(d, SHIFT_DELTA)
    # one row alone: the registry's claim runs Holm over every shifted set of its family
    return replace(v, reason=v.reason + claim + ", this set alone, before Holm")


def _drop_ci(src: ScoredSet, s: ScoredSet, terms: Sequence[tuple[str, float]],
             ms: np.ndarray, mt: np.ndarray, boot: dict) -> tuple[dict, int]:
    """``(interval, n_groups)`` of ``sum(sign * drop(method))`` over ``terms``, both sets' leak
    groups resampled at once. The interval is as good as the smaller side's groups (no
    group-level differences exist across two sets, so no sign-flip test either)."""
    n1 = int(ms.sum())
    tt = np.concatenate([src.targets[ms], s.targets[mt]])
    g1 = [g for g, k in zip(src.groups, ms) if k]
    g2 = [g for g, k in zip(s.groups, mt) if k]

    def stat(w):
        out = 0.0
        for m, sign in terms:
            out = out + sign * (weighted_accuracy(w[:, :n1], tt[:n1], src.preds[m][ms])
                                - weighted_accuracy(w[:, n1:], tt[n1:], s.preds[m][mt]))
        return out
    n_groups = min(len(set(g1)), len(set(g2)))
    ci = bootstrap(stat, len(tt), g1 + g2, **boot)
    return {**ci, "ci_counts": bool(ci["ci_counts"]) and n_groups >= MIN_BOOTSTRAP_GROUPS}, \
        n_groups


def shift_rows(sets: Sequence[ScoredSet], settings: EvalSettings, *,
               kinds: Sequence[str], judge: str | Sequence[str] | None = "zero_shot"
               ) -> tuple[list[dict], list[dict]]:
    """``(rows, drops)``: each method's accuracy on each set, and against the first
    in-distribution set each method's drop on every shifted set and, for each probe kind, each
    judge's drop minus the probe's, with its verdict. A method that answered only part of a set
    (NaN elsewhere) is scored on the pairs it answered, and so are the probes it is set against."""
    boot = settings.boot_kwargs()
    judges = [judge] if isinstance(judge, str) else list(judge or ())
    rows = []
    for s in sets:
        for method, p in s.preds.items():
            m = np.isfinite(p)
            if not m.any():
                continue
            t, q = s.targets[m], p[m]
            ci = bootstrap(lambda w, q=q, t=t: weighted_accuracy(w, t, q), len(t),
                           [g for g, k in zip(s.groups, m) if k], **boot)
            rows.append({"dataset": s.name, "role": s.role, "method": method,
                         "accuracy": ci["value"], "lo": ci["lo"], "hi": ci["hi"],
                         "ci_counts": ci["ci_counts"], "n": len(t)})
    src = next((s for s in sets if s.role == IN_DISTRIBUTION), None)
    if src is None:
        return rows, []
    in_dist = {r["method"]: r["lo"] for r in rows if r["dataset"] == src.name
               and r["role"] == IN_DISTRIBUTION}
    drops = []
    for s in sets:
        if s.role != SHIFTED:
            continue
        shared = [m for m in src.preds if m in s.preds]
        cover = {m: (np.isfinite(src.preds[m]), np.isfinite(s.preds[m])) for m in shared}
        shared = [m for m in shared if cover[m][0].any() and cover[m][1].any()]
        for m in shared:
            d, n_groups = _drop_ci(src, s, [(m, 1.0)], *cover[m], boot)
            drops.append({"shifted": s.name, "method": m, "drop": d["value"], "lo": d["lo"],
                          "hi": d["hi"], "ci_counts": d["ci_counts"], "n_groups": n_groups})
        for j in (j for j in judges if j in shared):
            for k in (k for k in kinds if k in shared):
                ms, mt = (cover[j][0] & cover[k][0]), (cover[j][1] & cover[k][1])
                d, n_groups = _drop_ci(src, s, [(j, 1.0), (k, -1.0)], ms, mt, boot)
                drops.append({"shifted": s.name, "method": f"{j} drop - {k} drop",
                              "drop": d["value"], "lo": d["lo"], "hi": d["hi"],
                              "ci_counts": d["ci_counts"], "n_groups": n_groups,
                              "verdict": gap_verdict({**d, "n_groups": n_groups}, in_dist, k,
                                                     j).text})
    return rows, drops
