"""The paper's Table 1, Appendix A, Section 5.2 and Section 5.4 claims of the claims registry
(``analyses/replication/claims.py``), with its Figure 2, Appendix C and cost claims: their
records and the readers that turn a run's rows into the statistic each is decided on.

* **Table 1** (Llama 3.1 70B): probes trained on each *other* Table 1 dataset, scored on the
  evaluated dataset's held-out pairs (the transfer step's headline centring). Decided on
  accuracy, not the paper's F1: F1 is no mean over groups, and the sign-flip test needs one
  difference per group (the transfer step's ``group_diffs``; a run without them leaves these
  claims not tested).

  - ``table1.<kind>-transfers.<ds>``: beat chance (accuracy minus 0.5, averaged over the
    sources, per test group);
  - ``table1.pca-transfers-better.<ds>``: unsupervised above supervised (the paper: slightly);
  - ``ours.table1.pca-as-in-domain.<ds>``: unsupervised scores as the dataset's own
    (equivalence within ±δ; Table 1 has no in-domain cells, so the paper does not say);
  - ``table1.pca-reaches-0.95`` (Section 5.3): "in several cases" names no count: read at its
    least (:func:`_several_cells`).

* **Appendix A** (Gemma 2 and Llama 3.1, MT-Bench only), over the layer sweep's per-layer
  accuracies (each its own 95% interval over the test groups) resting on 20+ groups;
  "deeper": deeper than 50% depth.

  - ``appendixA.supervised-plateau``: mean over the deeper layers minus the accuracy at 50%
    depth, equivalent to 0 within ±δ;
  - ``appendixA.pca-jump``: mean over the deeper layers minus mean over the first 10% of the
    layers, above 0 (fails below +δ);
  - ``appendixA.<kind>-second-half``: the second half of the layers above the first;
  - ``appendixA.<kind>-last-layer``: the last block no worse than the other deeper layers ("at
    its best through the last layer"; non-inferiority: the difference plus δ);
  - ``appendixA.pca-jump-earlier-in-larger``: needs several sizes of one family, so it is
    registered and never tested here.

  The layers' accuracies are on the same pairs, so correlated, and no paired interval is
  recorded: the difference's standard error is bounded by the sum of the two sides' (the SD
  of a sum never exceeds the sum of the SDs, whatever the correlation), a conservative
  interval; datasets are independent, so their SEs add in quadrature in the mean over them.

* **Section 5.2** (Figure 3): text quality (NEWSROOM, SummEval, HANNA) against common sense
  (ROCStories, MCTACO, CaTeRS), each task's value its corpora's mean (:func:`_task_mean`).

  - ``fig3.pca-vs-<lora|full>.<ds>``, per text-quality dataset: finetuning trails PCA too;
  - ``fig3.gain-larger-on-text-quality``: supervised minus PCA larger on text quality;
  - ``fig3.finetuning-closer-on-common-sense.<lora|full>``: supervised minus finetuning
    larger on text quality.

* **Section 5.4** (Figure 4): ``fig4.every-method-drops``: each method (both probes and
  prompting) scores lower on the shifted sets than in distribution (:func:`_every_drop`).
* **Section 5.1** (Figure 2): ``fig2.pca-vs-<direct|g-eval>.<ds>`` (PCA beats each other
  prompting method) and ``fig2.qwen-0.5b-exception``; ``appendixC.clearest-on-gemma-2-2b``
  and ``sec5.cost-as-prompting`` need several models or matched hardware: never tested here.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np
from scipy.stats import norm

from ppairs_lens.evaluation.bootstrap import MIN_BOOTSTRAP_GROUPS
from ppairs_lens.evaluation.sign_flip import betting_p
from analyses.layer_sweep import SweepResult, SweepRow
from analyses.replication.claim_families import FAMILIES, PROBES, Claim, Scope
from ppairs_lens.evaluation.verdicts import (NOT_TESTED, ClaimTest, Difference, Verdict,
                                             at_least_test, beats_chance, claim_test)

__all__ = ["COMMON_SENSE", "PAPER_READERS", "TABLE1_DATASETS", "TEXT_QUALITY",
           "our_paper_claims", "paper_claims"]

#: "Several" cells, read as the smallest count that is more than one.
SEVERAL = 2
#: Paper Table 1's datasets (rows and columns) and the names this project's runs give them.
TABLE1_DATASETS = {"NEWSROOM": "newsroom-coherence", "SummEval": "summeval-coherence",
                   "HANNA": "hanna-coherence", "ROCStories": "rocstories", "MCTACO": "mctaco",
                   "CaTeRS": "caters"}
#: Section 5.2's two tasks: text quality (SummEval's four aspects and NEWSROOM and HANNA on
#: coherence) and common sense reasoning.
TEXT_QUALITY = ("summeval-coherence", "summeval-consistency", "summeval-fluency",
                "summeval-relevance", "newsroom-coherence", "hanna-coherence")
COMMON_SENSE = ("rocstories", "mctaco", "caters")
_Z = float(norm.ppf(0.975))
HELD_OUT = "held-out pairs of the evaluated dataset; one difference per test group recorded"


def paper_claims(scopes: Mapping[str, Scope]) -> list[Claim]:
    """The paper's claims (module doc), with their scopes."""
    out: list[Claim] = []
    acc = "held-out pairwise accuracy, per test group, averaged over the other Table 1 datasets"
    where = "paper 001_169fa5e1b2d8aaa4.txt"
    for ds in TABLE1_DATASETS.values():
        for kind, what in (("supervised", "supervised"), ("pca", "unsupervised (PCA)")):
            out.append(Claim(f"table1.{kind}-transfers.{ds}", f"{where}, Section 5.3, Table 1",
                             f"{what} probes trained on the other Table 1 datasets beat chance "
                             f"on {ds} (the paper: high F1; tested here as above chance by δ, a "
                             "weaker reading)", "transfer across datasets", acc + ", minus 0.5",
                             (ds,), HELD_OUT, (ds, f"{kind} transferred", "chance",
                                               "accuracy"), "table1_chance", (kind,),
                             scopes["paper 70B"], "transfer"))
        out.append(Claim(f"table1.pca-transfers-better.{ds}", f"{where}, Section 5.3, Table 1",
                         f"on {ds}, unsupervised probes trained on the other Table 1 datasets "
                         "transfer (slightly) better than supervised ones",
                         "transfer: unsupervised above supervised",
                         acc + ", PCA minus supervised (paired)", (ds,), HELD_OUT,
                         (ds, "pca transferred", "supervised transferred", "accuracy"),
                         "table1_kinds", ("pca", "supervised"), scopes["paper 70B"], "transfer"))
    layer = ("per-layer held-out accuracy (the layer sweep) on MT-Bench, with 20+ test groups; "
             "SE bounded by the sum of the two sides' (module doc)")
    out += [Claim("appendixA.supervised-plateau", f"{where}, Appendix A",
                  "on MT-Bench supervised probes plateau by 40-50% of depth: the deeper layers "
                  "score as the layer at 50% depth", "layer profile: plateau",
                  "mean accuracy over layers deeper than 50% depth minus accuracy at 50% "
                  "depth; " + layer, ("mt-bench",), "20+ test groups",
                  ("mt-bench", "supervised", "layer at 50% depth", "accuracy"), "plateau",
                  ("supervised",), scopes["paper Gemma 2 and Llama 3.1"], "layer sweep"),
            Claim("appendixA.pca-jump", f"{where}, Appendix A",
                  "on MT-Bench unsupervised probes jump from ~0.5 (early layers) to ~0.8 "
                  "(deeper layers) (the paper: a discontinuity; early against late layers, as "
                  "tested here, would also pass a smooth rise)", "layer profile: jump", "mean accuracy over layers deeper "
                  "than 50% depth minus mean over the first 10% of layers; " + layer,
                  ("mt-bench",), "20+ test groups",
                  ("mt-bench", "pca", "first 10% of layers", "accuracy"), "jump", ("pca",),
                  scopes["paper Gemma 2 and Llama 3.1"], "layer sweep")]
    for kind, what in (("supervised", "supervised"), ("pca", "unsupervised (PCA)")):
        out += [Claim(f"appendixA.{kind}-second-half", f"{where}, Appendix A",
                      f"on MT-Bench {what} probes score better over the second half of the "
                      "layers than over the first", "layer profile: halves",
                      "mean accuracy over the second half of the layers minus over the first; "
                      + layer, ("mt-bench",), "20+ test groups",
                      ("mt-bench", kind, "first half of layers", "accuracy"), "halves", (kind,),
                      scopes["paper Gemma 2 and Llama 3.1"], "layer sweep"),
                Claim(f"appendixA.{kind}-last-layer", f"{where}, Appendix A",
                      f"on MT-Bench {what} probes stay at their best through the last layer "
                      "(the last decoder block): it scores no worse than the other layers "
                      "deeper than 50% depth (accuracy here, the paper's F1)",
                      "layer profile: at its best", "accuracy at the last block minus the mean "
                      "over the other blocks deeper than 50% depth, plus 0.05 (non-inferiority)"
                      "; " + layer, ("mt-bench",),
                      "20+ test groups", ("mt-bench", kind, "layers deeper than 50% depth",
                                          "accuracy"), "last_layer", (kind,),
                      scopes["paper Gemma 2 and Llama 3.1"], "layer sweep")]
    out.append(Claim("appendixA.pca-jump-earlier-in-larger", f"{where}, Appendix A",
                     "within a family, the unsupervised probes' jump comes at an earlier layer "
                     "(relative depth) in a larger model", "layer profile: jump",
                     "relative depth of the jump across sizes of one family",
                     ("mt-bench",), "several sizes of one family in one run",
                     ("mt-bench", "pca jump depth", "model size", "rank"), "needs_models",
                     ("several sizes of one model family (the paper: Gemma 2 2B/9B/27B, Llama "
                      "3.1 8B/70B)",), scopes["paper Gemma 2 and Llama 3.1"], "layer sweep"))
    out.append(Claim("table1.pca-reaches-0.95", f"{where}, Section 5.3, Table 1",
                     "unsupervised probes carried to another dataset reach F1 at or above 0.95 "
                     "in several cases (read as 2 or more cells: the paper names no count; "
                     "tested on accuracy, which equals F1 on balanced pairs only)",
                     "transfer across datasets",
                     "the second best transferred cell's accuracy minus 0.95: each cell tested "
                     "above and below 0.95 on its group differences, Holm over the cells",
                     ("all Table 1 datasets",), "2+ datasets with skill in distribution; "
                     "group differences per cell", ("table1", "pca transferred",
                                                               "0.95", "cells"),
                     "several_cells", ("pca",), scopes["paper 70B"], "transfer"))
    fig3, gemma = f"{where}, Section 5.2, Figure 3", scopes["paper Gemma 2"]
    for ds in TEXT_QUALITY:
        for m in ("lora", "full"):
            out.append(Claim(f"fig3.pca-vs-{m}.{ds}", fig3,
                             f"on text quality {m} finetuning trails the unsupervised probe too "
                             "(the paper: a large gap against both probes, over the task; "
                             "tested here dataset by dataset, SummEval's four aspects each, "
                             "a stronger reading)",
                             "probe vs finetuning", "held-out pairwise accuracy, PCA minus "
                             f"{m} on the same pairs (paired, per test group)", (ds,),
                             "held-out pairs; one difference per test group recorded",
                             (ds, "pca", m, "accuracy"), "finetuning_pca", (ds, m), gemma,
                             "finetuning"))
    tasks = "text quality (mean over NEWSROOM, SummEval, HANNA) minus common sense (ROCStories," \
            " MCTACO, CaTeRS); corpora independent, SEs in quadrature"
    out.append(Claim("fig3.gain-larger-on-text-quality", fig3,
                     "the supervised probe's gain over the unsupervised one is larger on text "
                     "quality than on common sense", "task contrast",
                     "held-out accuracy, supervised minus PCA: " + tasks,
                     TEXT_QUALITY + COMMON_SENSE, "both tasks swept",
                     ("text quality vs common sense", "supervised", "pca", "accuracy gap"),
                     "gain_by_task", (), scopes["paper"], "layer sweep"))
    for m in ("lora", "full"):
        out.append(Claim(f"fig3.finetuning-closer-on-common-sense.{m}", fig3,
                         f"{m} finetuning comes closer to the supervised probe on common sense "
                         "than on text quality", "task contrast",
                         f"held-out accuracy, supervised minus {m}: " + tasks,
                         TEXT_QUALITY + COMMON_SENSE, "finetuning on both tasks",
                         ("text quality vs common sense", "supervised", m, "accuracy gap"),
                         "finetuning_by_task", (m,), gemma, "finetuning"))
    out.append(Claim("fig4.every-method-drops", f"{where}, Section 5.4, Figure 4",
                     "every method (both probes and prompting) scores lower on the adversarial "
                     "subsets than in distribution", "drop under shift",
                     "accuracy in distribution minus on the shifted sets, per method, "
                     "averaged over the shifted sets; every method (intersection-union); "
                     "each method above chance in distribution first",
                     ("llmbar-clean", "shifted sets"), "20+ groups on the smallest set",
                     ("shift", "every method", "in distribution", "drop"), "every_drop", (),
                     scopes["paper 70B"], "distribution shift"))
    for ds in TEXT_QUALITY:
        for other, what in (("direct", "direct scoring"), ("g_eval", "G-Eval")):
            out.append(Claim(f"fig2.pca-vs-{other.replace('_', '-')}.{ds}",
                             f"{where}, Section 5.1, Figure 2",
                             f"the unsupervised (PCA) probe beats {what}, the text-quality "
                             "datasets' other prompting methods (the paper reports them beside "
                             "its probes and calls prompting beaten; read here as a claim "
                             "against each, a stronger reading)", "probe vs prompting",
                             "held-out pairwise accuracy, A minus B on the same pairs (paired, "
                             "per test group)", (ds,), HELD_OUT, (ds, "pca", other, "accuracy"),
                             "sweep", ("pca", other), scopes["paper"], "layer sweep"))
    out.append(Claim("fig2.qwen-0.5b-exception", f"{where}, Section 5.1, Figure 2",
                     "on Qwen 2.5 0.5B, the one exception, the unsupervised probe does not beat "
                     "calibrated prompting", "no gain on the smallest model",
                     "held-out accuracy, PCA minus zero-shot, averaged over the six datasets "
                     "(a corpus's aspects first); corpora independent, SEs in quadrature",
                     TEXT_QUALITY + COMMON_SENSE, "the six datasets swept",
                     ("the six", "pca", "zero_shot", "mean accuracy gap"), "pooled_gap",
                     ("pca", "zero_shot"), scopes["paper Qwen 0.5B"], "layer sweep"))
    out.append(Claim("appendixC.clearest-on-gemma-2-2b", f"{where}, Appendix C",
                     "the probes' robustness advantage under shift is clearest on the smallest "
                     "model, Gemma 2 2B", "across models",
                     "the robustness gap across models", ("llmbar-clean", "shifted sets"),
                     "several models in one run", ("shift", "robustness gap", "model size",
                                                   "rank"), "needs_models",
                     ("Gemma 2 2B/9B/27B and Llama 3.1 8B in one run",),
                     scopes["paper Gemma 2 and Llama 3.1"], "distribution shift"))
    out.append(Claim("sec5.cost-as-prompting", f"{where}, Section 5 (Figure 1), Section 5.2 "
                     "and the abstract",
                     "probing costs about what prompting costs at inference, and less than "
                     "finetuning for what it gives", "across models",
                     "seconds per pair of a probe and of the prompted judge on matched hardware",
                     ("all",), "per-method inference cost on matched hardware",
                     ("cost", "probe", "prompting", "seconds"), "cost_claim", (),
                     scopes["paper"], "layer sweep"))
    return out


