"""The main job: the seed experiments of the thesis and the paper on their own data.

With ``../shared/datasets`` (or ``--shared-data``) present, ``ppairs-lens run`` (what ``make
demo`` runs) does, on one model:

1. harvest every dataset (SummEval and NEWSROOM x their aspects, HANNA, ROCStories, MC-TACO,
   MT-Bench, LLMBar Natural + Normal and its Adversarial subsets, ``--extra`` files);
2. the prompted judges on every held-out pair, in every fair form, and ALLURE;
3. the no-model baselines fitted on train (length, memorisation, lexical, input embeddings);
4. the layer sweep (paper Appendix A), every probe kind at every read-out beside them;
5. probes against prompting and baselines (paper Figures 1, 2, 3): ``probes_vs_prompting``;
6. thesis Tables 4.1 and 4.2 on SummEval and NEWSROOM: ``thesis_tables``;
7. transfer and cosine similarity (paper Table 1, Figure 5);
8. LLMBar distribution shift (paper Figure 4: trained on Natural + Normal, tested on each
   Adversarial subset); probes against LoRA and full finetuning (paper Section 5.2);
9. ablation of the probe directions on MT-Bench (paper Table 2), and steering along them;
10. ClimateX insertion (thesis Table 4.4 and the ClimateX paper);

then ``summary.json``, from which ``REPORT.md`` is written (:mod:`analyses.replication_findings`),
the published numbers beside ours; sizes: :class:`ReplicationSizes` (``--quick`` / ``--full``).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from tqdm.auto import tqdm

from analyses.ablation import AblationConfig, run_ablation
from analyses.cross_dataset import TransferConfig, run_transfer
from analyses.distribution_shift import ShiftConfig, run_shift
from analyses.finetuning import FinetuningConfig, run_finetuning
from analyses.insertion import InsertionConfig, run_insertion
from analyses.layer_sweep import SweepConfig, pair_scores, run_sweep_with_summary
from analyses.probes_vs_prompting import PvPConfig, run_probes_vs_prompting
from analyses.steering import SteeringConfig, run_steering
from analyses.claims import evaluate_claims, per_layer
from analyses.replication_findings import replication_summary, replication_markdown
from analyses.thesis_tables import ThesisTablesConfig, run_thesis_tables
from ppairs_lens.activations.pipeline import ensure_stores
from ppairs_lens.data.records import Dataset
from ppairs_lens.data.replication_sets import (
    ReplicationSizes,
    comparison_names,
    replication_datasets,
    shifted_names,
    summeval_names,
)
from ppairs_lens.data.specs import load_dataset_spec
from ppairs_lens.errors import DataError
from ppairs_lens.evaluation.protocol import PAPER_TEST_SIZE, EvalSettings
from ppairs_lens.evaluation.store_split import store_fits
from ppairs_lens.evaluation.text_baselines import HeldOutTextBaselines, held_out_text_baselines
from ppairs_lens.io.json_fields import read_json_object
from ppairs_lens.io.outputs import save_config, write_json
from ppairs_lens.io.study_runner import StudyRunner
from ppairs_lens.judges.allure import AllureConfig
from ppairs_lens.judges.held_out import held_out_datasets
from ppairs_lens.judges.held_out_scores import HeldOutScores, score_held_out
from ppairs_lens.judges.study import HeldOutJudges, JudgeStudySettings, judge_study
from ppairs_lens.models.loading import load_model, model_name
from ppairs_lens.models.spec import ModelSpec
from ppairs_lens.probes.estimators import ALL_PROBE_KINDS

__all__ = ["ReplicationConfig", "refresh", "run_replication"]
STEPS = 15


@dataclass
class ReplicationConfig:
    """The replication; saved as ``replication.config.json`` beside the outputs."""

    model: ModelSpec = ModelSpec()  # default: embedded SmolLM2 on the CPU; a name also loads
    shared_data: str = "../shared/datasets"
    extra: list[str] = field(default_factory=list)  # further files (Figure 2 and transfer)
    out: str = "figures"
    stores: str = "stores"
    sizes: ReplicationSizes = ReplicationSizes()
    # One protocol, the same object in every step; the paper fits and tests on random halves.
    settings: EvalSettings = EvalSettings(test_size=PAPER_TEST_SIZE)
    judge_train_pairs: int = 6  # training comparisons that fit the judge's threshold
    # ALLURE's pool costs nothing (its zero-shot answers are the training sample's); its
    # held-out pairs are asked again after the demonstrations (a form scored on a subset:
    # shown, never the best form a claim is tested against)
    allure: AllureConfig | None = AllureConfig(pool=6, test_pairs=4)
    # Transfer and cosines: all four kinds; CCS (gradient descent, too slow to validate at every
    # read-out) is fitted at the cosine read-out only (readout_choice.add_kinds_at)
    transfer_kinds: tuple[str, ...] = ALL_PROBE_KINDS
    ablation_dataset: str = "mt-bench"
    # 60 + 60 nulls: the smallest p, 1/61, still below Holm's 0.05/3 for three directions
    ablation_random: int = 60
    ablation_matched: int = 60
    ablation_eval_pairs: int = 20
    # Probes against LoRA and full finetuning on the same labels (paper Section 5.2): short
    # prompts, as a training example costs ~3-6 CPU-seconds here
    finetune_datasets: tuple[str, ...] = ("rocstories", "mctaco")
    finetune_train: int = 8
    finetune_test: int = 20
    # the label curve is one training run per method through nested label sets (a point per
    # block): LoRA to 16 labels; full finetuning, whose steps cost more, to 8
    finetune_curve: tuple[int, ...] = (4, 8, 16)
    finetune_curve_full: tuple[int, ...] | None = None  # full finetuning's curve: --full only
    steering_nulls: int = 10  # random and variance-matched directions each
    steering_eval_pairs: int = 6
    steering_alphas: tuple[float, ...] = (-1.0, -0.5, 0.5, 1.0)  # x the read-out's norm
    climatex_test: int = 24  # of the 300-statement test split, in its level proportions
    climatex_k: int = 4  # references per binary-search step
    climatex_train: int = 60  # labelled training statements (balanced over the levels)
    climatex_train_pairs: int = 120
    climatex_methods: tuple[str, ...] = ("probe",)  # ("probe", "zero_shot"): twice the time

    def __post_init__(self):
        self.model = ModelSpec.coerce(self.model)


def quick(cfg: ReplicationConfig) -> ReplicationConfig:
    """A preview in under 3 minutes (and what the tests run). Every step runs; the model's
    passes over long prompts are what a preview costs, so the judges' thresholds are fitted on 3
    training comparisons, ALLURE adds one demonstration, MT-Bench's ablation and steering ask
    2 pairs (4 + 4 and 2 + 2 null directions), finetuning is scored on 4 pairs, ClimateX's
    probe trains on 16 comparisons and places 4 statements, and figures are PNG only. At
    these sizes few claims have the groups a test needs: most verdicts are "not tested at
    this size"."""
    return replace(cfg, sizes=ReplicationSizes.quick(), settings=cfg.settings.as_quick(),
                   judge_train_pairs=3,
                   allure=AllureConfig(rounds=1, per_round=1, pool=4, test_pairs=2),
                   ablation_random=4, ablation_matched=4, ablation_eval_pairs=2,
                   steering_nulls=2, steering_eval_pairs=2, steering_alphas=(-1.0, 1.0),
                   finetune_datasets=("rocstories",),
                   finetune_train=4, finetune_test=4, finetune_curve=(4,),
                   finetune_curve_full=None,
                   climatex_test=4, climatex_k=2, climatex_train=16, climatex_train_pairs=16)


