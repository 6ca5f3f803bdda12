"""The replication's ``summary.json`` and the report written from it (``REPORT.md``).

Every number here is read from the experiments' outputs (the values their CSVs in ``figures/``
hold); the claims, their families and the power table come from the claims registry.
``python -m analyses.replication.findings [figures] [REPORT.md]`` rewrites ``REPORT.md`` from
``figures/summary.json`` (``make demo`` does after the run);
``tests/test_replication_findings.py`` checks they agree.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ppairs_lens.evaluation.predictors import label
from ppairs_lens.evaluation.published import PUBLISHED, citation, published
from ppairs_lens.evaluation.bootstrap import MIN_BOOTSTRAP_GROUPS
from ppairs_lens.evaluation.verdicts import Outcome, beats_chance, interval_note
from ppairs_lens.io.atomic import atomic_write_text
from ppairs_lens.io.json_fields import read_json_object
from ppairs_lens.io.outputs import jsonable, run_environment

__all__ = ["PVP_COLUMNS", "f1_cell", "prediction_file", "replication_markdown",
           "replication_summary", "report_markdown", "unskilled_comparators", "update_report"]

#: The head of ``REPORT.md``: the file is generated whole, so an edit by hand would be lost.
REPORT_HEAD = ("# What the replication says about the model\n\n"
               "<!-- generated from figures/summary.json by python -m "
               "analyses.replication.findings (make demo); do not edit -->\n")


def _f(x, fmt: str = ".3f") -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, fmt)


def _ci(r: dict, fmt: str = ".3f") -> str:
    """A value and its 95% interval; a zero-width interval is no interval (one group, or
    every resample alike), an undefined value (a Spearman of constant scores) says so, and an
    interval over fewer than 20 groups is flagged (†)."""
    v = r.get("value", r.get("accuracy"))
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "undefined"
    lo, hi, k = r.get("lo"), r.get("hi"), r.get("n_groups")
    if lo is None or hi is None or (isinstance(lo, float) and math.isnan(lo)):
        return _f(v, fmt)
    note = interval_note(lo, hi, k)
    if note and not note.startswith("small sample"):
        return f"{_f(v, fmt)} ({note})"
    small = note or r.get("ci_counts") is False    # the row says its groups are too few
    return f"{_f(v, fmt)} [{_f(lo, fmt)}, {_f(hi, fmt)}]" + ("†" if small else "")


def _finetuning_table(rows: list[dict]) -> list[str]:
    if not rows:
        return []
    return ["| dataset | method | training labels | accuracy [95% CI] | wall s | trainable "
            "parameters | peak MB |", "|---|---|---|---|---|---|---|"] + [
        f"| {r['dataset']} | {r['method']} | {r['n_train']} | {_ci(r)} | "
        f"{_f(r.get('train_seconds'), '.1f')} | {r.get('trainable_params') or 0:,} | "
        f"{_f(r.get('peak_mb'), '.0f')} |" for r in rows]


def replication_summary(*, model: str, timings: dict, reused: list, cfg, datasets: dict,
                        judges: dict, sections: Mapping[str, Any],
                        environment: dict | None = None) -> dict:
    """The run's numbers: ``sections``, each step's record's data by its key in
    ``summary.json``; ``environment``: versions, threads and CPU, by default this process's.
    The main job adds the claims (``analyses.replication.claims.evaluate_claims``)."""
    return jsonable({
        # the built-ins' run (cfg.datasets named) has no published claim to report
        "kind": "replication" if getattr(cfg, "datasets", None) is None else "builtins",
        # what the numbers depend on: the run's own (a refresh keeps the run's, not its own)
        "model": model, "environment": environment or run_environment(), "timings_s": timings,
        "reused_steps": reused,
        "sizes": cfg.sizes, "test_size": cfg.settings.test_size,
        "split_by": cfg.settings.split_by, "n_boot": cfg.settings.n_boot,
        "seed": cfg.settings.seed, "quick": cfg.settings.quick, "datasets": datasets,
        "judges": judges, **sections,
        # the published numbers the tables print beside ours (thesis, paper, ClimateX paper)
        "published": [{**p.__dict__, "citation": citation(p)} for p in PUBLISHED]})


#: The comparators of the probes-vs-prompting table, fixed in advance (none chosen on test).
PVP_COLUMNS = tuple((k, label(k)) for k in ("zero_shot", "length", "memorisation", "lexical",
                                              "embedding"))


def _pvp_table(rows: list[dict]) -> list[str]:
    out = [f"| dataset | {label('supervised')} | {label('pca')} | "
           + " | ".join(name for _, name in PVP_COLUMNS)
           + " | length-balanced pairs: supervised / length |",
           "|---|---|---|" + "---|" * (len(PVP_COLUMNS) + 1)]
    for ds in dict.fromkeys(r["dataset"] for r in rows):
        get = {r["kind"]: r for r in rows if r["dataset"] == ds}
        n_test = get.get("supervised", {}).get("n")

        def cell(r):
            return "—" if r is None else _ci(r) + ("" if r["n"] == n_test else f" (n={r['n']})")
        sup, length = get.get("supervised", {}), get.get("length", {})
        bal = ("—" if sup.get("n_length_balanced") is None else
               f"{_f(sup.get('length_balanced_accuracy'))} / "
               f"{_f(length.get('length_balanced_accuracy'))} (n={sup['n_length_balanced']})")
        out.append(f"| {ds} (n={n_test or '?'}) | {cell(get.get('supervised'))} | "
                   f"{cell(get.get('pca'))} | "
                   + " | ".join(cell(get.get(k)) for k, _ in PVP_COLUMNS) + f" | {bal} |")
    return out


def _thesis_table(rows: list[dict], table: str) -> list[str]:
    """One row per (corpus, aspect): SummEval's and NEWSROOM's never share a cell."""
    def key(r):
        return r.get("dataset", "SummEval"), r["aspect"]
    ours = {(*key(r), r["method"]): r for r in rows
            if r.get("model") == "ours" and r["table"] == table}
    aspects = sorted({(d, a) for d, a, _ in ours})
    pub = {(*key(r), r["method"], r["model"]): r["value"] for r in rows
           if r.get("model") != "ours" and r["table"] == table}
    models = sorted({m for (_, _, meth, m) in pub if meth == "PPAIRS"})  # a PPAIRS row each
    head = "| corpus | aspect | " + " | ".join(f"{m} (ours)" for m in ("direct", "G-Eval",
                                                                          "PAIRS", "PPAIRS"))
    head += " | " + " | ".join(f"PPAIRS {m}" for m in models) + " |"
    out = [head, "|" + "---|" * (6 + len(models))]
    for d, a in aspects:
        cells = [(_ci(ours[(d, a, m)], ".2f") + (f" (n={ours[(d, a, m)]['n']})"
                                                  if table == "4.2" else ""))
                 if (d, a, m) in ours else "—" for m in ("direct", "G-Eval", "PAIRS", "PPAIRS")]
        cells += [_f(pub.get((d, a, "PPAIRS", m)), ".2f") for m in models]
        out.append(f"| {d} | {a} | " + " | ".join(cells) + " |")
    return out


#: Our dataset names -> the paper's (Table 1 rows and columns).
PAPER_NAMES = {"summeval-coherence": "SummEval", "newsroom-coherence": "NEWSROOM",
               "hanna-coherence": "HANNA", "rocstories": "ROCStories", "mctaco": "MCTACO",
               "caters": "CaTeRS"}


def f1_cell(row: dict | None) -> str:
    """Our F1 in a cell of Table 1: n/a where its interval has no width (one test group, or
    every resample alike), † where it rests on fewer than 20 groups."""
    if row is None or row.get("value") is None:
        return "—"
    note = interval_note(row.get("lo"), row.get("hi"), row.get("n_groups"))
    if note and not note.startswith("small sample"):
        return "n/a"
    return f"{row['value']:.2f}" + ("†" if note or not row.get("ci_counts") else "")


def _transfer_table(transfer: dict | None) -> list[str]:
    """Paper Table 1 beside ours: F1 of a probe trained on a column's dataset and scored on a
    row's."""
    rows = (transfer or {}).get("f1", [])
    ours = {(r["test"], r["train"], r["kind"]): r for r in rows}
    names = [n for n in PAPER_NAMES if any(k[0] == n for k in ours)]
    if len(names) < 2:
        return []
    pub = {(p.dataset, p.train_dataset, p.method): p.value
           for p in published(source="paper", table="Table 1")}
    out = ["| eval \\ train | " + " | ".join(PAPER_NAMES[n] for n in names) + " |",
           "|---|" + "---|" * len(names)]
    for te in names:
        cells = []
        for tr in names:
            o = "/".join(f1_cell(ours.get((te, tr, k))) for k in ("supervised", "pca"))
            q = "/".join(_f(pub.get((PAPER_NAMES[te], PAPER_NAMES[tr], m)), ".2f")
                         for m in ("supervised", "unsupervised"))
            cells.append(f"{o} ({q})" if te != tr else f"{o} (in distribution)")
        out.append(f"| {PAPER_NAMES[te]} | " + " | ".join(cells) + " |")
    return out