def our_paper_claims() -> list[Claim]:
    """Our question beside Table 1: does an unsupervised probe carried from another dataset
    score as the dataset's own? (Table 1 has no in-domain cells: the paper does not say.)"""
    acc = "held-out pairwise accuracy, per test group, averaged over the other Table 1 datasets"
    return [Claim(f"ours.table1.pca-as-in-domain.{ds}", "ours (beside paper Table 1)",
                  f"unsupervised probes trained on the other Table 1 datasets score on {ds} as "
                  "its own does", "ours: unsupervised transfer costs nothing",
                  acc + ", minus the in-domain probe's (paired); the in-domain probe above "
                  "chance first", (ds,), HELD_OUT,
                  (ds, "pca transferred", "pca in-domain", "accuracy"), "table1_in_domain",
                  ("pca",), None, "transfer") for ds in TABLE1_DATASETS.values()]


# ------------------------------------------------------------------ Table 1

def _transfer_rows(s: dict, ds: str, kind: str) -> list[dict] | Verdict | None:
    if not s.get("transfer"):
        return None
    rows = [r for r in s["transfer"].get("accuracy") or []
            if r.get("test") == ds and r.get("kind") == kind and not r.get("refused")]
    if not rows:                        # the dataset was not in this run's transfer step
        return None
    if any(r.get("group_diffs") for r in rows):
        return rows
    return Verdict(NOT_TESTED, "this run's transfer step recorded no per-group accuracy "
                   f"differences for {kind} probes on {ds}", method="none",
                   needed="a run of the transfer step that records group differences")