#: Nulls per kind for Holm over three directions at 0.05: the smallest permutation p,
#: 1 / (K + 1), must be below 0.05 / 3, so K >= 60; 100 leaves room for a test that is not first
HOLM_NULLS = 100


def full(cfg: ReplicationConfig) -> ReplicationConfig:
    """The papers' groups on a GPU, sized to decide and to end inside one 9-minute call.

    Sizes follow what a verdict needs, not every pair the files hold: ALLURE (a form shown,
    never a claim's comparator) runs two rounds on 100 pool and 100 held-out pairs a
    dataset; the ablation judges all 100 MT-Bench held-out pairs under 100 + 100 nulls, the
    steering 50 of them under 60 + 60 nulls (Holm's least) at four doses; finetuning runs on
    the three short or mid-length sets with 200 labels through its label curve and 200 test
    pairs; ClimateX places all 300 test statements, probe and zero-shot."""
    return replace(cfg, sizes=ReplicationSizes.full(), judge_train_pairs=400,
                   allure=AllureConfig(rounds=2, per_round=2, pool=100, test_pairs=100),
                   ablation_eval_pairs=100, ablation_random=HOLM_NULLS,
                   ablation_matched=HOLM_NULLS, steering_nulls=60,
                   steering_eval_pairs=50,
                   finetune_datasets=("rocstories", "mctaco", "mt-bench"), finetune_train=200,
                   finetune_test=200, finetune_curve=(25, 50, 100, 200),
                   finetune_curve_full=None,
                   climatex_test=300, climatex_k=10, climatex_train=100,
                   climatex_train_pairs=400, climatex_methods=("probe", "zero_shot"))


