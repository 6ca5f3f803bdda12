"""Two study-level claims of the claims registry drawn from an experiment's rows: do the
directions agree across datasets (:func:`cosine_claim`), and does removing a probe direction
leave the judgement unchanged (:func:`ablation_tests`)?
"""

from __future__ import annotations

import math

from ppairs_lens.interventions.conditions import BASELINE, CONTROL_AT_READOUT
from ppairs_lens.evaluation.cosine_verdict import cosine_rule
from ppairs_lens.evaluation.intervention_tests import (
    equivalence_test,
    judge_decides,
    permutation_union_test,
)
from ppairs_lens.evaluation.verdicts import NOT_TESTED, ClaimTest, Verdict

__all__ = ["ACCURACY_MARGIN", "LOGODDS_MARGIN", "ablation_tests", "cosine_claim"]

#: Equivalence margins for ablation rows that do not carry their run's (AblationConfig's).
ACCURACY_MARGIN, LOGODDS_MARGIN = 0.05, 0.2


def _nan(x) -> bool:
    return x is None or (isinstance(x, float) and math.isnan(x))


def cosine_claim(transfer: dict | None, kind: str = "pca") -> dict | None:
    """The ``kind`` directions' agreement (Figure 5: PCA, and supervised in its other half),
    as the transfer step decided it (:mod:`ppairs_lens.evaluation.cosine_verdict`)."""
    per_kind = (transfer or {}).get("per_kind", transfer or {})  # transfer_summary.json or the section
    pk = per_kind.get(kind)
    if not pk:
        return None
    v = pk.get("agreement") or Verdict(
        NOT_TESTED, "this run's transfer step recorded neither each probe's in-distribution "
        "accuracy CI at the cosine read-out nor the same statistic under the nulls (mean |cos| "
        "of as many random directions); rerun it", cosine_rule()).as_dict()
    return {**v, "mean_abs_cos": pk.get("mean_abs_cos"),
            "frac_above_0.7": pk.get("frac_abs_cos_above_0.7")}


def _ci_of(r: dict | None, m: str, tag: str = "") -> tuple[float, float] | None:
    if not r or _nan(r.get(f"delta_{m}{tag}_lo")):
        return None
    return r[f"delta_{m}{tag}_lo"], r[f"delta_{m}{tag}_hi"]


def _probe_conditions(ablation: list[dict]) -> tuple[list[dict], dict]:
    """The probe rows of the ablation's preset (its first probe row's) and every row of that
    preset by (dataset, condition)."""
    preset = next((r.get("preset") for r in ablation if r.get("kind") == "probe"), None)
    rows = [r for r in ablation if r.get("preset") == preset]
    return ([r for r in rows if r.get("kind") == "probe"],
            {(r["dataset"], r["condition"]): r for r in rows})


def ablation_tests(ablation: list[dict]) -> dict | None:
    """The ablation's claim tests (paper Table 2), to enter their families' Holm: per probe
    condition the "unchanged" equivalence test, and under ``"changes"`` the "changes more
    than null directions" permutation test over all of them; None without an ablation."""
    probes, by = _probe_conditions(ablation)
    if not probes:
        return None
    out: dict = {}
    decides_any = []
    for r in probes:
        ds = r["dataset"]
        base = by.get((ds, BASELINE), {})   # the unablated judge, as the ablation recorded it
        acc_lo, same = base.get("judge_accuracy_lo"), base.get("same_answer_share")
        decides, why = judge_decides(acc_lo, same, n_groups=base.get("n_groups"))
        decides_any.append((decides, f"{ds}: {why}"))
        margin = r.get("accuracy_margin", ACCURACY_MARGIN)
        f1 = _ci_of(r, "f1") is not None
        ctl = by.get((ds, CONTROL_AT_READOUT))
        ctl_ci = (f1 and _ci_of(ctl, "f1")) or _ci_of(ctl, "accuracy")
        moved = ctl_ci is not None and (ctl_ci[0] > margin or ctl_ci[1] < -margin)
        pre = (why if not decides else None if moved else
               "the positive control at the probe's read-out does not move the judgement "
               "beyond the margin either, so no change could be seen")
        out[r["condition"]] = equivalence_test(
            r, margins={"f1" if f1 else "accuracy": margin,
                        "logodds": r.get("logodds_margin", LOGODDS_MARGIN)},
            n_groups=r.get("n_groups"), precondition=pre)
    if not any(ok for ok, _ in decides_any):
        why = "; ".join(dict.fromkeys(w for _, w in decides_any))
        out["changes"] = Verdict(NOT_TESTED, why, "", method="precondition",
                                 needed="a judge that decides")
        return out
    best = min(probes, key=lambda r: (math.inf if r.get("p_matched") is None
                                      or math.isnan(r["p_matched"]) else r["p_matched"]))
    eq = [t.p_holds if isinstance(t, ClaimTest) else math.nan
          for t in (out[r["condition"]] for r in probes)]
    out["changes"] = permutation_union_test(
        [r.get("p_matched", math.nan) for r in probes],
        min(int(r.get("n_matched") or 0) for r in probes), delta=ACCURACY_MARGIN,
        value=float(best.get("effect") or math.nan),
        names=[f"{r['dataset']} {r['condition']}" for r in probes], p_equivalent=eq)
    return out
