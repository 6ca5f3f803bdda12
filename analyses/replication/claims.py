"""The claims registry: each claim the seeds make once, cited to its place in
``../shared/seeds`` and scoped to the models it was made for, beside our own further
questions (families marked ours), and their verdicts.

No two claims compare the same data (:func:`check_registry`; synonyms of one predictor made
one: PPAIRS is the supervised probe, PAIRS the zero-shot judge). Holm runs within each family
over the claims this run could decide. Comparators are fixed before any test pair is read;
"the strongest baseline" is *every* no-model baseline (intersection-union test). A seed claim
whose scope does not cover the run's model is *outside the claim's scope* (our statistic,
no verdict); a step the preset does not run is *not run in this preset*. A reader gives a
difference, a claim test or a *not tested* verdict, never a verdict decided alone (refused).
The paper's Table 1, Appendix A and Section 5 claims: :mod:`analyses.replication.paper_claims`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import replace

from analyses.layer_sweep import SweepResult
from analyses.replication.claim_families import (
    FAMILIES,
    MIN_SORTED_ITEMS,
    PROBES,
    SCOPES,
    Claim,
    Family,
    Scope,
)
from analyses.replication.paper_claims import PAPER_READERS, our_paper_claims, paper_claims
from ppairs_lens.evaluation.intervention_tests import permutation_union_test
from ppairs_lens.evaluation.result_table import BASELINE_KINDS
from analyses.replication.study_claims import ablation_tests, cosine_claim
from ppairs_lens.evaluation.verdicts import (
    NO_SKILL,
    NOT_TESTABLE,
    NOT_TESTED,
    NOT_RUN as NOT_RUN_OUTCOME,
    OUTSIDE_SCOPE,
    ClaimTest,
    Difference,
    Outcome,
    Verdict,
    all_but_one_test,
    beats_chance,
    claim_test,
    decide_family,
    intersection_test,
    interval_note,
    no_skill,
)

__all__ = ["CLAIMS", "FAMILIES", "Claim", "Family", "check_registry", "evaluate_claims",
           "verdicts_available"]


#: The seeds, cited by file (``../shared/seeds``) and place.
PAPER, THESIS = "paper 001_169fa5e1b2d8aaa4.txt", "thesis 000_771906465a50000d.txt"
#: The paper's Figures 2 and 3 datasets (Section 5.1, 5.2: text quality and common sense);
#: SummEval's four aspects each, NEWSROOM and HANNA on coherence.
SIX = ("summeval-coherence", "summeval-consistency", "summeval-fluency", "summeval-relevance",
       "newsroom-coherence", "hanna-coherence", "rocstories", "mctaco", "caters")
#: Our own question "does the probe beat every no-model baseline" asks it wherever probes run.
BASELINE_DATASETS = SIX + ("mt-bench", "llmbar-clean")
#: Thesis Tables 4.1 / 4.2: each corpus's four aspects (NEWSROOM's CON is informativeness).
THESIS_ASPECTS = {"SummEval": ("coherence", "consistency", "fluency", "relevance"),
                  "NEWSROOM": ("coherence", "informativeness", "fluency", "relevance")}
HELD_OUT = "held-out pairs; one difference per test group recorded"
#: Names that denote the same predictor, so that uniqueness is checked on the data compared.
SAME_PREDICTOR = {"PPAIRS": "supervised", "PAIRS": "zero_shot", "direct": "direct",
                  "G-Eval": "g-eval"}
SAME_STATISTIC = {"pairwise accuracy": "accuracy"}


def _seed_registry() -> list[Claim]:
    out: list[Claim] = []
    acc = "held-out pairwise accuracy, A minus B on the same pairs (paired, per test group)"
    paper, fig4_scope = SCOPES["paper"], SCOPES["paper Gemma 2 and Llama 3.1"]
    for k in PROBES:
        out.append(Claim(
            f"fig1.{k}-vs-zero-shot.mt-bench", f"{PAPER}, Section 5, Figure 1",
            f"on MT-Bench the {PROBES[k]} beats the position-calibrated prompted judge",
            "probe vs prompting", acc, ("mt-bench",), HELD_OUT,
            ("mt-bench", k, "zero_shot", "accuracy"), "sweep", (k, "zero_shot"), paper,
            "layer sweep"))
    out.append(Claim(
        "fig1.supervised-as-pca.mt-bench", f"{PAPER}, Section 5, Figure 1",
        "on MT-Bench the supervised and unsupervised probes perform alike (both about 0.8)",
        "supervised as unsupervised", acc + "; both probes above chance first",
        ("mt-bench",), HELD_OUT, ("mt-bench", "supervised", "pca", "accuracy"), "sweep_equal",
        ("supervised", "probe:pca"), paper, "layer sweep"))
    for ds in SIX:
        out.append(Claim(
            f"fig2.pca-vs-zero-shot.{ds}", f"{PAPER}, Section 5.1, Figure 2",
            "the unsupervised (PCA) probe beats position-calibrated zero-shot prompting",
            "probe vs prompting", acc, (ds,), HELD_OUT, (ds, "pca", "zero_shot", "accuracy"),
            "sweep", ("pca", "zero_shot"), paper, "layer sweep"))
        out.append(Claim(
            f"fig3.supervised-vs-pca.{ds}", f"{PAPER}, Section 5.2, Figure 3",
            "the supervised probe improves on the unsupervised probe (the paper: often; "
            "tested here dataset by dataset, a stronger reading than the source's)",
            "supervised vs unsupervised", acc, (ds,), HELD_OUT,
            (ds, "supervised", "pca", "accuracy"), "sweep", ("supervised", "probe:pca"), paper,
            "layer sweep"))
        for m in ("lora", "full"):
            out.append(Claim(
                f"fig3.supervised-vs-{m}.{ds}", f"{PAPER}, Section 5.2, Figure 3",
                f"the supervised probe beats {m} finetuning on the same training comparisons "
                "(the paper: 5,000 training samples, Appendix D, and its result per task; "
                "here the preset's few labels, tested dataset by dataset, a stronger "
                "reading)",
                "probe vs finetuning", acc, (ds,), HELD_OUT, (ds, "supervised", m, "accuracy"),
                "finetuning", (ds, m), SCOPES["paper Gemma 2"], "finetuning"))
    for table, fam, stat in (("4.1", "thesis Table 4.1", "pairwise accuracy"),
                             ("4.2", "thesis Table 4.2", "Spearman after sorting")):
        for corpus, aspects in THESIS_ASPECTS.items():
            for a in aspects:
                ds = f"{corpus.lower()}-{a}"
                for other in ("direct", "PAIRS"):
                    out.append(Claim(
                        f"thesis{table}.ppairs-vs-{other.lower()}.{ds}",
                        f"{THESIS}, Section 4.1.2, Table {table}",
                        f"PPAIRS beats {other} ({stat})" + (
                            " (the thesis's CON column, which its Section 4.1.1 calls "
                            "consistency; NEWSROOM rates no consistency, and the PPairS "
                            "authors' code scores informativeness there)"
                            if a == "informativeness" else ""), fam,
                        f"{stat}, PPAIRS minus {other}", (ds,),
                        "held-out articles; one difference per article" +
                        (f"; {MIN_SORTED_ITEMS}+ summaries sorted in each"
                         if table == "4.2" else ""),
                        (ds, "PPAIRS", other, stat), "thesis", (table, corpus, a, other),
                        SCOPES["thesis"], "thesis tables"))
    out.append(Claim(
        "thesis4.4.insert-vs-gpt-4-few-shot", f"{THESIS}, Section 4.3.3, Table 4.4",
        "PPAIRS_INSERT tags statements' confidence more accurately than GPT-4 few-shot (the "
        "thesis compares its own test claims with the ClimateX paper's 0.47; we pair on "
        "ClimateX's 300 test statements)", "ClimateX",
        "level accuracy, ours minus GPT-4's own predictions on the same statements (paired); "
        "first the probe's held-out pairwise accuracy above chance and its tags above the "
        "majority tagger", ("climatex",), "test statements",
        ("climatex", "PPAIRS_INSERT", "GPT-4 few-shot", "accuracy"), "climatex",
        ("GPT-4", "few-shot"), SCOPES["thesis Llama 3"], "insertion"))
    for k in PROBES:
        out.append(Claim(
            f"fig4.{k}-loses-less", f"{PAPER}, Section 5.4, Figure 4",
            f"{PROBES[k]}s trained on LLMBar Natural + Normal lose less accuracy than "
            "prompting on all but one of the other subsets", "robustness to shift",
            "prompting's drop minus the probe's (in distribution minus shifted) per shifted "
            "set; all but one", ("llmbar-clean", "shifted sets"),
            "in-distribution methods above chance; 20+ groups a side",
            ("shift", k, "zero_shot", "drop"), "shift", (k,), Scope(
                "Llama 3.1 70B (Figure 4); Gemma 2 2B/9B/27B and Llama 3.1 8B (Appendix C)",
                ("llama3170b", "llama318b", "gemma22b", "gemma29b", "gemma227b")),
            "distribution shift"))
        out.append(Claim(
            f"table2.{k}-unchanged", f"{PAPER}, Appendix B, Table 2",
            f"removing the {PROBES[k]}'s direction at every layer leaves the prompted judge's "
            "answers on MT-Bench essentially unchanged", "ablation leaves the judgement "
            "unchanged", "ΔF1 (macro) and Δlog-odds margin, 90% paired CIs (TOST)",
            ("mt-bench",), "a judge that decides; 20+ groups",
            ("mt-bench", k, "ablated", "ΔF1"), "ablation", (k,), fig4_scope, "ablation"))
    out += [Claim("thesis4.1.ppairs-flat-across-models", f"{THESIS}, Section 4.1.2, Table 4.1",
                  "PPAIRS scores about the same whichever of the three LLMs it reads, while "
                  "direct scoring and PAIRS are better on Llama-3 (the thesis's own Table 4.1 "
                  "has them lower on Llama-3 for SummEval consistency and fluency)",
                  "across models",
                  "spread of PPAIRS's pairwise accuracy across the three models, beside the "
                  "prompted methods'", ("summeval", "newsroom"), "the three models in one run",
                  ("thesis tables", "PPAIRS", "across models", "spread"), "needs_models",
                  ("the thesis's three models (Mistral-7B, Llama-2-7B, Llama-3-8B)",),
                  SCOPES["thesis"], "thesis tables"),
            Claim("thesis4.2.ppairs-as-gpt-4-turbo", f"{THESIS}, Section 4.1.2, Table 4.2",
                  "in many cases PPAIRS's rank correlation comes close to or above GPT-4-Turbo's"
                  " (direct scoring and PAIRS, lifted from Liu et al.)", "across models",
                  "Spearman after sorting, PPAIRS beside GPT-4-Turbo's published values",
                  ("summeval", "newsroom"), f"{MIN_SORTED_ITEMS}+ summaries sorted per article "
                  "and a stated count of cases", ("thesis4.2", "PPAIRS", "GPT-4-Turbo",
                                                  "Spearman after sorting"), "gpt4_turbo",
                  (), SCOPES["thesis"], "thesis tables"),
            Claim("thesis4.3.3.probe-pairwise-level", f"{THESIS}, Section 4.3.3",
                  "the ClimateX probe orders pairs of statements by confidence with 72.7% "
                  "accuracy (the thesis trains on 100 claims of AR3-AR6 and does not say its "
                  "pairs are held out; ours are disjoint pairs of ClimateX's test statements)",
                  "level as published",
                  "held-out pairwise accuracy on disjoint ClimateX test pairs minus 0.727",
                  ("climatex",), "held-out pairs of test statements",
                  ("climatex", "PPAIRS", "0.727", "pairwise accuracy"), "climatex_level",
                  (0.727,), SCOPES["thesis Llama 3"], "insertion"),
            Claim("thesis4.4.insert-level", f"{THESIS}, Section 4.3.3, Table 4.4",
                  "PPAIRS_INSERT tags statements' confidence with 0.64 accuracy overall (the "
                  "thesis on its own AR3-AR6 claims; ours on ClimateX's test statements)",
                  "level as published", "level accuracy on the test statements minus 0.64; "
                  "the probe's held-out pairwise accuracy above chance first", ("climatex",),
                  "test statements", ("climatex", "PPAIRS_INSERT", "0.64", "accuracy"),
                  "insert_level", (0.64,), SCOPES["thesis Llama 3"], "insertion"),
            Claim("thesis4.3.3.probe-as-pc1", f"{THESIS}, Section 4.3.3, Appendix C.5",
                  "the ClimateX probe's direction lies close to the first principal component "
                  "of the contrast-pair differences", "directions agree",
                  "cosine of the probe's direction with PC1", ("climatex",),
                  "the cosine recorded, and a stated threshold", ("climatex", "supervised",
                                                                  "PC1", "cosine"),
                  "probe_pc1", (), SCOPES["thesis Llama 3"], "insertion")]
    sf = ("the thesis's SCIENCE FEEDBACK claims (scraped for it, unpublished) are not in "
          "../shared/datasets")
    out += [Claim(f"thesis4.2.ppairs-vs-{other.lower()}.science-feedback",
                  f"{THESIS}, Section 4.2.2, Table 4.3, Appendix B",
                  f"on fact checking (climate and health claims) PPAIRS beats {other}",
                  "thesis Table 4.3", f"pairwise accuracy, PPAIRS minus {other}",
                  ("science-feedback",), "the SCIENCE FEEDBACK claims",
                  ("science-feedback", "PPAIRS", other, "pairwise accuracy"), "no_data", (sf,),
                  SCOPES["thesis Llama 3"], "thesis tables") for other in ("direct", "PAIRS")]
    out += [Claim("thesis4.2.direct-vs-pairs.science-feedback",
                  f"{THESIS}, Section 4.2.2, Table 4.3, Appendix B",
                  "on fact checking direct scoring beats PAIRS in all three domains",
                  "thesis Table 4.3", "pairwise accuracy, direct minus PAIRS",
                  ("science-feedback",), "the SCIENCE FEEDBACK claims",
                  ("science-feedback", "direct", "PAIRS", "pairwise accuracy"), "no_data", (sf,),
                  SCOPES["thesis Llama 3"], "thesis tables"),
            Claim("thesis4.2.transfer-to-energy", f"{THESIS}, Section 4.2.2, Table 4.3, Appendix B",
                  "probes trained on climate or on health claims transfer to energy claims "
                  "(0.88 / 0.87)", "transfer across datasets",
                  "pairwise accuracy on energy claims of a probe trained on another domain, "
                  "minus 0.5", ("science-feedback",), "the SCIENCE FEEDBACK claims",
                  ("science-feedback energy", "PPAIRS transferred", "chance", "accuracy"),
                  "no_data", (sf,), SCOPES["thesis Llama 3"], "transfer")]
    out += [Claim("fig5.pca-agree", f"{PAPER}, Section 5.3, Figure 5",
                  "unsupervised (PCA) directions of different datasets agree up to sign (most "
                  "|cos| above 0.7)", "directions agree", "median |cos| over pairs of "
                  "datasets minus 0.7, with a dataset-bootstrap interval (the run's comparison "
                  "datasets whose probe beats chance: the paper's six and any others)", ("all comparison datasets",),
                  "an interval on the mean |cos|", ("all", "pca", "null", "mean |cos|"),
                  "cosine", ("pca",), SCOPES["paper 70B"], "transfer"),
            Claim("fig5.supervised-near-zero", f"{PAPER}, Section 5.3, Figure 5",
                  "supervised directions of different datasets do not agree: their cosines "
                  "centre on 0", "directions centre on zero", "mean |cos| over pairs of "
                  "datasets, within 0.1 of 0, with a dataset-bootstrap interval", ("all comparison datasets",),
                  "an interval on the mean |cos|", ("all", "supervised", "null", "mean |cos|"),
                  "cosine", ("supervised",), SCOPES["paper 70B"], "transfer")]
    return out + paper_claims(SCOPES)


#: The controls' known answers (analyses/controls.py): the outcomes each may show.
CONTROL_EXPECT: dict[str, tuple[str, ...]] = {
    "ours.control.supervised-beats-chance": ("holds",),
    "ours.control.shuffled-beats-chance": ("inconclusive", "fails"),
    "ours.control.shuffled-beats-supervised": ("fails",)}


def _controls() -> list[Claim]:
    what = {"supervised-beats-chance": ("the supervised probe beats chance", "chance"),
            "shuffled-beats-chance": ("a probe trained on shuffled labels beats chance",
                                      "chance"),
            "shuffled-beats-supervised": ("a probe trained on shuffled labels beats the one "
                                          "trained on the labels", "supervised")}
    return [Claim(f"ours.control.{k}", "ours (a control with a known answer)",
                  f"{text} on the built-in larger_number (known: "
                  f"{' or '.join(CONTROL_EXPECT['ours.control.' + k])})", "ours: controls",
                  "held-out accuracy minus its comparator, per test group", ("larger_number",),
                  HELD_OUT, ("larger_number", k.split("-beats-")[0], against, "accuracy"),
                  "control", (k,), None, "controls") for k, (text, against) in what.items()]


def _our_registry() -> list[Claim]:
    """Our own further questions (families marked ours), the controls first."""
    out: list[Claim] = _controls()
    acc = "held-out pairwise accuracy, A minus B on the same pairs (paired, per test group)"
    for ds in BASELINE_DATASETS:
        out += [Claim(f"ours.baselines.{k}.{ds}", "ours (beside every probe claim; not a gate)",
                      f"the {PROBES[k]} beats every no-model baseline",
                      "ours: probe vs no-model baselines", acc + "; intersection-union over "
                      "the baselines", (ds,), HELD_OUT, (ds, k, "every baseline", "accuracy"),
                      "baselines", (k,), None, "layer sweep") for k in PROBES]
    for corpus, aspects in THESIS_ASPECTS.items():
        for a in aspects:
            ds = f"{corpus.lower()}-{a}"
            out.append(Claim(f"ours.ppairs-vs-g-eval.{ds}", "ours (beside thesis Table 4.1; "
                             "G-Eval is the paper's baseline, its Section 4.3)",
                             "PPAIRS beats G-Eval (pairwise accuracy)", "ours: PPAIRS vs G-Eval",
                             "pairwise accuracy, PPAIRS minus G-Eval", (ds,),
                             "held-out articles", (ds, "PPAIRS", "G-Eval", "pairwise accuracy"),
                             "thesis", ("4.1", corpus, a, "G-Eval"), None, "thesis tables"))
    for model, setting in (("GPT-4", "zero-shot"), ("GPT-3.5", "zero-shot"),
                           ("GPT-3.5", "few-shot")):
        out.append(Claim(
            f"ours.climatex.insert-vs-{model.lower()}-{setting}", "ours (beside thesis Table "
            "4.4 and the ClimateX paper's Table 4)", f"PPAIRS_INSERT beats {model} {setting}",
            "ours: ClimateX against published taggers", "level accuracy, paired on the same "
            "statements (unparsed answers count as wrong)", ("climatex",), "test statements",
            ("climatex", "PPAIRS_INSERT", f"{model} {setting}", "accuracy"), "climatex",
            (model, setting), None, "insertion"))
    out += [Claim("ours.baselines.insert.climatex", "ours (precondition)",
                  "PPAIRS_INSERT beats every no-model tagger", "ours: probe vs no-model "
                  "baselines", "level accuracy, paired; intersection-union over the taggers",
                  ("climatex",), "test statements",
                  ("climatex", "PPAIRS_INSERT", "every baseline", "accuracy"), "taggers", (),
                  None, "insertion"),
            Claim("ours.mass_mean-unchanged", "ours (beside paper Table 2)",
                  "removing the mass-mean direction leaves the judgement unchanged",
                  "ours: other directions leave the judgement unchanged",
                  "ΔF1 (macro) and Δlog-odds margin, 90% paired CIs (TOST)", ("mt-bench",),
                  "a judge that decides; 20+ groups", ("mt-bench", "mass_mean", "ablated", "ΔF1"),
                  "ablation", ("mass_mean",), None, "ablation"),
            Claim("ours.ablation.changes", "ours (the reverse of paper Table 2)",
                  "removing a probe direction changes the judgement more than null directions",
                  "ours: interventions change the judgement", "permutation p of the effect "
                  "against variance-matched null directions", ("mt-bench",),
                  "a judge that decides; enough null directions for Holm",
                  ("mt-bench", "ablation", "null", "effect"), "ablation_changes", (), None,
                  "ablation"),
            Claim("ours.steering.changes", "ours (steering)",
                  "adding a probe direction moves the judge more than variance-matched "
                  "directions", "ours: interventions change the judgement", "permutation p of "
                  "the dose-response slope", ("mt-bench",), "enough null directions for Holm",
                  ("mt-bench", "steering", "null", "slope"), "steering", (), None, "steering")]
    return out + our_paper_claims()


def _registry() -> tuple[Claim, ...]:
    ours = _our_registry()       # the controls first, then the seeds', then our questions
    return tuple(ours[:3] + _seed_registry() + ours[3:])


def _data_key(c: Claim) -> tuple:
    ds, a, b, stat = c.comparison
    same = lambda x: SAME_PREDICTOR.get(x, x)  # noqa: E731
    return ds, same(a), same(b), SAME_STATISTIC.get(stat, stat)


def check_registry(claims) -> None:
    """Refuse a registry where two claims share an id or compare the same data (dataset,
    predictors and statistic, synonyms made one), a family is unknown, a "beats" claim has no
    δ, a seed claim names no scope or a claim of ours has one."""
    seen_id, seen_cmp = {}, {}
    for c in claims:
        if c.id in seen_id:
            raise ValueError(f"claim id {c.id!r} appears twice")
        key = _data_key(c)
        if key in seen_cmp:
            raise ValueError(f"{c.id} and {seen_cmp[key]} compare the same data {key}")
        if c.family not in FAMILIES:
            raise ValueError(f"{c.id}: unknown family {c.family!r}")
        fam = FAMILIES[c.family]
        if fam.kind in ("beats", "unchanged") and not (fam.delta and fam.delta > 0):
            raise ValueError(f"{c.id}: a {fam.kind!r} claim needs a delta")
        if c.read not in READERS:
            raise ValueError(f"{c.id}: unknown reader {c.read!r}")
        if fam.ours != (c.scope is None) or fam.ours != c.id.startswith("ours."):
            raise ValueError(f"{c.id}: a seed claim needs a scope and a family of the seeds; "
                             "our own questions none, in a family marked ours, named ours.*")
        seen_id[c.id], seen_cmp[key] = c.id, c.id


# ------------------------------------------------------------------ readers

Read = Difference | list[Difference] | ClaimTest | Verdict | None
MISSING = None                                  # the run did not produce the numbers


def _sweep(c: Claim, s: dict, sweep: SweepResult) -> Read:
    kind, other = c.args
    e = sweep.entry(c.datasets[0], kind)
    d = e and e.minus.get(other)
    if not d or d.n != e.n_test:
        return MISSING
    return d.difference()


def _control(c: Claim, s: dict, sweep: SweepResult) -> Read:
    r = next((r for r in s.get("controls") or [] if r.get("control") == c.args[0]), None)
    return MISSING if r is None else Difference.from_row(r)


def _sweep_equal(c: Claim, s: dict, sweep: SweepResult) -> Read:
    """An equivalence of two probes counts only where both show skill: each one's held-out
    accuracy CI above chance (two probes at chance are alike vacuously)."""
    entries = {k: sweep.entry(c.datasets[0], k) for k in ("supervised", "pca")}
    lo = {k: e and e.test.lo for k, e in entries.items()}
    groups = {k: e and e.n_groups_test for k, e in entries.items()}
    low = [k for k in entries if not beats_chance(lo[k], n_groups=groups[k])]
    if low:
        why = "; ".join(f"{k}: {no_skill(lo[k], groups[k])}" for k in low)
        return Verdict(NOT_TESTED, f"{' and '.join(low)} shows no skill ({why}): two probes "
                       "at chance are alike whatever they are",
                       method="precondition", needed="both probes above chance")
    return _sweep(c, s, sweep)


def _baselines(c: Claim, s: dict, sweep: SweepResult) -> Read:
    e = sweep.entry(c.datasets[0], c.args[0])
    if not e:
        return MISSING
    return [d.difference() for k, d in e.minus.items()
            if k in BASELINE_KINDS and d.n == e.n_test] or MISSING


def _thesis(c: Claim, s: dict, sweep: SweepResult) -> Read:
    table, corpus, aspect, other = c.args
    r = next((r for r in s.get("thesis_tables") or [] if r.get("model") == "ours"
              and r["table"] == table and r["aspect"] == aspect
              and r.get("dataset", "SummEval") == corpus
              and r["method"] == f"PPAIRS - {other}"), None)
    if r is None:
        return MISSING
    sorted_items = r.get("min_items_sorted")
    if table == "4.2" and (sorted_items is None or sorted_items < MIN_SORTED_ITEMS):
        why = ("the row does not record how many summaries each article sorted (rerun the "
               "thesis tables step)" if sorted_items is None else
               f"articles sort {sorted_items} summaries here (SummEval's file has 16 an "
               f"article; the thesis does not say how many it sorted): a Spearman over "
               f"{sorted_items} is another statistic (over 3 it is only ±0.5 or ±1)")
        return Verdict(NOT_TESTED, why, method="none",
                       needed=f"{MIN_SORTED_ITEMS}+ summaries sorted per article")
    # Table 4.2's unit is the article (its n); Table 4.1's rows name their groups if recorded
    return Difference.from_row({**r, "n_groups": r.get("n_groups",
                                                       r.get("n") if table == "4.2" else None)})


def _finetuning(c: Claim, s: dict, sweep: SweepResult) -> Read:
    ds, m = c.args
    r = next((r for r in s.get("finetuning") or [] if r["dataset"] == ds
              and r["method"] == m and r.get("minus_supervised") is not None), None)
    if r is None:
        return MISSING
    neg = {"value": -r["minus_supervised"], "lo": -r["minus_supervised_hi"],
           "hi": -r["minus_supervised_lo"], "n": r.get("n_test"), "n_groups": r.get("n_groups"),
           "group_diffs": [-x for x in r.get("minus_supervised_group_diffs") or []] or None}
    return Difference.from_row(neg)


def _climatex(c: Claim, s: dict, sweep: SweepResult) -> Read:
    """Ours minus a published model's own predictions on the same statements (a statement the
    unit), after the probe has shown skill: its held-out pairwise accuracy on ClimateX pairs
    above chance and its tags above the majority tagger's."""
    model, setting = c.args
    rows = s.get("insertion") or []
    r = next((r for r in rows if r.get("level") == "published paired"
              and r.get("ours") == "probe" and str(r.get("model", "")).startswith(model)
              and r.get("setting") == setting), None)
    if r is None:
        return MISSING
    pair = _pairwise(rows)
    major = next((r for r in rows if r.get("method") == "probe - majority"), None)
    missing = []
    if pair is None:
        missing.append("the run records no held-out pairwise accuracy of the ClimateX probe "
                       "(the thesis reports 72.7% for Llama-3-8B-Instruct)")
    elif not beats_chance(pair.get("lo"), n_groups=pair.get("n")):
        missing.append(f"the probe's held-out pairwise accuracy {pair['accuracy']:.3f} "
                       f"[{pair['lo']:.3f}, {pair['hi']:.3f}] shows no skill: "
                       f"{no_skill(pair.get('lo'), pair.get('n'))} (the thesis: 72.7%)")
    if major is None or not (major.get("lo") or 0) > 0:
        missing.append("its tags do not beat the majority tagger (" + (
            "no such row" if major is None else f"{major['accuracy']:+.3f} [{major['lo']:+.3f}, "
            f"{major['hi']:+.3f}]") + ")")
    if missing:
        return Verdict(NOT_TESTED, "; ".join(missing) + ": no skill to compare levels with",
                       method="precondition", evidence={"value": r.get("accuracy"),
                                                        "n_groups": r.get("n")},
                       needed="a probe with skill on ClimateX")
    return Difference.from_row({**r, "n_groups": r.get("n_groups", r.get("n"))}, "accuracy")


