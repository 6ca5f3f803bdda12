"""Probes against prompting and against baselines that could win (paper Figures 1, 2, 3).

Read off the layer sweep's summary (same held-out pairs, paired, 95% CIs over leak groups):
per dataset the probes at their validation read-outs, the prompted judge in each fair form and
ALLURE, and the no-model baselines. Each probe is compared with comparators fixed before any
test pair is read, never the best on the test pairs: the judge in the paper's form and every
baseline ("beats the strongest baseline" is "beats every one"). The verdicts come from the
claims registry (``analyses/replication/claims.py``). Writes ``probes_vs_prompting.csv``,
``probes_vs_prompting_claims.csv`` and ``probes_vs_prompting.{png,svg}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from analyses.probes_vs_prompting_plots import plot_pvp
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.evaluation.predictors import BASELINE_NAMES, JUDGE_NAMES, label
from ppairs_lens.evaluation.published import citation, published
from ppairs_lens.io.outputs import save_config, save_figure, write_csv
from ppairs_lens.io.records import ABSENT, Absent, StepRows

__all__ = ["BASELINES", "PvPRow", "PvPRows", "COMPARISONS", "JUDGE_FORMS", "PROBES", "PvPConfig",
           "dataset_rows", "run_probes_vs_prompting"]

#: Each predictor's name, from the predictors' one list.
PROBES = {k: label(k) for k in ("supervised", "pca", "mass_mean")}
JUDGE_FORMS = {k: label(k) for k in JUDGE_NAMES}
BASELINES = {k: label(k) for k in BASELINE_NAMES}
#: Each probe's comparisons, fixed in advance: the paper's judge form and every baseline;
#: the supervised probe also against the unsupervised one (paper Figure 3).
COMPARISONS: dict[str, tuple[str, ...]] = {
    "supervised": ("zero_shot", *BASELINES, "probe:pca"),
    "pca": ("zero_shot", *BASELINES)}


@dataclass
class PvPConfig:
    datasets: list[str] = field(default_factory=list)
    settings: EvalSettings = EvalSettings()  # n_boot and seed of the paired intervals


def _balanced(entry, name: str) -> dict:
    """Accuracy on the length-balanced test pairs (items within 10% of each other's length),
    where the sweep found 30 or more of them."""
    lb = entry.length_balanced if entry is not None else None
    acc = None if lb is None else lb.accuracy.get(name)
    return {} if acc is None else {"length_balanced_accuracy": acc, "n_length_balanced": lb.n}


def dataset_rows(sweep, dataset: str, judge: dict | None = None
                 ) -> tuple[list[PvPRow], list[dict]]:
    """(method rows, claim rows) of one dataset of ``sweep`` (a ``SweepResult``); ``judge``:
    its prompted judge's record (whose diagnostics say whether it decides at all), if any."""
    share = ({"same_raw_answer_share": judge["diagnostics"].get("same_raw_answer_share")}
             if judge is not None else {})
    entries = {e.kind: e for e in sweep.entries if e.dataset == dataset}
    others = sweep.others(dataset)
    rows = []
    for kind, e in entries.items():
        t = e.test
        rows.append(PvPRow(dataset=dataset, method=PROBES.get(kind, kind), kind=kind,
                           family="probe", accuracy=t.value, lo=t.lo, hi=t.hi,
                           ci_counts=t.ci_counts, read_out=e.layer,
                           selected_by=e.selected_by, n=e.n_test, auroc=None, f1=None,
                           **_balanced(e, "probe")))
    for (kind, metric), r in others.items():
        if metric != "accuracy":
            continue
        family = "judge" if kind in JUDGE_FORMS else "baseline"
        auroc, f1 = others.get((kind, "auroc")), others.get((kind, "f1"))
        rows.append(PvPRow(
            dataset=dataset, method={**JUDGE_FORMS, **BASELINES}.get(kind, kind), kind=kind,
            family=family, accuracy=r.value, lo=r.lo, hi=r.hi,
            ci_counts=r.ci_counts, read_out=None, selected_by=r.predictor,
            n=r.n_test, auroc=auroc and auroc.value, f1=f1 and f1.value,
            **_balanced(next(iter(entries.values()), None), kind),
            **(share if family == "judge" else {})))
    claims = []
    for kind, e in entries.items():
        for other in COMPARISONS.get(kind, ()):
            d = e.minus.get(other)
            if d is None or d.n != e.n_test:    # a judge run on a subset: its row only
                continue
            claims.append({"dataset": dataset, "probe": PROBES.get(kind, kind),
                           "against": {**JUDGE_FORMS, **BASELINES,
                                       "probe:pca": PROBES["pca"]}[other],
                           "probe_value": d.a, "other_value": d.b,
                           "difference": d.value, "lo": d.lo, "hi": d.hi,
                           "n": d.n, "n_groups": d.n_groups})
    return rows, claims


def published_context() -> list[dict]:
    """The paper's statements these rows answer (Figures 1-3 give no exact table)."""
    return [{"source": citation(p), "dataset": p.dataset, "method": p.method,
             "value": p.value, "note": p.note}
            for p in published(source="paper") if p.table.startswith("Figure")]


@dataclass(frozen=True, kw_only=True)
class PvPRow:
    """A probe, a prompted judge or a baseline on one dataset's held-out pairs."""

    dataset: str
    method: str
    kind: str
    family: str  # "probe", "judge" or "baseline"
    accuracy: float
    lo: float
    hi: float
    ci_counts: bool | None
    read_out: int | None
    selected_by: str | None
    n: int
    auroc: float | None
    f1: float | None
    length_balanced_accuracy: float | Absent = ABSENT  # where the sweep balanced 30+ pairs
    n_length_balanced: int | Absent = ABSENT
    same_raw_answer_share: float | None | Absent = ABSENT  # a judge's: does it decide at all?


@dataclass(frozen=True)
class PvPRows(StepRows):
    rows: tuple[PvPRow, ...] = ()


def run_probes_vs_prompting(sweep, judges: dict[str, dict], out,
                            cfg: PvPConfig) -> PvPRows:
    """Tables and figure from ``sweep``; ``judges``: each dataset's judge record."""
    rows, claims = [], []
    for name in cfg.datasets:
        r, c = dataset_rows(sweep, name, judges.get(name))
        rows += r
        claims += c
    result = PvPRows(rows=tuple(rows))
    write_csv(f"{out}/probes_vs_prompting.csv", result.table())
    write_csv(f"{out}/probes_vs_prompting_claims.csv", claims)
    save_config(out, "probes_vs_prompting", cfg)
    save_figure(plot_pvp(result.rows, published_context()), out, "probes_vs_prompting",
                preview=cfg.settings.quick)
    return result