def _source_rows(rows: list[dict], ds: str) -> list[dict]:
    """The rows of probes trained on another Table 1 dataset, with group differences."""
    return [r for r in rows if r.get("train") != ds
            and r.get("train") in TABLE1_DATASETS.values() and r.get("group_diffs")]


def _sources(rows: list[dict], ds: str) -> list[list[float]]:
    return [list(r["group_diffs"]) for r in _source_rows(rows, ds)]


def _mean_difference(per_source: list[list[float]], n_pairs) -> Difference | Verdict:
    k = {len(d) for d in per_source}
    if len(k) != 1:                 # one target split: the same groups for every source
        return Verdict(NOT_TESTED, f"the sources' group differences differ in length {k}",
                       method="none", needed="one held-out split of the evaluated dataset")
    g = np.nanmean(np.asarray(per_source, dtype=float), axis=0)
    return Difference(float(np.nanmean(g)), None, None, len(g),
                      None if n_pairs is None else int(n_pairs), tuple(map(float, g)))


def _table1_chance(c: Claim, s: dict, sweep: SweepResult):
    ds, kind = c.datasets[0], c.args[0]
    rows = _transfer_rows(s, ds, kind)
    if not isinstance(rows, list):
        return rows
    src = _sources(rows, ds)
    if not src:
        return Verdict(NOT_TESTED, "no other Table 1 dataset was a source", method="none",
                       needed="two or more Table 1 datasets in the transfer step")
    return _mean_difference(src, rows[0].get("n_test"))