def _taggers(c: Claim, s: dict, sweep: SweepResult) -> Read:
    rows = [r for r in s.get("insertion") or [] if r.get("level") == "difference"]
    return [Difference.from_row({**r, "n_groups": r.get("n_groups", r.get("n"))},
                                "accuracy") for r in rows] or MISSING


def _shift(c: Claim, s: dict, sweep: SweepResult) -> Read:
    shift = s.get("shift") or {}
    kind = c.args[0]
    lo = {r["method"]: r["lo"] for r in shift.get("rows", []) if r["role"] == "in distribution"}
    rows = [d for d in shift.get("drops", []) if d["method"] == f"zero_shot drop - {kind} drop"]
    if not rows:
        return MISSING
    at_chance = [m for m in (kind, "zero_shot") if not (lo.get(m) or 0) > 0.5]
    if at_chance:
        return Verdict(NOT_TESTED, f"{' and '.join(at_chance)} at chance in distribution (95% "
                       "CI lower end <= 0.5): a drop is no loss", method="precondition",
                       needed="methods above chance in distribution")
    fam = FAMILIES[c.family]
    return all_but_one_test([claim_test(Difference.from_row(d, "drop"), fam.kind, fam.delta,
                                        bound=fam.bound) for d in rows])


def _pairwise(rows: list[dict]) -> dict | None:
    """The ClimateX probe's held-out pairwise accuracy row (its skill), if the run has it."""
    return next((r for r in rows if r.get("level") == "pairwise held-out"
                 and r.get("method") == "probe"), None)