def _ablation_lines(ablation: list[dict]) -> list[str]:
    """Paper Table 2 (ΔF1 of the judge, published) beside our ΔF1 (macro), the same
    statistic, with the share of pairs the judge answered alike in both orders."""
    pub = "; ".join(f"{p.model} {p.method} {p.value:+.2f}"
                    for p in published(source="paper", table="Table 2"))
    ours = [r for r in ablation if r.get("kind") == "probe"]
    if not ours:
        return []
    pre = next((r.get("preset") for r in ours), None)
    items = "; ".join(f"{r['condition']} ΔF1 " + _ci({
        "value": r.get("delta_f1"), "lo": r.get("delta_f1_lo"), "hi": r.get("delta_f1_hi"),
        "n_groups": r.get("n_groups")}, "+.3f") for r in ours if r.get("preset") == pre)
    same = next((r.get("same_answer_share") for r in ablation
                 if r.get("kind") == "baseline"), None)
    judge = ("" if same is None else f" The unablated judge gives the same raw answer in "
             f"both orders on {same:.0%} of the pairs, so a change in its F1 means little.")
    return [f"**Paper Table 2** (removing the probe direction while the model judges "
            f"MT-Bench): ours {items}. Published ΔF1: {pub}.{judge}", ""]


def _steering_lines(rows: list[dict]) -> list[str]:
    probes = {r["condition"]: r for r in rows or [] if r.get("kind") == "probe"}
    if not probes:
        return []
    items = "; ".join(f"{c} slope {_f(r.get('slope'), '+.3f')} log-odds per unit "
                      f"(p vs random {_f(r.get('p_slope_random'))}, vs matched "
                      f"{_f(r.get('p_slope_matched'))})" for c, r in probes.items())
    first = next(iter(probes.values()))
    alphas = sorted({float(r["alpha"]) for r in rows if r.get("kind") == "probe"})
    n = first.get("n")
    small = "†" if n is not None and n < MIN_BOOTSTRAP_GROUPS else ""
    return [f"**Steering** (adding alpha x the unit probe direction at its read-out, "
            f"{first.get('dataset')}, on {n}{small} held-out pairs at alpha "
            f"{', '.join(f'{a:+g}' for a in alphas)}; the judge's calibrated log-odds per unit "
            f"of alpha, against random and variance-matched directions at the same norms; "
            f"each p is one direction's permutation p among its nulls, before the claim's "
            f"Bonferroni over the directions): {items}.", ""]