def _datasets(cfg: ReplicationConfig, log) -> dict[str, Dataset]:
    out = replication_datasets(cfg.shared_data, cfg.sizes, seed=cfg.settings.seed, log=log)
    for spec in cfg.extra:
        d = load_dataset_spec(spec, max_pairs=cfg.sizes.mctaco_pairs, seed=cfg.settings.seed)
        out[d.name] = d
    return out


def _text_baselines(bridge, stores, datasets, cfg) -> dict[str, HeldOutTextBaselines]:
    """Per dataset: the lexical and embedding baselines' P(item 1) per held-out pair id."""
    return {d.name: held_out_text_baselines(s.pairs(), d, embedding=bridge.W_E.detach(),
                                            tokenizer=bridge.tokenizer,
                                            **cfg.settings.split_kwargs())
            for s, d in zip(stores, datasets)}


def step_configs(cfg: ReplicationConfig, paths: dict[str, str], kinds: dict[str, str]
                 ) -> dict:
    """Each step's config (``paths``: dataset name -> store path, ``kinds``: name -> record
    kind), every one holding the replication's own ``settings`` object: no step splits or
    resamples differently."""
    s = cfg.settings
    names = list(paths)
    abl = [paths[cfg.ablation_dataset]] if cfg.ablation_dataset in paths else []
    climatex = Path(cfg.shared_data) / "climatex" / "ipcc_statements_dataset.tsv"
    return {
        "sweep": SweepConfig(stores=[paths[n] for n in names], settings=s),
        "probes vs prompting": PvPConfig(
            datasets=[n for n in names if n not in shifted_names(names)], settings=s),
        "thesis tables": ThesisTablesConfig(stores=[paths[n] for n in summeval_names(names)],
                                            settings=s),
        "transfer": TransferConfig(stores=[paths[n] for n in comparison_names(names, kinds)],
                                   kinds=cfg.transfer_kinds, settings=s),
        "distribution shift": ShiftConfig(settings=s),
        "finetuning": FinetuningConfig(max_train=cfg.finetune_train, max_test=cfg.finetune_test,
                                       curve_sizes=cfg.finetune_curve,
                                       curve_sizes_full=cfg.finetune_curve_full, settings=s),
        "ablation": AblationConfig(stores=abl, n_random=cfg.ablation_random,
                                   n_matched=cfg.ablation_matched,
                                   max_eval_pairs=cfg.ablation_eval_pairs, settings=s),
        "steering": SteeringConfig(stores=abl, n_random=cfg.steering_nulls,
                                   n_matched=cfg.steering_nulls, alphas=cfg.steering_alphas,
                                   max_eval_pairs=cfg.steering_eval_pairs, settings=s),
        "insertion": InsertionConfig(path=str(climatex), max_test=cfg.climatex_test,
                                     k=cfg.climatex_k, n_train=cfg.climatex_train,
                                     max_train_pairs=cfg.climatex_train_pairs,
                                     methods=cfg.climatex_methods, settings=s),
    }