def _table1_kinds(c: Claim, s: dict, sweep: SweepResult):
    ds, (a, b) = c.datasets[0], c.args
    rows_a, rows_b = _transfer_rows(s, ds, a), _transfer_rows(s, ds, b)
    for rows in (rows_a, rows_b):
        if not isinstance(rows, list):
            return rows
    src_a, src_b = ({r["train"]: r["group_diffs"] for r in _source_rows(part, ds)}
                    for part in (rows_a, rows_b))
    both = [t for t in src_a if t in src_b and len(src_a[t]) == len(src_b[t])]
    if not both:
        return Verdict(NOT_TESTED, "no other Table 1 dataset was a source of both kinds",
                       method="none", needed="two or more Table 1 datasets in the transfer step")
    # (accuracy - 0.5) on both sides: their difference is kind a's minus kind b's accuracy
    return _mean_difference([[x - y for x, y in zip(src_a[t], src_b[t])] for t in both],
                            rows_a[0].get("n_test"))


def _table1_in_domain(c: Claim, s: dict, sweep: SweepResult):
    ds, kind = c.datasets[0], c.args[0]
    rows = _transfer_rows(s, ds, kind)
    if not isinstance(rows, list):
        return rows
    own = next((r["group_diffs"] for r in rows if r.get("train") == ds
                and r.get("group_diffs")), None)
    src = _sources(rows, ds)
    if own is None or not src:
        return Verdict(NOT_TESTED, "no in-domain probe or no other Table 1 source scored",
                       method="none", needed="the in-domain probe and another source")
    if any(len(d) != len(own) for d in src):
        return Verdict(NOT_TESTED, "the sources' test groups differ from the in-domain "
                       "probe's", method="none", needed="one held-out split of the dataset")
    # accuracy - 0.5 on both sides: their difference is transferred minus in-domain
    return _mean_difference([[a - b for a, b in zip(d, own)] for d in src],
                            rows[0].get("n_test"))