def _minus_level(r: dict, at: float) -> Difference:
    """A row's accuracy and interval minus a published level, each of its n its own group."""
    return Difference(float(r["accuracy"]) - at, float(r["lo"]) - at, float(r["hi"]) - at,
                      int(r["n"]), int(r["n"]))


def _climatex_level(c: Claim, s: dict, sweep: SweepResult) -> Read:
    """The probe's held-out pairwise accuracy on ClimateX minus the published level (each
    disjoint pair its own group)."""
    r = _pairwise(s.get("insertion") or [])
    return MISSING if r is None else _minus_level(r, c.args[0])


def _gpt4_turbo(c: Claim, s: dict, sweep: SweepResult) -> Read:
    rows = [r for r in s.get("thesis_tables") or [] if r.get("model") == "ours"
            and r.get("table") == "4.2"]
    if not rows:
        return MISSING
    counts = [r["min_items_sorted"] for r in rows if r.get("min_items_sorted") is not None]
    items = min(counts) if counts else None
    why = ("'in many cases' names no count of cases, nor how close is close, so no test of "
           "stated size exists")
    if items is not None and items < MIN_SORTED_ITEMS:
        why = (f"articles sort {items} summaries here, GPT-4-Turbo's published values sort "
               "them all (another statistic); and " + why)
    return Verdict(NOT_TESTED, why, method="design", needed=c.needs)


