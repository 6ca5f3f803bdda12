"""Probes under distribution shift (paper Figure 4, Appendix C).

Probes are fitted on LLMBar's clean subsets (Natural + Normal, the training half of their
split) at the read-out chosen on validation, then scored on the clean held-out half (in
distribution) and on every other subset given (shifted: the main job passes LLMBar's four
Adversarial subsets, Neighbor, GPTInst, GPTOut and Manual, as the paper's Figure 4; any
LLMBar-format file works). A shifted set is scored on the held-out half of its own split,
the pairs the prompted judge answered (its training half is never used). The calibrated zero-shot judge is scored on the same pairs. The paper's claim: probes
lose less than prompting when the data shifts. Each drop (in-distribution minus shifted
accuracy) has a 95% CI, and so has the difference of drops (probe minus judge), resampling
leak groups of both sets at once (:func:`ppairs_lens.evaluation.bootstrap.bootstrap`).
Writes ``distribution_shift.csv`` and the config.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import TIE
from ppairs_lens.evaluation.bootstrap import bootstrap
from ppairs_lens.evaluation.protocol import PAPER_TEST_SIZE, EvalSettings
from ppairs_lens.evaluation.published import citation, published
from ppairs_lens.evaluation.readout_choice import choose_readouts
from ppairs_lens.evaluation.resampled import weighted_accuracy
from ppairs_lens.evaluation.store_split import split_store
from ppairs_lens.evaluation.verdicts import UNDECIDED, interval_verdict
from ppairs_lens.io.outputs import save_config, write_csv
from ppairs_lens.probes.sweep import fit_sweep

__all__ = ["ShiftConfig", "gap_verdict", "run_shift"]


@dataclass
class ShiftConfig:
    kinds: tuple[str, ...] = ("supervised", "pca")
    settings: EvalSettings = EvalSettings(test_size=PAPER_TEST_SIZE)  # the paper's halves
    C: float = 1.0


def gap_verdict(d: dict, in_dist: dict[str, float], kind: str) -> str:
    """"``kind`` probes lose less than prompting" from the CI of (judge's drop - probe's drop);
    a drop is a loss only for a method above chance in distribution (its CI's lower end)."""
    at_chance = [m for m in (kind, "zero_shot") if not in_dist.get(m, float("nan")) > 0.5]
    verdict = (f"{UNDECIDED}: {' and '.join(at_chance)} at chance in distribution (95% CI "
               f"lower end <= 0.5), so a drop is no loss" if at_chance else interval_verdict(d))
    return verdict + f" (claim: {kind} probes lose less than prompting)"


def _held_out(store: ActivationStore, cfg: ShiftConfig):
    return split_store(store, **cfg.settings.split_kwargs())


def run_shift(source: ActivationStore, shifted: Sequence[ActivationStore],
              judge_p: Mapping[str, Mapping[str, float]], out, cfg: ShiftConfig) -> dict:
    """``judge_p``: the zero-shot judge's P(item 1) per held-out pair id, per dataset name."""
    sp = _held_out(source, cfg)
    choice = choose_readouts(sp, cfg.kinds, seed=cfg.settings.seed, C=cfg.C)
    probes = {k: fit_sweep(sp.acts_train[:, :, [choice[k].index]], sp.labels_train, (k,),
                           groups=sp.groups_train, seed=cfg.settings.seed, C=cfg.C)
              for k in cfg.kinds}
    sets = [(source.meta.dataset, "in distribution", sp.acts_test, sp.labels_test,
             sp.pairs_test, sp.groups_test)]
    for st in shifted:
        t = _held_out(st, cfg)
        sets.append((st.meta.dataset, "shifted", t.acts_test, t.labels_test, t.pairs_test,
                     t.groups_test))
    rows, per_set = [], []
    for name, role, acts, y, pairs, groups in sets:
        jp = judge_p.get(name, {})
        keep = [i for i, p in enumerate(pairs) if p.pair_id in jp and y[i] != TIE]
        t = (np.asarray(y)[keep] == 1).astype(float)
        preds = {k: probes[k].predict_proba(acts[keep][:, :, [choice[k].index]])[k][0]
                 for k in cfg.kinds}
        preds["zero_shot"] = np.array([jp[pairs[i].pair_id] for i in keep])
        g = [f"{name}/{groups[i]}" for i in keep]
        per_set.append((name, role, t, preds, g))
        for method, p in preds.items():
            ci = bootstrap(lambda w, p=p: weighted_accuracy(w, t, p), len(t), g,
                           **cfg.settings.boot_kwargs())
            rows.append({"dataset": name, "role": role, "method": method,
                         "read_out": choice[method].index if method in choice else None,
                         "accuracy": ci["value"], "lo": ci["lo"], "hi": ci["hi"],
                         "ci_counts": ci["ci_counts"], "n": len(t)})
    drops = []
    src = per_set[0]
    in_dist = {r["method"]: r["lo"] for r in rows if r["role"] == "in distribution"}
    for name, role, t2, p2, g2 in per_set[1:]:
        t1, p1, g1 = src[2], src[3], src[4]
        n1 = len(t1)
        tt = np.concatenate([t1, t2])
        gg = g1 + g2

        def acc(w, p, part):  # accuracy on one of the two sets, under joint resampling
            sl = slice(0, n1) if part == 0 else slice(n1, None)
            return weighted_accuracy(w[:, sl], tt[sl], p)

        for method in p1:
            def drop(w, m=method):
                return acc(w, p1[m], 0) - acc(w, p2[m], 1)
            d = bootstrap(drop, len(tt), gg, **cfg.settings.boot_kwargs())
            drops.append({"shifted": name, "method": method, "drop": d["value"],
                          "lo": d["lo"], "hi": d["hi"], "ci_counts": d["ci_counts"]})
        for k in cfg.kinds:
            def gap(w, k=k):
                return (acc(w, p1["zero_shot"], 0) - acc(w, p2["zero_shot"], 1)) - \
                    (acc(w, p1[k], 0) - acc(w, p2[k], 1))
            d = bootstrap(gap, len(tt), gg, **cfg.settings.boot_kwargs())
            drops.append({"shifted": name, "method": f"zero_shot drop - {k} drop",
                          "drop": d["value"], "lo": d["lo"], "hi": d["hi"],
                          "ci_counts": d["ci_counts"], "verdict": gap_verdict(d, in_dist, k)})
    write_csv(f"{out}/distribution_shift.csv", rows + [{"role": "drop", **d} for d in drops])
    save_config(out, "distribution_shift", cfg)
    pub = [{"source": citation(p), "note": p.note} for p in published(source="paper")
           if "Figure 4" in p.table]
    return {"rows": rows, "drops": drops, "published": pub,
            "read_outs": {k: c.index for k, c in choice.items()}}