def _published_accuracy(row: dict) -> float | None:
    """The ClimateX paper's accuracy of the model a published-paired row is set against."""
    return next((p.value for p in published(source="climatex", dataset="ClimateX",
                                            metric="accuracy")
                 if f"{p.model} {p.method}" == row.get("versus")), None)


def prediction_file(row: dict) -> str:
    """A published prediction file's accuracy (an unparsed answer wrong), and over the
    statements it parsed beside its table's, flagged where the two differ by more than 0.01."""
    parsed = row["n"] - row["n_unparsed"]
    if not parsed:
        return f"{row['versus']}: no statement parsed"
    own = row["theirs_accuracy"] * row["n"] / parsed
    table = _published_accuracy(row)
    flag = ("" if table is None or abs(own - table) <= 0.01
            else f", **not the table's {table:.3f}**")
    return (f"{row['versus']} {row['theirs_accuracy']:.3f} ({row['n_unparsed']} unparsed; "
            f"{own:.3f} of the {parsed} parsed{flag})")


def _insertion_lines(rows: list[dict]) -> list[str]:
    overall = [r for r in rows if r.get("level") == "overall"]
    if not overall:
        return []
    ours = "; ".join(f"{r['label']} {_ci(r)}" for r in overall)
    pub = "; ".join(f"{p.model} {p.method} {p.value:.3f}" for p in
                    published(source="climatex", dataset="ClimateX", metric="accuracy"))
    th = "; ".join(f"{p.setting} {p.value:.2f}" for p in
                   published(source="thesis", table="Table 4.4", metric="accuracy"))
    n = overall[0].get("n")
    pair = "; ".join(f"{r['label']} {_ci(r)} over {r['n']} disjoint pairs" for r in rows
                     if r.get("level") == "pairwise held-out")
    pair = (f" Skill first, pairwise accuracy on held-out pairs of test statements: {pair} "
            "(the thesis's Llama-3-8B-Instruct probe: 0.727, on its own AR3-AR6 claims)."
            if pair else "")
    pc1 = next((r for r in rows if r.get("level") == "direction vs PC1"), None)
    pair += (f" The probe's direction against PC1 of its {pc1['n']} training differences: "
             f"|cos| {pc1['abs_cos']:.3f}, a value without an interval (a refitted "
             "direction's cosine is biased at this size; the thesis shows the alignment as "
             "a picture, Appendix C.5)." if pc1 else "")
    files = [r for r in rows if r.get("level") == "published paired"]
    files = "; ".join(prediction_file(r) for r in files)
    files = (f" The paired differences use the paper's own prediction files on the same "
             f"statements, an unparsed answer counted wrong: {files}. A file whose accuracy "
             "over the statements it parsed is more than 0.01 from its table's is not the run "
             "the table reports, and its pairing stands for that file only." if files else "")
    return [f"**Thesis Table 4.4 / ClimateX** ({n} test statements in the split's level "
            f"proportions): ours {ours}.{pair} Published (ClimateX paper Table 4, test split "
            f"of 300; GPT-3.5's accuracies over the 295 statements it answered with a level, "
            f"Cohere few-shot's over 297): {pub}.{files} Thesis PPAIRS_INSERT "
            f"(Llama-3-8B-Instruct) by cycle: {th}. Our search "
            "compares with k references a step (the preset's; the thesis 10) and stops at "
            "the leaf; the thesis's Algorithm 1 also stops where a step ties.", ""]