def run_replication(cfg: ReplicationConfig, *, reuse: bool = True, bridge=None) -> dict | None:
    """The replication; None (with a printed reason) when no replication data is found."""
    log = tqdm.write
    datasets = _datasets(cfg, log)
    if not datasets:
        return None
    run = StudyRunner(cfg.out, STEPS, reuse=reuse, desc="replication")
    out = cfg.out
    bridge = bridge if bridge is not None else run.timed("load model",
                                                         lambda: load_model(cfg.model))
    names = list(datasets)
    ds = [datasets[n] for n in names]
    t0 = time.time()  # a rate counts the pairs harvested now, not those of reused stores
    stores = run.timed("harvest", lambda: ensure_stores(bridge, ds, cfg.stores), units=lambda
                       st: (sum(s.pairs_written_since(t0) for s in st), "pairs harvested"))
    split = cfg.settings.split_kwargs()  # for the library's own split functions
    keep = [k for k, s in enumerate(stores) if store_fits(s, split, log)]
    names, ds, stores = [names[k] for k in keep], [ds[k] for k in keep], [stores[k] for k in keep]
    store_of = dict(zip(names, stores))
    common = dict(cfg=cfg, model=model_name(bridge), stores=[s.fingerprint() for s in stores])

    # Each step declares the record it hands on (tests/test_step_signatures.py checks it);
    # the runner rebuilds that type from the step cache, so a reused step reads as a fresh one.
    def judges_step() -> dict[str, HeldOutJudges]:
        return judge_study(bridge, stores, ds, JudgeStudySettings(
            cfg.settings, train_pairs=cfg.judge_train_pairs, allure=cfg.allure), log=log)
    judges = run.step("prompted judges", judges_step, units=lambda j: (sum(
        v.n_prompts.get("zero_shot_run", 0) for v in j.values()), "prompts run"), **common)

    def texts_step() -> dict[str, HeldOutTextBaselines]:
        return _text_baselines(bridge, stores, ds, cfg)
    texts = run.step("text baselines", texts_step, **common)

    scored = [n for n in names if all(r.score1 is not None for r in datasets[n].records)]

    def scoring_step() -> dict[str, HeldOutScores]:
        return {n: score_held_out(bridge, held_out_datasets(store_of[n], datasets[n], **split)[1])
                for n in scored}
    ratings = run.step("direct scoring and G-Eval", scoring_step, **common)
    per_pair = pair_scores({n: {**judges[n].p_by_pair(),
                                **(texts[n].p_by_pair() if n in texts else {}),
                                **(ratings[n].p_by_pair() if n in ratings else {})}
                            for n in names})
    judge_records = {n: judges[n].record() for n in names}  # what the summary keeps
    cfgs = step_configs(cfg, {n: str(store_of[n].path) for n in names},
                        {n: datasets[n].kind for n in names})

    def sweep_step():
        res = run_sweep_with_summary(stores, out, cfgs["sweep"], judges=per_pair)
        return {**res["summary"], "others": [r for r in res["rows"] if int(r["layer"]) < 0],
                "per_layer": per_layer(res["rows"])}       # Appendix A's claims
    sweep = run.step("layer sweep", sweep_step, outputs=("layer_sweep.csv", "layer_sweep.png"),
                     judges=per_pair, **common)
    chosen = {(e["dataset"], e["kind"]): e["layer"] for e in sweep["entries"]}

    pvp = run.step("probes vs prompting", lambda: run_probes_vs_prompting(
        sweep, judge_records, out, cfgs["probes vs prompting"]),
        outputs=("probes_vs_prompting.csv",), sweep=sweep, **common)

    summeval = summeval_names(names)
    thesis = run.step("thesis tables", lambda: run_thesis_tables(
        [(store_of[n], held_out_datasets(store_of[n], datasets[n], **split)[1])
         for n in summeval],
        {n: judges[n].zero_shot_p() for n in summeval}, ratings,
        {n: chosen[(n, "supervised")] for n in summeval}, out, cfgs["thesis tables"])
        if summeval else [],
        outputs=("thesis_tables.csv",), sweep=sweep, **common)

    comparison = comparison_names(names, {n: datasets[n].kind for n in names})

    def transfer_step():
        res = run_transfer([store_of[n] for n in comparison], out, cfgs["transfer"])
        # F1 for the report's Table 1; accuracy with its group differences for Table 1's claims
        head = [r for r in res["transfer"] if r.get("headline")]
        return {**res["summary"], "f1": [r for r in head if r["metric"] == "f1"],
                "accuracy": [r for r in head if r["metric"] == "accuracy"
                             and r["kind"] in ("supervised", "pca")]}
    transfer = run.step("transfer", transfer_step, outputs=("transfer.csv", "transfer.png"),
                        **common)

    shift = run.step("distribution shift", lambda: run_shift(
        store_of.get("llmbar-clean"), [store_of[n] for n in shifted_names(names)],
        {n: judges[n].zero_shot_p() for n in names}, out, cfgs["distribution shift"])
        if "llmbar-clean" in store_of else None,
        outputs=("distribution_shift.csv",), **common)

    tuned = [n for n in cfg.finetune_datasets if n in store_of]
    finetuning = run.step("finetuning", lambda: run_finetuning(
        bridge, [(store_of[n], datasets[n]) for n in tuned], out, cfgs["finetuning"])
        if tuned else [],
        outputs=("finetuning.csv",), **common)

    abl = cfg.ablation_dataset
    ablation = run.step("ablation", lambda: run_ablation(
        bridge, [(store_of[abl], datasets[abl])], out, cfgs["ablation"], log=log)[0]
        if abl in store_of else [],
        outputs=("ablation.csv",), **common, units=((cfg.ablation_random + cfg.ablation_matched)
                                                     * cfg.ablation_eval_pairs, "nulls x pairs"))

    steering = run.step("steering", lambda: run_steering(
        bridge, [(store_of[abl], datasets[abl])], out, cfgs["steering"], log=log)
        if abl in store_of else [], outputs=("steering.csv",), **common)

    climatex = Path(cfg.shared_data) / "climatex" / "ipcc_statements_dataset.tsv"
    insertion = run.step("insertion", lambda: run_insertion(bridge, cfgs["insertion"], out)
                         if climatex.is_file() else [],
        outputs=("insertion.csv",), **common)
    run.close()

    summary = replication_summary(
        model=model_name(bridge), timings=run.timings, reused=run.reused, cfg=cfg,
        datasets={n: len(d) for n, d in datasets.items()}, sweep=sweep, pvp=pvp,
        thesis=thesis, transfer=transfer, shift=shift, ablation=ablation, steering=steering,
        finetuning=finetuning,
        insertion=insertion, judges=judge_records)
    summary.update(evaluate_claims(summary, sweep))        # the claims registry decides
    write_json(Path(out) / "summary.json", summary)
    save_config(out, "replication", cfg)
    print(replication_markdown(summary))
    return summary