def _probe_pc1(c: Claim, s: dict, sweep: SweepResult) -> Read:
    """The cosine the insertion step records; "closely aligns" names no threshold and a
    refitted direction's cosine at this size has no interval of known coverage, so it is
    shown, not decided."""
    r = next((r for r in s.get("insertion") or [] if r.get("level") == "direction vs PC1"),
             None)
    if r is None:
        return MISSING
    return Verdict(NOT_TESTED, f"|cos| of the probe with PC1 is {float(r['abs_cos']):.3f} on "
                   f"{r['n']} training pairs; 'closely aligns' names no threshold (the thesis "
                   "shows it as a picture, Appendix C.5), and a refitted direction's cosine at "
                   "this size is biased, with no interval of known coverage",
                   method="design", evidence={"value": float(r["abs_cos"]),
                                              "n_pairs": int(r["n"])},
                   needed="a stated threshold and an interval of known coverage")


def _insert_level(c: Claim, s: dict, sweep: SweepResult) -> Read:
    """The probe's level accuracy on the test statements minus the published level, after
    its held-out pairwise accuracy shows skill."""
    rows = s.get("insertion") or []
    r = next((r for r in rows if r.get("method") == "probe" and r.get("level") == "overall"),
             None)
    pair = _pairwise(rows)
    if r is None or pair is None:
        return MISSING
    if not beats_chance(pair.get("lo"), n_groups=pair.get("n")):
        return Verdict(NOT_TESTED, f"the probe's held-out pairwise accuracy "
                       f"{pair['accuracy']:.3f} [{pair['lo']:.3f}, {pair['hi']:.3f}] shows no "
                       f"skill ({no_skill(pair.get('lo'), pair.get('n'))}): no skill to "
                       "compare levels with", method="precondition",
                       needed="a probe with skill on ClimateX")
    return _minus_level(r, c.args[0])