def replication_markdown(s: dict) -> str:
    t = s["timings_s"]
    lines = [*s.get("verdicts_available", []), "", *_controls_lines(s),
             f"Measured on **{s['model']}** by `make demo` (held-out half of each dataset, "
             f"split `{s['split_by']}`, {s['n_boot']} bootstrap resamples over leak groups); "
             f"sizes: {', '.join(f'{k} {v}' for k, v in s['datasets'].items())} comparisons. "
             f"Published numbers come from other models (named beside each): compare shape, "
             "not level; † marks an interval over fewer than 20 groups.", ""]
    if s.get("thesis_tables"):
        lines += ["**Thesis Table 4.1** (SummEval and NEWSROOM pairwise accuracy, 95% CI; "
                  "published PPAIRS beside, from probes trained on 100 summaries' 9,900 "
                  "comparisons, ours on a few dozen pairs; NEWSROOM's held-out half here is "
                  "one article; NEWSROOM's CON column, which the thesis's Section 4.1.1 calls "
                  "consistency, stands beside our informativeness, as NEWSROOM rates no "
                  "consistency and the PPairS authors' code scores informativeness):", "",
                  *_thesis_table(s["thesis_tables"], "4.1"), "",
                  "**Thesis Table 4.2** (mean Spearman after sorting each held-out article; n = "
                  "articles with 3 or more untied summaries; the thesis does not say how many "
                  "summaries an article sorts (SummEval's file has 16), ours sort "
                  f"{(s.get('sizes') or {}).get('summeval_items', '?')} SummEval summaries, "
                  "and its probe was trained on 100 summaries' comparisons: a different "
                  "design, shown for shape only):",
                  "", *_thesis_table(s["thesis_tables"], "4.2"), ""]
    if s.get("probes_vs_prompting"):
        lines += ["**Paper Figures 1-3** (held-out accuracy, 95% CI, † over fewer than 20 "
                  "groups; the paper reports F1, we report and decide on accuracy; read-outs "
                  "chosen on "
                  "validation; the comparators fixed in advance, none chosen on test pairs; every "
                  "judge form's own row, ALLURE on a subset included, is in "
                  "`figures/probes_vs_prompting.csv`; length-balanced: accuracy on the test "
                  "pairs whose items are within 10% of each other's length, where 30+):", "",
                  *_pvp_table(s["probes_vs_prompting"]), ""]
    t1 = _transfer_table(s.get("transfer"))
    if t1:
        lines += ["**Paper Table 1** (F1 of probes trained on a column's dataset and scored on "
                  "a row's, supervised/unsupervised; ours, then the paper's Llama 3.1 70B in "
                  "brackets; † ours over fewer than 20 test groups; n/a where its interval "
                  "has no width: one test group, as NEWSROOM's held-out half is one article "
                  "here, or an F1 every resample gives alike; the paper's test sets are "
                  "whole datasets):", "", *t1, ""]
    ft = _finetuning_table(s.get("finetuning") or [])
    if ft:
        lines += ["**Paper Section 5.2** (probes against LoRA, rank 64, alpha 64, all linear "
                  "modules, one epoch, and full finetuning, on the same training comparisons "
                  "and test pairs; cost = training wall time, trainable parameters, peak "
                  "memory; the probe's cost is harvest + fit; the label curve is in "
                  "`figures/finetuning_curve.csv`):", "", *ft, ""]
    lines += _ablation_lines(s.get("ablation") or [])
    lines += _steering_lines(s.get("steering") or [])
    lines += _insertion_lines(s.get("insertion") or [])
    lines += _claims_lines(s)
    lines += ["", "Step times (s): " + ", ".join(f"{k} {v:.0f}" for k, v in t.items())
              + f"; total {sum(t.values()):.0f} s."]
    return "\n".join(lines)