# ------------------------------------------------------------------ Appendix A

def per_layer(sweep: SweepResult) -> list[SweepRow]:
    """The layer sweep's per-layer accuracy rows of the kinds the layer claims read."""
    # the decoder blocks only: the papers' layers; the final norm's output (the sweep's last
    # read-out) is not one, and would be "the last layer" of Appendix A
    return [r for r in sweep.rows if r.layer >= 0 and r.metric == "accuracy"
            and r.kind in PROBES and r.hook.startswith("blocks.")]


def _profile(c: Claim, sweep: SweepResult, early_of, late_of=None, offset: float = 0.0
             ) -> ClaimTest | Verdict | None:
    """Mean over qualifying datasets of (``late_of(L)``'s layers' mean, by default those
    deeper than 50% depth) - (``early_of(L)``'s layers' mean), with the conservative interval
    of the module doc."""
    kind = c.args[0]
    rows = [r for r in per_layer(sweep) if r.kind == kind]
    if not rows:
        return None
    groups = {e.dataset: e.n_groups_test for e in sweep.entries if e.kind == kind}
    diffs, ses, n_groups, n_pairs, short = [], [], 0, 0, []
    for ds in c.datasets:
        by = {r.layer: r for r in rows if r.dataset == ds}
        if not by:
            continue
        n_layers = max(by) + 1
        mid = math.ceil(0.5 * n_layers) - 1                   # first layer at 50% depth
        late = late_of(n_layers, mid) if late_of else range(mid + 1, n_layers)
        early = early_of(n_layers, mid)
        need = [by.get(i) for i in (*late, *early)]
        k = groups.get(ds) or 0
        if not late or not early:          # too few layers for the two sides
            short.append(f"{ds} ({n_layers} layers)")
            continue
        if k < MIN_BOOTSTRAP_GROUPS or any(r is None or not r.ci_counts or not all(
                x is not None and math.isfinite(x) for x in (r.value, r.lo, r.hi))
                for r in need):
            short.append(f"{ds} ({k})")
            continue
        val = lambda ix: float(np.mean([by[i].value for i in ix]))  # noqa: E731
        se = lambda ix: float(np.mean([(by[i].hi - by[i].lo) / (2 * _Z) for i in ix]))  # noqa: E731
        diffs.append(val(late) - val(early))
        ses.append(se(late) + se(early))
        n_groups += k
        n_pairs += by[mid].n_test or 0
    if not diffs:
        return Verdict(NOT_TESTED, "no dataset's per-layer intervals rest on "
                       f"{MIN_BOOTSTRAP_GROUPS}+ test groups (test groups: "
                       f"{', '.join(short) or 'none'})", method="none",
                       needed=f"{MIN_BOOTSTRAP_GROUPS} test groups on a swept dataset")
    v = float(np.mean(diffs)) + offset
    half = _Z * math.sqrt(sum(x * x for x in ses)) / len(ses)
    fam = FAMILIES[c.family]
    t = claim_test(Difference(v, v - half, v + half, n_groups, n_pairs or None), fam.kind,
                   fam.delta)
    return replace(t, method=f"per-layer 95% intervals over {n_groups} test groups "
                   f"({len(diffs)} datasets), a difference's SE bounded by the sum of its "
                   f"sides' (conservative): 95% CI [{v - half:+.3f}, {v + half:+.3f}]; p by "
                   "its normal approximation") \
        if isinstance(t, ClaimTest) else t