def _no_data(c: Claim, s: dict, sweep: SweepResult) -> Read:
    return Verdict(NOT_TESTED, c.args[0], method="no data", needed=c.needs)


# The intervention and agreement readers give claim tests (p-values), never verdicts decided
# alone: every tested claim enters its family's Holm (a reader's Verdict is "not tested" only).

def _ablation(c: Claim, s: dict, sweep: SweepResult) -> Read:
    t = ablation_tests(s.get("ablation") or []) or {}
    return t.get(c.args[0], MISSING)


def _ablation_changes(c: Claim, s: dict, sweep: SweepResult) -> Read:
    return (ablation_tests(s.get("ablation") or []) or {}).get("changes", MISSING)


def _p_order(p) -> float:
    """A p-value for choosing the smallest: a missing or NaN one sorts last."""
    return math.inf if p is None or math.isnan(float(p)) else float(p)


def _steering(c: Claim, s: dict, sweep: SweepResult) -> Read:
    rows = s.get("steering") or []
    steer = {r["condition"]: r for r in rows if r.get("kind") == "probe"}
    if not steer:
        return MISSING
    n_null = min([int(r["n_slope_matched"]) for r in steer.values()  # the coarsest p counts
                  if r.get("n_slope_matched") is not None]
                 or [int(r.get("n_matched") or 0) for r in rows
                     if r.get("condition") == "matched"] or [0])
    best = min(steer.values(), key=lambda r: _p_order(r.get("p_slope_matched")))
    return permutation_union_test([r.get("p_slope_matched", math.nan) for r in steer.values()],
                                  n_null, delta=FAMILIES[c.family].delta,
                                  value=float(best.get("slope", math.nan)), names=list(steer),
                                  what="variance-matched null directions (dose-response slope)")