def refresh(figures: str | Path = "figures") -> dict:
    """Re-decide a finished replication's claims from its own outputs in ``figures`` (no model
    run): the probes-vs-prompting table from the sweep's summary and rows, the shift verdicts
    from its rows, then ``summary.json``. For when a verdict rule changed after the run."""
    import csv

    from analyses.distribution_shift import gap_verdict

    fig = Path(figures)
    s = read_json_object(fig / "summary.json")
    sweep = read_json_object(fig / "layer_sweep_summary.json")
    num = {"value": float, "lo": float, "hi": float, "n_test": int, "layer": int}
    others, layers = [], []
    for i, r in enumerate(csv.DictReader(open(fig / "layer_sweep.csv", encoding="utf-8")), 2):
        try:  # a column missing, or no number: located, not a bare ValueError
            row = {k: f(r[k]) if r[k] != "" else float("nan") for k, f in num.items()}
        except (KeyError, TypeError, ValueError) as e:
            raise DataError(f"expected numbers in {list(num)} ({e})", row=i,
                            file=str(fig / "layer_sweep.csv")) from None
        if row["layer"] < 0:
            others.append({**r, **row, "ci_counts": r.get("ci_counts") == "True"})
        else:
            layers.append({**r, **row, "ci_counts": r.get("ci_counts") in ("True", True)})
    sweep["others"], sweep["per_layer"] = others, per_layer(layers)
    names = list(dict.fromkeys(e["dataset"] for e in sweep["entries"]))
    settings = EvalSettings(n_boot=s["n_boot"], test_size=s["test_size"],
                            split_by=s["split_by"], **{k: s[k] for k in ("seed", "quick")
                                                       if k in s})
    pvp = run_probes_vs_prompting(sweep, s["judges"], fig, PvPConfig(datasets=[
        n for n in names if n not in shifted_names(names)],  # as the main job: Figure 4's alone
                                                                     settings=settings))
    shift = s.get("shift")
    if shift:
        in_dist = {r["method"]: r["lo"] for r in shift["rows"] if r["role"] == "in distribution"}
        for d in shift["drops"]:
            if d.get("verdict"):
                d["verdict"] = gap_verdict(d, in_dist, d["method"].split(" - ")[1][:-5]).text
    cfg = ReplicationConfig(sizes=ReplicationSizes(**{k: tuple(v) if isinstance(v, list) else v
                                                      for k, v in s["sizes"].items()}),
                            settings=settings)
    out = replication_summary(
        model=s["model"], timings=s["timings_s"], reused=s["reused_steps"], cfg=cfg,
        datasets=s["datasets"], sweep=sweep, pvp=pvp, thesis=s["thesis_tables"],
        transfer=s["transfer"], shift=shift, ablation=s["ablation"], steering=s["steering"],
        finetuning=s["finetuning"], insertion=s["insertion"], judges=s["judges"])
    out.update(evaluate_claims(out, sweep))
    write_json(fig / "summary.json", out)
    return out


if __name__ == "__main__":
    import sys

    refresh(*sys.argv[1:2])