def _plateau(c: Claim, s: dict, sweep: SweepResult):
    return _profile(c, sweep, lambda n, mid: (mid,))


def _jump(c: Claim, s: dict, sweep: SweepResult):
    return _profile(c, sweep, lambda n, mid: tuple(range(max(1, round(0.1 * n)))))


def _halves(c: Claim, s: dict, sweep: SweepResult):
    """Second half (deeper than 50% depth) minus first half (up to 50% depth)."""
    return _profile(c, sweep, lambda n, mid: tuple(range(mid + 1)))


def _last_layer(c: Claim, s: dict, sweep: SweepResult):
    """The last layer minus the other layers deeper than 50% depth, plus δ (non-inferiority:
    the family's rule)."""
    return _profile(c, sweep, lambda n, mid: tuple(range(mid + 1, n - 1)),
                    late_of=lambda n, mid: (n - 1,), offset=FAMILIES[c.family].delta)


def _cost_claim(c: Claim, s: dict, sweep: SweepResult):
    return Verdict(NOT_TESTED, "the run times its steps, not each method's inference on "
                   "matched hardware, and 'about the same' names no margin", method="design",
                   needed=c.needs)


def _pooled_gap(c: Claim, s: dict, sweep: SweepResult):
    """Kind minus the judge, averaged over the six datasets as a task's mean is."""
    side = _task_mean(_sweep_differences(sweep, *c.args), TEXT_QUALITY + COMMON_SENSE)
    return None if side is None else _pooled(*side)


def _needs_models(c: Claim, s: dict, sweep: SweepResult):
    return Verdict(NOT_TESTED, f"a claim across models: it needs {c.args[0]}, and a run "
                   "harvests one model", method="design", needed=c.args[0])


def _several_cells(c: Claim, s: dict, sweep: SweepResult):
    """Table 1's "in several cases at or above 0.95", read as 2 or more transferred cells
    (:data:`SEVERAL`, :func:`cells_at_level_test`); only once the kind shows skill in
    distribution on 2+ datasets (a level is compared after skill)."""
    kind, level = c.args[0], 0.95
    rows = [r for r in ((s.get("transfer") or {}).get("accuracy") or [])
            if r.get("kind") == kind and not r.get("refused") and r.get("value") is not None
            and {r.get("train"), r.get("test")} <= set(TABLE1_DATASETS.values())]
    cells = [r for r in rows if r["train"] != r["test"]]
    if not cells:
        return None
    skilled = [r["train"] for r in rows if r["train"] == r["test"]
               and beats_chance(r.get("lo"), n_groups=r.get("n_groups"))]
    if len(skilled) < SEVERAL:
        return Verdict(NOT_TESTED, f"{len(skilled)} dataset(s) where the {kind} probe beats "
                       f"chance in distribution (over 2+ test groups); a level of {level} is "
                       f"compared after skill on {SEVERAL}+", method="precondition",
                       needed=f"{SEVERAL}+ datasets with skill in distribution")
    fam = FAMILIES[c.family]
    return cells_at_level_test(cells, level, SEVERAL, kind=fam.kind, delta=fam.delta)