def _cosine(c: Claim, s: dict, sweep: SweepResult) -> Read:
    """Figure 5 on the transfer step's directions, with its dataset-bootstrap intervals (one
    dataset a group): the median |cos| minus the paper's 0.7 (agreement), the mean |cos|
    (centred on zero)."""
    v = cosine_claim(s.get("transfer"), c.args[0])
    if not v:
        return MISSING
    ev = v.get("evidence") or {}
    stat = "median_abs_cos" if c.family == "directions agree" else "mean_abs_cos"
    at = 0.7 if c.family == "directions agree" else 0.0     # the paper's threshold; zero
    if ev.get(f"{stat}_ci") and ev.get(stat) is not None:
        lo, hi = ev[f"{stat}_ci"]
        return Difference(ev[stat] - at, lo - at, hi - at, ev["n_datasets"], ev.get("n_pairs"))
    if "beat chance in distribution" in str(v.get("reason")):
        return Verdict(NOT_TESTED, v["reason"] + " (the transfer step's cosine read-out, one "
                       "for every dataset; the headline rows score each probe at its own "
                       "source's read-out, so their accuracies differ)", v.get("rule", ""), ev,
                       "precondition", needed="2+ probes above chance in distribution")
    return Verdict(NOT_TESTED, "this run's transfer step recorded no interval on the mean |cos| "
                   "(rerun it)", v.get("rule", ""), ev, "none",
                   needed="an interval on the mean |cos| over datasets")


