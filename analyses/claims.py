"""The claims registry: each published claim of the thesis and the paper once, and its verdict.

A :class:`Claim` is a frozen record: id, source, statement, family, the statistic that decides
it, the datasets and sizes it needs, and its comparison ``(dataset, A, B, statistic)``: no two
claims share one (:func:`check_registry`). A :class:`Family` gives its claims' rule and δ with
a one-line reason; Holm runs within each family. Comparators are fixed before any test pair is
read: the prompted judge is the paper's own form (no judge form is scored on a validation
split at these sizes: the threshold form's threshold is fitted on 3-6 training pairs, direct
scoring and G-Eval run on test pairs only); "the strongest baseline" is *every* no-model
baseline (intersection-union test), at least as hard as any one a validation split would pick.
:func:`evaluate_claims` gives the rows, the families and the power table (main job, refresh).
Every tested claim enters its family's Holm: a reader gives a difference, a claim test (its
p-values) or a *not tested* verdict, never a verdict decided alone (refused). The paper's
Table 1 and Appendix A claims and their readers: :mod:`ppairs_lens.evaluation.paper_claims`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping

from ppairs_lens.evaluation.paper_claims import PAPER_READERS, paper_claims
from ppairs_lens.evaluation.claim_families import FAMILIES, MIN_SORTED_ITEMS, Claim, Family
from ppairs_lens.evaluation.intervention_tests import agreement_test, permutation_union_test
from ppairs_lens.evaluation.result_table import BASELINE_KINDS
from ppairs_lens.evaluation.study_claims import ablation_tests, cosine_claim
from ppairs_lens.evaluation.verdicts import (
    NOT_TESTED,
    ClaimTest,
    Difference,
    Outcome,
    Verdict,
    claim_test,
    decide_family,
    intersection_test,
)

__all__ = ["CLAIMS", "FAMILIES", "Claim", "Family", "check_registry", "evaluate_claims",
           "per_layer"]


PVP_DATASETS = ("summeval-coherence", "summeval-consistency", "summeval-fluency",
                "summeval-relevance", "newsroom-coherence", "hanna-coherence", "rocstories",
                "mctaco", "mt-bench", "llmbar-clean")
#: Thesis Tables 4.1 / 4.2: each corpus's four aspects (NEWSROOM's CON is informativeness).
THESIS_ASPECTS = {"SummEval": ("coherence", "consistency", "fluency", "relevance"),
                  "NEWSROOM": ("coherence", "informativeness", "fluency", "relevance")}
#: ClimateX: the published models whose own predictions we are paired with, statement by
#: statement (the files' model names), and their two settings.
CLIMATEX_MODELS = ("GPT-4", "GPT-3.5")
FINETUNE_DATASETS = ("summeval-coherence", "hanna-coherence", "rocstories", "mctaco", "mt-bench")
PROBES = {"supervised": "supervised probe", "pca": "unsupervised probe (PCA)"}
HELD_OUT = "held-out pairs; 20+ test groups (bootstrap CI) or 6+ with group differences"


def _registry() -> tuple[Claim, ...]:
    out: list[Claim] = []
    acc = "held-out pairwise accuracy, A minus B on the same pairs (paired)"
    for ds in PVP_DATASETS:
        out += [
            Claim(f"fig1.supervised-vs-zero-shot.{ds}", "paper Figure 1",
                  "the supervised probe beats the prompted judge (paper form)",
                  "probe vs prompting", acc, (ds,), HELD_OUT,
                  (ds, "supervised", "zero_shot", "accuracy"), "sweep",
                  ("supervised", "zero_shot")),
            Claim(f"fig2.pca-vs-zero-shot.{ds}", "paper Figure 2",
                  "the unsupervised (PCA) probe beats calibrated zero-shot prompting",
                  "probe vs prompting", acc, (ds,), HELD_OUT,
                  (ds, "pca", "zero_shot", "accuracy"), "sweep", ("pca", "zero_shot")),
            Claim(f"fig3.supervised-vs-pca.{ds}", "paper Figure 3",
                  "the supervised probe beats the unsupervised probe",
                  "supervised vs unsupervised", acc, (ds,), HELD_OUT,
                  (ds, "supervised", "pca", "accuracy"), "sweep", ("supervised", "probe:pca"))]
        out += [Claim(f"baselines.{k}.{ds}", "issue 35 (precondition of every probe claim)",
                      f"the {PROBES[k]} beats the strongest no-model baseline (every one)",
                      "probe vs no-model baselines", acc + "; intersection-union over the "
                      "baselines", (ds,), HELD_OUT, (ds, k, "every baseline", "accuracy"),
                      "baselines", (k,)) for k in PROBES]
    for table, fam, stat in (("4.1", "thesis Table 4.1", "pairwise accuracy"),
                             ("4.2", "thesis Table 4.2", "Spearman after sorting")):
        for corpus, aspects in THESIS_ASPECTS.items():
            for a in aspects:
                ds = f"{corpus.lower()}-{a}"
                for other in ("direct", "G-Eval", "PAIRS"):
                    out.append(Claim(
                        f"thesis{table}.ppairs-vs-{other.lower()}.{ds}", f"thesis Table {table}",
                        f"PPAIRS beats {other} ({stat})", fam, f"{stat}, PPAIRS minus {other}",
                        (ds,), "held-out articles; 20+ (bootstrap) or 6+ with group "
                        "differences" + (f"; {MIN_SORTED_ITEMS}+ summaries sorted in each"
                                         if table == "4.2" else ""),
                        (ds, "PPAIRS", other, stat), "thesis",
                        (table, corpus, a, other)))
    for ds in FINETUNE_DATASETS:
        for m in ("lora", "full"):
            out.append(Claim(f"sec5.2.supervised-vs-{m}.{ds}", "paper Section 5.2",
                             f"the supervised probe beats {m} finetuning on the same training "
                             "comparisons", "probe vs finetuning", acc, (ds,), HELD_OUT,
                             (ds, "supervised", m, "accuracy"), "finetuning", (ds, m)))
    for model in CLIMATEX_MODELS:
        for setting in ("zero-shot", "few-shot"):
            out.append(Claim(
                f"climatex.insert-vs-{model.lower()}-{setting}", "ClimateX paper / thesis 4.4",
                f"PPAIRS_INSERT beats {model} {setting} on ClimateX", "ClimateX",
                f"level accuracy, ours minus {model}'s own predictions on the same statements "
                "(paired)", ("climatex",), "test statements; 20+ (bootstrap) or 6+ with "
                "statement differences", ("climatex", "PPAIRS_INSERT", f"{model} {setting}",
                                          "accuracy"), "climatex", (model, setting)))
    out.append(Claim("baselines.insert.climatex", "issue 35 (precondition)",
                     "PPAIRS_INSERT beats every no-model tagger", "probe vs no-model baselines",
                     "level accuracy, paired; intersection-union over the taggers",
                     ("climatex",), "test statements; 20+",
                     ("climatex", "PPAIRS_INSERT", "every baseline", "accuracy"), "taggers"))
    for k in PROBES:
        out.append(Claim(f"fig4.{k}-loses-less", "paper Figure 4",
                         f"{PROBES[k]}s lose less accuracy than prompting under distribution "
                         "shift", "robustness to shift", "prompting's drop minus the probe's "
                         "(in distribution minus shifted), on every shifted set",
                         ("llmbar-clean", "shifted sets"), "in-distribution methods above "
                         "chance; 20+ groups", ("shift", k, "zero_shot", "drop"), "shift", (k,)))
    for c in ("supervised", "pca", "mass_mean"):
        out.append(Claim(f"table2.{c}-unchanged", "paper Table 2",
                         f"removing the {c} direction leaves the judgement unchanged",
                         "ablation leaves the judgement unchanged",
                         "ΔF1 (macro, the paper's) and Δlog-odds margin, 90% paired CIs (TOST)", ("mt-bench",),
                         "a judge that decides; 20+ groups", ("mt-bench", c, "ablated",
                                                              "ΔF1"), "ablation", (c,)))
    out += [Claim("table2.changes", "paper Table 2",
                  "removing a probe direction changes the judgement more than null directions",
                  "interventions change the judgement", "permutation p of the effect against "
                  "variance-matched null directions", ("mt-bench",), "a judge that decides; "
                  "enough null directions for Holm", ("mt-bench", "ablation", "null", "effect"),
                  "ablation_changes"),
            Claim("steering.changes", "issue 27 (steering)",
                  "adding a probe direction moves the judge more than variance-matched "
                  "directions", "interventions change the judgement", "permutation p of the "
                  "dose-response slope", ("mt-bench",), "enough null directions for Holm",
                  ("mt-bench", "steering", "null", "slope"), "steering"),
            Claim("fig5.pca-agree", "paper Figure 5",
                  "unsupervised (PCA) directions agree across datasets", "directions agree",
                  "mean |cos| against isotropic and covariance nulls",
                  ("all comparison datasets",), "2+ probes above chance in distribution",
                  ("all", "pca", "null", "mean |cos|"), "cosine", ("pca",)),
            Claim("fig5.supervised-agree", "paper Figure 5",
                  "supervised directions agree across datasets", "directions agree",
                  "mean |cos| against isotropic and covariance nulls",
                  ("all comparison datasets",), "2+ probes above chance in distribution",
                  ("all", "supervised", "null", "mean |cos|"), "cosine", ("supervised",))]
    return tuple(out + paper_claims(PVP_DATASETS))     # Table 1 and Appendix A


def per_layer(rows) -> list[dict]:
    """The layer sweep's per-layer accuracy rows of the kinds the layer claims read (Appendix
    A: :mod:`ppairs_lens.evaluation.paper_claims`), as the claims need them."""
    keep = ("dataset", "kind", "layer", "metric", "value", "lo", "hi", "ci_counts", "n_test")
    return [{k: r.get(k) for k in keep} for r in rows if int(r["layer"]) >= 0
            and r.get("metric") == "accuracy" and r.get("kind") in PROBES]


def check_registry(claims) -> None:
    """Refuse a registry where two claims share an id or a comparison, a family is unknown,
    or a "beats" claim has no δ."""
    seen_id, seen_cmp = {}, {}
    for c in claims:
        if c.id in seen_id:
            raise ValueError(f"claim id {c.id!r} appears twice")
        if c.comparison in seen_cmp:
            raise ValueError(f"{c.id} and {seen_cmp[c.comparison]} share the comparison "
                             f"{c.comparison}")
        if c.family not in FAMILIES:
            raise ValueError(f"{c.id}: unknown family {c.family!r}")
        fam = FAMILIES[c.family]
        if fam.kind in ("beats", "unchanged") and not (fam.delta and fam.delta > 0):
            raise ValueError(f"{c.id}: a {fam.kind!r} claim needs a delta")
        if c.read not in READERS:
            raise ValueError(f"{c.id}: unknown reader {c.read!r}")
        seen_id[c.id], seen_cmp[c.comparison] = c.id, c.id


# ------------------------------------------------------------------ readers

Read = Difference | list[Difference] | ClaimTest | Verdict | None
NOT_RUN = None                                  # the run did not produce the numbers


def _sweep(c: Claim, s: dict, sweep: dict) -> Read:
    kind, other = c.args
    e = next((e for e in sweep.get("entries", []) if e["dataset"] == c.datasets[0]
              and e["kind"] == kind), None)
    d = (e or {}).get("minus", {}).get(other)
    if not d or d.get("n") != e.get("n_test"):
        return NOT_RUN
    return Difference.from_row(d)


def _baselines(c: Claim, s: dict, sweep: dict) -> Read:
    e = next((e for e in sweep.get("entries", []) if e["dataset"] == c.datasets[0]
              and e["kind"] == c.args[0]), None)
    if not e:
        return NOT_RUN
    return [Difference.from_row(d) for k, d in e["minus"].items()
            if k in BASELINE_KINDS
            and d.get("n") == e["n_test"]] or NOT_RUN


def _thesis(c: Claim, s: dict, sweep: dict) -> Read:
    table, corpus, aspect, other = c.args
    r = next((r for r in s.get("thesis_tables") or [] if r.get("model") == "ours"
              and r["table"] == table and r["aspect"] == aspect
              and r.get("dataset", "SummEval") == corpus
              and r["method"] == f"PPAIRS - {other}"), None)
    if r is None:
        return NOT_RUN
    sorted_items = r.get("min_items_sorted")
    if table == "4.2" and (sorted_items is None or sorted_items < MIN_SORTED_ITEMS):
        why = ("the row does not record how many summaries each article sorted (rerun the "
               "thesis tables step)" if sorted_items is None else
               f"articles sort {sorted_items} summaries here, not the thesis's 16: a Spearman "
               f"over {sorted_items} is another statistic (over 3 it is only ±0.5 or ±1)")
        return Verdict(NOT_TESTED, why, method="precondition",
                       needed=f"{MIN_SORTED_ITEMS}+ summaries sorted per article")
    # Table 4.2's unit is the article (its n); Table 4.1's rows name their groups if recorded
    return Difference.from_row({**r, "n_groups": r.get("n_groups",
                                                       r.get("n") if table == "4.2" else None)})


def _groups_of(r: dict) -> int | None:    # older rows name their groups in ci_unit only
    m = re.search(r"\((\d+) test groups\)", str(r.get("ci_unit", "")))
    return r["n_groups"] if r.get("n_groups") is not None else int(m.group(1)) if m else None


def _finetuning(c: Claim, s: dict, sweep: dict) -> Read:
    ds, m = c.args
    r = next((r for r in s.get("finetuning") or [] if r["dataset"] == ds
              and r["method"] == m and r.get("minus_supervised") is not None), None)
    if r is None:
        return NOT_RUN
    neg = {"value": -r["minus_supervised"], "lo": -r["minus_supervised_hi"],
           "hi": -r["minus_supervised_lo"], "n": r.get("n_test"), "n_groups": _groups_of(r),
           "group_diffs": [-x for x in r.get("minus_supervised_group_diffs") or []] or None}
    return Difference.from_row(neg)


def _climatex(c: Claim, s: dict, sweep: dict) -> Read:
    model, setting = c.args
    # paired: our tags and the model's own predictions on the same statements, a statement
    # the unit (its hit difference); an older run's unpaired rows are not read
    r = next((r for r in s.get("insertion") or [] if r.get("level") == "published paired"
              and r.get("ours") == "probe" and str(r.get("model", "")).startswith(model)
              and r.get("setting") == setting), None)
    if r is None:
        return NOT_RUN
    return Difference.from_row({**r, "n_groups": r.get("n_groups", r.get("n"))}, "accuracy")


def _taggers(c: Claim, s: dict, sweep: dict) -> Read:
    rows = [r for r in s.get("insertion") or [] if r.get("level") == "difference"]
    return [Difference.from_row({**r, "n_groups": r.get("n_groups", r.get("n"))},
                                "accuracy") for r in rows] or NOT_RUN


def _shift(c: Claim, s: dict, sweep: dict) -> Read:
    shift = s.get("shift") or {}
    kind = c.args[0]
    lo = {r["method"]: r["lo"] for r in shift.get("rows", []) if r["role"] == "in distribution"}
    rows = [d for d in shift.get("drops", []) if d["method"] == f"zero_shot drop - {kind} drop"]
    if not rows:
        return NOT_RUN
    at_chance = [m for m in (kind, "zero_shot") if not (lo.get(m) or 0) > 0.5]
    if at_chance:
        return Verdict(NOT_TESTED, f"{' and '.join(at_chance)} at chance in distribution (95% "
                       "CI lower end <= 0.5): a drop is no loss", method="precondition",
                       needed="methods above chance in distribution")
    return [Difference.from_row(d, "drop") for d in rows]


# The intervention and agreement readers give claim tests (p-values), never verdicts decided
# alone: every tested claim enters its family's Holm (a reader's Verdict is "not tested" only).

def _ablation(c: Claim, s: dict, sweep: dict) -> Read:
    t = ablation_tests(s.get("ablation") or [], s.get("judges") or {}) or {}
    return t.get(c.args[0], NOT_RUN)


def _ablation_changes(c: Claim, s: dict, sweep: dict) -> Read:
    return (ablation_tests(s.get("ablation") or [], s.get("judges") or {}) or {}).get(
        "changes", NOT_RUN)


def _p_order(p) -> float:
    """A p-value for choosing the smallest: a missing or NaN one sorts last."""
    return math.inf if p is None or math.isnan(float(p)) else float(p)


def _steering(c: Claim, s: dict, sweep: dict) -> Read:
    rows = s.get("steering") or []
    steer = {r["condition"]: r for r in rows if r.get("kind") == "probe"}
    if not steer:
        return NOT_RUN
    n_null = min([int(r["n_slope_matched"]) for r in steer.values()  # the coarsest p counts
                  if r.get("n_slope_matched") is not None]
                 or [int(r.get("n_matched") or 0) for r in rows
                     if r.get("condition") == "matched"] or [0])
    best = min(steer.values(), key=lambda r: _p_order(r.get("p_slope_matched")))
    return permutation_union_test([r.get("p_slope_matched", math.nan) for r in steer.values()],
                                  n_null, delta=FAMILIES[c.family].delta,
                                  value=float(best.get("slope", math.nan)), names=list(steer),
                                  what="variance-matched null directions (dose-response slope)")


def _cosine(c: Claim, s: dict, sweep: dict) -> Read:
    v = cosine_claim(s.get("transfer"), c.args[0])
    if not v:
        return NOT_RUN
    ev = v.get("evidence") or {}
    if v.get("outcome") == str(NOT_TESTED) or len(ev.get("used", [])) < 2:
        return Verdict(NOT_TESTED, v["reason"], v.get("rule", ""), ev, "permutation against "
                       "nulls", needed=v.get("needed") or "2+ probes above chance")
    draws = re.search(r"(\d+) draws each", v.get("rule", ""))
    if not draws:  # the smallest p it could reach is unknown, so it cannot be tested
        return Verdict(NOT_TESTED, "the run does not say how many null draws it took",
                       v.get("rule", ""), ev, "permutation against nulls",
                       needed="a rerun that records its null draws")
    return agreement_test(ev, int(draws.group(1)))


READERS: dict[str, Callable[[Claim, dict, dict], Read]] = {
    "sweep": _sweep, "baselines": _baselines, "thesis": _thesis, "finetuning": _finetuning,
    "climatex": _climatex, "taggers": _taggers, "shift": _shift, "ablation": _ablation,
    "ablation_changes": _ablation_changes, "steering": _steering, "cosine": _cosine,
    **PAPER_READERS}

CLAIMS = _registry()
check_registry(CLAIMS)


# ------------------------------------------------------------------ evaluation

def _test(c: Claim, got: Read) -> ClaimTest | Verdict:
    fam = FAMILIES[c.family]
    if got is NOT_RUN:
        return Verdict(NOT_TESTED, "this run did not produce it", method="none",
                       needed="the step that computes it")
    if isinstance(got, Verdict):
        if got.outcome != NOT_TESTED:         # decided outside the family's Holm: refused
            raise ValueError(f"{c.id}: its reader decided it ({got.outcome}) outside the "
                             f"Holm of its family {c.family!r}; return a claim test")
        return got
    if isinstance(got, ClaimTest):
        return got
    if isinstance(got, list):
        return intersection_test([claim_test(d, fam.kind, fam.delta) for d in got])
    return claim_test(got, fam.kind, fam.delta)


def _row(c: Claim, got: Read, v: Verdict) -> dict:
    ev, d = v.evidence or {}, got if isinstance(got, Difference) else None
    k, n, need = ev.get("n_groups"), ev.get("n_pairs"), ev.get("groups_to_decide")
    return {"id": c.id, "source": c.source, "statement": c.statement, "family": c.family,
            "delta": c.delta, "statistic": c.statistic, "datasets": list(c.datasets),
            "needs": c.needs, "comparison": list(c.comparison),
            # the value the test decided on (a sign-flip test: the mean of the group
            # differences), and the pooled difference beside it where they differ
            "value": ev["value"] if ev.get("value") is not None else d.value if d else None,
            "pooled_value": d.value if d and ev.get("value") is not None
            and d.value is not None and "sign-flip" in v.method else None,
            "lo": d.lo if d else None,
            "hi": d.hi if d else None, "n_pairs": n, "n_groups": k, "method": v.method,
            **{x: ev.get(x) for x in ("p_holds_holm", "p_fails_holm", "smallest_p",
                                      "family_size")},
            "outcome": str(v.outcome), "reason": v.reason, "needed": v.needed,
            "groups_to_decide": need,
            "pairs_to_decide": math.ceil(need * n / k) if need and n and k else None}


def evaluate_claims(summary: Mapping, sweep: Mapping | None) -> dict:
    """``{"claims": [...], "families": [...], "power": [...], "verdict_counts": {...}}`` for
    :data:`CLAIMS` on a replication's summary (its ``thesis_tables``, ``finetuning``,
    ``insertion``, ``shift``, ``ablation``, ``steering``, ``transfer``, ``judges``) and its
    layer sweep's summary (``entries`` with their paired differences)."""
    got = {c.id: READERS[c.read](c, dict(summary), dict(sweep or {})) for c in CLAIMS}
    tests = {c.id: _test(c, got[c.id]) for c in CLAIMS}
    verdicts: dict[str, Verdict] = {}
    for fam in FAMILIES:
        ids = [c.id for c in CLAIMS if c.family == fam]
        verdicts.update(zip(ids, decide_family([tests[i] for i in ids])))
    rows = [_row(c, got[c.id], verdicts[c.id]) for c in CLAIMS]
    keys = ("id", "outcome", "value", "n_pairs", "n_groups", "groups_to_decide",
            "pairs_to_decide", "needed")
    return {"claims": rows, "power": [{k: r[k] for k in keys} for r in rows],
            "families": [{**f.__dict__, "claims": sum(c.family == f.name for c in CLAIMS)}
                         for f in FAMILIES.values()],
            "verdict_counts": {str(o): sum(r["outcome"] == o for r in rows) for o in Outcome}}