def cells_at_level_test(cells: list[dict], level: float, k: int, *, kind: str, delta: float
                        ) -> ClaimTest | Verdict:
    """"At least ``k`` of these cells reach ``level``": each cell's (a transfer accuracy
    row's) tests above and below the level on its group differences (accuracy minus chance,
    so within +-0.5), then :func:`~ppairs_lens.evaluation.verdicts.at_least_test`. Each
    side is the betting test (:func:`~ppairs_lens.evaluation.sign_flip.betting_p`), valid for
    any bounded differences: near a ceiling most groups sit at the bound, where the t-test
    the margin test takes with 20+ untied groups is liberal (false holds 8-16% at a nominal
    5% in a simulation of five cells at 0.95). The value is the mean of the groups'
    accuracies minus the level (what the tests test), not the pooled accuracy. The p's are
    doubled, as every "beats" claim's, to be read against the two-sided level."""
    tests = []      # each cell's one test holds both sides' p
    for r in cells:
        g = [x for x in r.get("group_diffs") or () if math.isfinite(x)]
        if len(g) < 2:
            tests.append(Verdict(NOT_TESTED, f"{r['train']} -> {r['test']}: no group "
                                 "differences", method="none",
                                 needed="group differences per cell"))
            continue
        p = {alt: min(1.0, 2 * betting_p(g, level - 0.5, alt, 0.5)) for alt in ("greater", "less")}
        best = {alt: min(1.0, 2 * betting_p(np.full(len(g), 0.5 if alt == "greater" else -0.5),
                                            level - 0.5, alt, 0.5))
                for alt in ("greater", "less")}
        tests.append(ClaimTest(kind, delta, p["greater"], p["less"], min(best.values()),
                               f"betting tests on {len(g)} group differences at {level}",
                               float(np.mean(g)) + 0.5 - level, float(np.std(g, ddof=1)),
                               len(g), r.get("n"), smallest_p_holds=best["greater"],
                               smallest_p_fails=best["less"]))
    return at_least_test(tests, tests, k)


# ------------------------------------------------------------------ Section 5.2: two tasks

def _mean_se(d: Difference) -> tuple[float, float] | None:
    """A dataset's mean difference and its SE (from its group differences, else from its
    interval over enough groups)."""
    g = [x for x in d.group_diffs or () if math.isfinite(x)]
    if len(g) >= 2:
        return float(np.mean(g)), float(np.std(g, ddof=1)) / math.sqrt(len(g))
    if None not in (d.value, d.lo, d.hi) and (d.n_groups or 0) >= MIN_BOOTSTRAP_GROUPS:
        return float(d.value), (float(d.hi) - float(d.lo)) / (2 * _Z)
    return None


def _groups(d: Difference) -> int:
    return int(d.n_groups or len(d.group_diffs or ()))


def _task_mean(per_ds: Mapping[str, Difference], task: tuple[str, ...]
               ) -> tuple[float, float, dict[str, int], int | None] | None:
    """``(mean, SE, groups by corpus, pairs)`` of ``task``'s datasets in ``per_ds`` that have a
    mean and SE (:func:`_mean_se`): a corpus's aspects averaged first (their SE bounded by the
    mean of theirs: they share articles, whose groups count once), corpora then averaged with
    SEs in quadrature; None where none has one."""
    corpora: dict[str, list[tuple[float, float]]] = {}
    groups: dict[str, int] = {}
    n = 0
    for ds in task:
        got = _mean_se(per_ds[ds]) if ds in per_ds else None
        if got is not None:
            corpus = ds.split("-")[0]
            corpora.setdefault(corpus, []).append(got)
            groups[corpus] = max(groups.get(corpus, 0), _groups(per_ds[ds]))
            n += int(per_ds[ds].n_pairs or 0)
    if not corpora:
        return None
    means = [float(np.mean([m for m, _ in v])) for v in corpora.values()]
    ses = [float(np.mean([e for _, e in v])) for v in corpora.values()]
    return float(np.mean(means)), math.sqrt(sum(e * e for e in ses)) / len(ses), groups, \
        n or None


def _pooled(v: float, se: float, groups: Mapping[str, int], n: int | None) -> Difference:
    """A mean over corpora (``groups``: each one's independent test groups) as the claim's
    difference, its interval said as what it is: a normal approximation from SEs in
    quadrature, its small components flagged."""
    parts = ", ".join(f"{corpus} {g}{'†' if g < MIN_BOOTSTRAP_GROUPS else ''}"
                      for corpus, g in groups.items())
    k = sum(groups.values())
    return Difference(v, v - _Z * se, v + _Z * se, k, n, interval=(
        f"normal approximation over {k} independent test groups ({parts}; † under "
        f"{MIN_BOOTSTRAP_GROUPS}): each corpus's SE from its group differences (its aspects "
        "averaged), corpora in quadrature"))