def _cell(text: str) -> str:
    """Text inside a Markdown table cell (a "|" would end the cell)."""
    return str(text).replace("|", "\\|")


def _claim_table(rows: list[dict]) -> list[str]:
    out = ["| claim | source | statement | made for | ours [95% CI] | test | verdict |",
           "|---|---|---|---|---|---|---|"]
    for c in rows:
        if c.get("value") is None:
            ours = "—"
        else:
            note = c.get("interval_note")
            ci = ("" if c.get("lo") is None or c.get("hi") is None else
                  f" ({note})" if note and not note.startswith("small sample") else
                  f" [{_f(c['lo'], '+.3f')}, {_f(c['hi'], '+.3f')}]" + ("†" if note else ""))
            if c.get("pooled_value") is not None:   # tested on the mean of group differences
                ours = (f"{_f(c['value'], '+.3f')} (mean of group differences, tested); "
                        f"pooled {_f(c['pooled_value'], '+.3f')}{ci}")
            else:
                ours = f"{_f(c['value'], '+.3f')}{ci}"
        need = f" (would need {c['needed']})" if c.get("needed") else ""
        out.append(f"| {c['id']} | {_cell(c['source'])} | {_cell(c['statement'])} | "
                   f"{_cell(c.get('scope') or '—')} | {ours} | "
                   f"{_cell(c.get('method') or '—')} | **{c['outcome']}**: "
                   f"{_cell(c['reason'] + need)} |")
    return out


def _counts(rows: list[dict]) -> str:
    n = {str(o): sum(r["outcome"] == str(o) for r in rows) for o in Outcome}
    return f"{len(rows)} claims: " + ", ".join(f"{v} {k}" for k, v in n.items() if v)


def _controls_lines(s: dict) -> list[str]:
    """The controls with known answers, before any result: each verdict shown able to hold
    and to fail on a task the model solves."""
    controls = [c for c in s.get("claims") or [] if "expected" in c]
    if not controls:
        return []
    out = ["**Controls with known answers** (a built-in the embedded model solves; the same "
           "rules as every claim; they show that each verdict can hold and can fail):", "",
           "| control | ours [95% CI] | test | expected | verdict | as expected |",
           "|---|---|---|---|---|---|"]
    out += [f"| {_cell(c['statement'])} | {_ci(c, '+.3f')} | {_cell(c.get('method') or '—')} "
            f"| {' or '.join(c['expected'])} | **{c['outcome']}** | "
            f"{'yes' if c['as_expected'] else '**no**'} |" for c in controls]
    return out + [""]


def _comparator_level(s: dict, dataset: str, method: str) -> dict | None:
    """The comparator's own held-out accuracy on ``dataset``: its thesis Table 4.1 cell
    (direct, G-Eval, PAIRS) or its probes-vs-prompting row (a judge form or a baseline)."""
    corpus, _, aspect = dataset.partition("-")
    for r in s.get("thesis_tables") or []:
        if (r.get("model") == "ours" and r.get("table") == "4.1" and r.get("method") == method
                and str(r.get("dataset", "")).lower() == corpus and r.get("aspect") == aspect):
            return r
    return next((r for r in s.get("probes_vs_prompting") or []
                 if r.get("dataset") == dataset and r.get("kind") == method), None)