READERS: dict[str, Callable[[Claim, dict, dict], Read]] = {
    "sweep": _sweep, "sweep_equal": _sweep_equal, "control": _control, "baselines": _baselines,
    "thesis": _thesis, "finetuning": _finetuning, "climatex": _climatex, "taggers": _taggers,
    "shift": _shift, "ablation": _ablation, "ablation_changes": _ablation_changes,
    "steering": _steering, "cosine": _cosine, "climatex_level": _climatex_level,
    "gpt4_turbo": _gpt4_turbo, "probe_pc1": _probe_pc1, "insert_level": _insert_level,
    "no_data": _no_data, **PAPER_READERS}

CLAIMS = _registry()
check_registry(CLAIMS)


# ------------------------------------------------------------------ evaluation

def _test(c: Claim, got: Read) -> ClaimTest | Verdict:
    fam = FAMILIES[c.family]
    if got is MISSING:
        return Verdict(NOT_RUN_OUTCOME, f"this run's {c.step or 'steps'} did not produce it "
                       f"for {', '.join(c.datasets)}", method="none",
                       needed=(f"a preset whose {c.step} step covers {c.datasets[0]}" if c.step
                               else f"a preset that covers {c.datasets[0]}"))
    if isinstance(got, Verdict):
        if got.outcome != NOT_TESTED:         # decided outside the family's Holm: refused
            raise ValueError(f"{c.id}: its reader decided it ({got.outcome}) outside the "
                             f"Holm of its family {c.family!r}; return a claim test")
        # the label says why: a skill gate that did not pass, a claim no run can test as
        # it is worded, or (otherwise) a size too small
        why = {"precondition": NO_SKILL, "design": NOT_TESTABLE,
               "no data": NOT_RUN_OUTCOME}.get(got.method)
        return replace(got, outcome=why) if why else got
    if isinstance(got, ClaimTest):
        return got
    if isinstance(got, list):
        return intersection_test([claim_test(d, fam.kind, fam.delta, bound=fam.bound)
                                  for d in got])
    return claim_test(got, fam.kind, fam.delta, bound=fam.bound)


def _outside(c: Claim, model: str, t: ClaimTest | Verdict) -> Verdict:
    """A seed claim on a model it was not made for: our statistic, no verdict."""
    why = f"made for {c.scope.models}; this run's model is {model}"
    if isinstance(t, Verdict):
        return Verdict(OUTSIDE_SCOPE, why + (f" (and {t.reason})" if t.reason else ""),
                       t.rule, t.evidence, t.method, needed=t.needed)
    ev = {"value": t.value, "p_holds": t.p_holds, "p_fails": t.p_fails,
          "n_groups": t.n_groups, "n_pairs": t.n_pairs, "group_sd": t.sd,
          "smallest_p": t.smallest_p, "n_null": t.n_null}
    return Verdict(OUTSIDE_SCOPE, why, "", ev, t.method)