def _task_contrast(per_ds: Mapping[str, Difference], what: str) -> Difference | Verdict | None:
    """Text quality minus common sense (module doc) over the datasets with a difference."""
    sides = []
    for task in (TEXT_QUALITY, COMMON_SENSE):
        if not any(ds in per_ds for ds in task):
            return None                 # the step did not run on this task: not run
        side = _task_mean(per_ds, task)
        if side is None:
            return Verdict(
                NOT_TESTED, f"no {'text quality' if task is TEXT_QUALITY else 'common sense'} "
                f"dataset has {what} with 2+ group differences", method="none",
                needed="both tasks with 2+ test groups")
        sides.append(side)
    (a, sa, ka, na), (b, sb, kb, nb) = sides
    return _pooled(a - b, math.hypot(sa, sb), {**ka, **kb}, ((na or 0) + (nb or 0)) or None)


def _sweep_differences(sweep: SweepResult, kind: str, other: str) -> dict[str, Difference]:
    """Per swept dataset, ``kind`` minus ``other`` on the same test pairs (all of them)."""
    per = {}
    for e in sweep.entries:
        d = e.minus.get(other)
        if e.kind == kind and d and d.n == e.n_test:
            per[e.dataset] = d.difference()
    return per


def _gain_by_task(c: Claim, s: dict, sweep: SweepResult):
    return _task_contrast(_sweep_differences(sweep, "supervised", "probe:pca"),
                          "a supervised minus PCA difference")


def _finetuning_rows(s: dict) -> dict[tuple[str, str], list[float]]:
    return {(r["dataset"], r["method"]): list(r["minus_supervised_group_diffs"])
            for r in s.get("finetuning") or [] if r.get("minus_supervised_group_diffs")}


def _finetuning_pca(c: Claim, s: dict, sweep: SweepResult):
    ds, m = c.args
    rows = _finetuning_rows(s)
    pca, other = rows.get((ds, "pca")), rows.get((ds, m))
    if pca is None or other is None or len(pca) != len(other):
        return None
    # both minus the supervised probe on the same groups: their difference is PCA minus m
    g = tuple(a - b for a, b in zip(pca, other))
    return Difference(float(np.mean(g)), None, None, len(g), None, g)


def _finetuning_by_task(c: Claim, s: dict, sweep: SweepResult):
    m = c.args[0]
    per = {ds: Difference(None, n_groups=len(g), group_diffs=tuple(-x for x in g))
           for (ds, meth), g in _finetuning_rows(s).items() if meth == m}
    return _task_contrast(per, f"a supervised minus {m} difference")


# ------------------------------------------------------------------ Section 5.4

def _every_drop(c: Claim, s: dict, sweep: SweepResult):
    """Each method's drop averaged over the shifted sets, SE bounded by the mean of the sets'
    (they share the in-distribution pairs); intersection-union over the methods."""
    shift = s.get("shift") or {}
    drops = [d for d in shift.get("drops", []) if " - " not in d["method"]]
    if not drops:
        return None
    lo = {r["method"]: r.get("lo") for r in shift.get("rows", [])
          if r.get("role") == "in distribution"}
    at_chance = sorted({d["method"] for d in drops if not (lo.get(d["method"]) or 0) > 0.5})
    if at_chance:
        return Verdict(NOT_TESTED, f"{', '.join(at_chance)} at chance in distribution (95% CI "
                       "lower end <= 0.5): a drop is no loss", method="precondition",
                       needed="every method above chance in distribution")
    out = []
    for meth in dict.fromkeys(d["method"] for d in drops):
        rows = [d for d in drops if d["method"] == meth and None not in (d.get("lo"),
                                                                          d.get("hi"))]
        v = float(np.mean([d["drop"] for d in rows]))
        se = float(np.mean([(d["hi"] - d["lo"]) / (2 * _Z) for d in rows]))
        # the sets share the in-distribution pairs: the smallest set's groups, not their sum
        out.append(Difference(v, v - _Z * se, v + _Z * se,
                              min(int(d.get("n_groups") or 0) for d in rows)))
    return out


PAPER_READERS = {"table1_chance": _table1_chance, "table1_in_domain": _table1_in_domain,
                 "table1_kinds": _table1_kinds, "several_cells": _several_cells,
                 "plateau": _plateau, "jump": _jump, "halves": _halves,
                 "last_layer": _last_layer, "needs_models": _needs_models,
                 "gain_by_task": _gain_by_task, "finetuning_pca": _finetuning_pca,
                 "finetuning_by_task": _finetuning_by_task, "every_drop": _every_drop,
                 "cost_claim": _cost_claim, "pooled_gap": _pooled_gap}