def unskilled_comparators(s: dict, ours: list[dict]) -> list[str]:
    """A win of ours over a comparator whose own accuracy CI reaches chance, said as such."""
    said = []
    for c in ours:
        if c.get("outcome") not in ("holds", "beats, by less than δ"):
            continue
        ds, _, other, _ = (list(c.get("comparison") or []) + [None] * 4)[:4]
        r = _comparator_level(s, str(ds), str(other)) if ds and other else None
        lo = (r or {}).get("lo")
        if r is not None and lo is not None and not beats_chance(lo):
            value = r.get("value", r.get("accuracy"))
            said.append(f"{c['id']}: {other} itself scores {_f(value, '.2f')} "
                        f"[{_f(lo, '.2f')}, {_f(r.get('hi'), '.2f')}] on these pairs, an "
                        "interval that reaches chance: the probe beats a comparator no better "
                        "than chance, which says nothing of a working judge")
    return ["", "Wins over comparators without skill: " + "; ".join(said) + "."] if said else []


def _claims_lines(s: dict) -> list[str]:
    """The families, each claim's verdict (the seeds', then ours apart), the power table."""
    if not s.get("claims"):
        return ["No claims were decided (this summary has no claims registry output)."]
    seeds = [c for c in s["claims"] if not c.get("ours")]
    ours = [c for c in s["claims"] if c.get("ours") and "expected" not in c]
    out = ["**Families** (Holm within each, over the claims this run could decide; p-values "
           "from the recorded group differences: the sign-flip test at 0, at a margin a "
           "t-test with 20+ untied groups or else a betting test valid for bounded "
           "differences; where only an interval is recorded, its normal approximation over "
           "20+ groups; each row says which):", "",
           "| family | ours | rule | δ | why this δ | claims |", "|---|---|---|---|---|---|"]
    out += [f"| {f['name']} | {'yes' if f.get('ours') else '—'} | {f['kind']} | "
            f"{_f(f.get('delta'), 'g')} | {f['why']} | {f['claims']} |" for f in s["families"]]
    out += ["", "**The seeds' claims** (each once, cited to its place; ours = the statistic "
            "with its 95% CI, † over fewer than 20 groups; `figures/summary.json` holds each "
            "one's numbers):", "", *_claim_table(seeds), "", _counts(seeds) + ".", "",
            "**Our own questions** (not the seeds'; decided on this run's model):", "",
            *_claim_table(ours), "", _counts(ours) + ".", *unskilled_comparators(s, ours)]
    out += ["", "**Power** (groups and pairs this run had, and those that would decide the "
            "claim with 80% power at Holm's strictest threshold for its family (5% / m), "
            "planned at the claim's margin δ with the observed group-level SD; — where "
            "nothing was measured or the test counts null draws):",
            "", "| claim | verdict | pairs | groups | groups to decide | pairs to decide | "
            "a test needs |", "|---|---|---|---|---|---|---|"]
    return out + [f"| {p['id']} | {p['outcome']} | {p.get('n_pairs') or '—'} | "
                  f"{p.get('n_groups') or '—'} | {p.get('groups_to_decide') or '—'} | "
                  f"{p.get('pairs_to_decide') or '—'} | {p.get('needed') or '—'} |"
                  for p in s["power"]]


def report_markdown(s: dict) -> str:
    """``REPORT.md`` in full, from a replication's ``summary.json``."""
    return f"{REPORT_HEAD}\n{replication_markdown(s)}\n"


def update_report(figures: str | Path = "figures", report: str | Path = "REPORT.md"
                  ) -> str | None:
    """Write ``report`` from ``figures/summary.json``; None (the report left as it is) where
    the summary is the main job's on the built-ins, which has no replication to report."""
    s = read_json_object(Path(figures) / "summary.json")
    if s.get("kind") != "replication":
        print(f"{figures}/summary.json is not a replication summary: {report} left as it is")
        return None
    text = report_markdown(s)
    atomic_write_text(Path(report), text)
    return text


if __name__ == "__main__":
    update_report(*sys.argv[1:3])