def _row(c: Claim, got: Read, v: Verdict) -> dict:
    ev, d = v.evidence or {}, got if isinstance(got, Difference) else None
    k, n, need = ev.get("n_groups"), ev.get("n_pairs"), ev.get("groups_to_decide")
    fam = FAMILIES[c.family]
    lo, hi = (d.lo, d.hi) if d else (None, None)
    return {"id": c.id, "source": c.source, "statement": c.statement, "family": c.family,
            "ours": fam.ours, "scope": c.scope.models if c.scope else "any model (ours)",
            "delta": c.delta, "statistic": c.statistic, "datasets": list(c.datasets),
            "needs": c.needs, "comparison": list(c.comparison),
            # the value the test decided on (tests on group differences: their mean), and
            # the pooled difference beside it where they differ
            "value": ev["value"] if ev.get("value") is not None else d.value if d else None,
            "pooled_value": d.value if d and ev.get("value") is not None
            and d.value is not None and "group differences" in (v.method or "") else None,
            "lo": lo, "hi": hi, "interval_note": interval_note(lo, hi, d.n_groups if d else k),
            "n_pairs": n, "n_groups": k, "method": v.method,
            **{x: ev.get(x) for x in ("p_holds", "p_fails", "p_holds_holm", "p_fails_holm",
                                      "smallest_p", "family_size")},
            "outcome": str(v.outcome), "reason": v.reason, "needed": v.needed,
            "groups_to_decide": need,
            "pairs_to_decide": math.ceil(need * n / k) if need and n and k else None,
            **({"expected": list(CONTROL_EXPECT[c.id]),
                "as_expected": str(v.outcome) in CONTROL_EXPECT[c.id]}
               if c.id in CONTROL_EXPECT else {})}


def verdicts_available(model: str, rows: list[dict] | None = None) -> list[str]:
    """What verdicts a run on ``model`` can give, and why (the report's first lines);
    ``rows``: the run's claim rows, for what it could and could not decide."""
    seed = [c for c in CLAIMS if c.scope is not None]
    inside = [c for c in seed if c.scope.covers(model)]
    ours = [c for c in CLAIMS if c.scope is None]
    got = {r["id"]: r["outcome"] for r in rows or []}
    valued = {r["id"] for r in rows or [] if r.get("value") is not None}
    reached = [c.id for c in seed if got.get(c.id) not in (None, str(NOT_RUN_OUTCOME))]
    n_run, n_valued = len(reached), sum(i in valued for i in reached)
    lines = [f"This run's model is **{model}**. The registry holds {len(seed)} of the seeds' "
             "claims (a claim made for several datasets or aspects counts once for each), "
             f"{len(inside)} of them made for a model like this one. "
             + ("Those get verdicts: holds, fails, beats by less than δ, inconclusive, not "
                "tested at this size." if inside else
                f"So none gets a verdict: the {n_run} this run reached are reported as "
                f"*outside the claim's scope*, never as holds or fails, {n_valued} of them "
                "with our statistic (and its interval where the run records one), the "
                f"{n_run - n_valued} others with the reason the run has no number for them "
                "(a design it cannot run at this size, or data it lacks); the rest are *not "
                "run in this preset*. The embedded model is smaller than every model the "
                "seeds' claims were made for: the paper's smallest, Qwen 2.5 0.5B, is the one "
                "where it says "
                "its unsupervised probes did not beat prompting, and the thesis used 7-8B "
                "models.")]
    by_scope = Counter(c.scope.models for c in seed)      # in the registry's order
    lines += [f"- {n} claim{'s' if n != 1 else ''} made for {m}" for m, n in by_scope.items()]
    decided = sum(got.get(c.id) in ("holds", "fails", "beats, by less than δ") for c in ours)
    small = sum(got.get(c.id) == "not tested at this size" for c in ours)
    lines.append(f"Our own {len(ours)} questions (families marked *ours*: the controls, probes "
                 "against no-model baselines and G-Eval, the ClimateX taggers, "
                 "interventions) are decided on this model and reported apart"
                 + (f": {decided} decided, {small} too small to test." if rows else ".")
                 + " The controls with known answers come first.")
    lines.append("Skill first: a comparison of levels (with a published system) and an "
                 "equivalence (two methods alike) are tested only where the methods first show "
                 "skill on the same run (a CI above chance, or above the majority rate); the "
                 "p-values after such a gate are conditional on it having passed, and are not "
                 "corrected for it. A claim across models is registered and never tested, "
                 "saying why; one that names no count is read at its least where a test "
                 "exists (Table 1's \"in several cases\": 2 or more cells) and registered "
                 "untested where none does (\"in many cases\" against GPT-4-Turbo, whose "
                 "per-item answers are not published).")
    return lines


def evaluate_claims(summary: Mapping, sweep: SweepResult | None) -> dict:
    """``{"claims", "power", "families", "verdicts_available", "verdict_counts"}`` for
    :data:`CLAIMS` on a replication's summary and its layer sweep (``entries`` with their
    paired differences). Seed claims whose scope does not cover the summary's ``model`` are
    outside the claim's scope and do not enter Holm."""
    model = str(summary.get("model") or "")
    sweep = sweep or SweepResult(selection="", metric="accuracy", ci="", entries=())
    got = {c.id: READERS[c.read](c, dict(summary), sweep) for c in CLAIMS}
    tests = {c.id: _test(c, got[c.id]) for c in CLAIMS}
    verdicts: dict[str, Verdict] = {}
    for c in CLAIMS:
        t = tests[c.id]
        if c.scope is not None and not c.scope.covers(model) and not (
                isinstance(t, Verdict) and t.outcome == NOT_RUN_OUTCOME):
            verdicts[c.id] = _outside(c, model, t)
    for fam in FAMILIES:
        ids = [c.id for c in CLAIMS if c.family == fam and c.id not in verdicts]
        verdicts.update(zip(ids, decide_family([tests[i] for i in ids])))
    rows = [_row(c, got[c.id], verdicts[c.id]) for c in CLAIMS]
    keys = ("id", "outcome", "value", "n_pairs", "n_groups", "groups_to_decide",
            "pairs_to_decide", "needed")
    return {"claims": rows, "power": [{k: r[k] for k in keys} for r in rows],
            "families": [{**f.__dict__, "claims": sum(c.family == f.name for c in CLAIMS)}
                         for f in FAMILIES.values()],
            "verdicts_available": verdicts_available(model, rows),
            "verdict_counts": {str(o): sum(r["outcome"] == o for r in rows) for o in Outcome}}
