"""The main job, the one runner (:func:`run_replication`) of the one config
(:class:`~analyses.replication.config.ReplicationConfig`): the seed experiments of the thesis
and the paper on their own data, or the same steps on the generated built-ins.

On one model (``ppairs-lens run``, what ``make demo`` runs) it harvests every dataset
(``../shared/datasets`` or ``--shared-data``: SummEval and NEWSROOM x their aspects, HANNA,
ROCStories, MC-TACO, CaTeRS, MT-Bench, LLMBar Natural + Normal and its Adversarial subsets; and
``--extra`` files), asks the prompted judges every held-out pair in every fair form (and
ALLURE), fits the no-model baselines on train (length, memorisation, lexical, input
embeddings) and sweeps every probe kind at every read-out (paper Appendix A); then the table
steps (:mod:`analyses.replication.steps`), which map to the papers as follows:

* probes against prompting and the baselines: paper Figures 1-3;
* thesis tables: thesis Tables 4.1 and 4.2;
* transfer and cosines: paper Table 1 and Figure 5;
* LLMBar's shift: Figure 4 (trained on Natural + Normal, tested on each Adversarial subset);
* LoRA and full finetuning: Section 5.2;
* ablation (Table 2) and steering, on MT-Bench;
* ClimateX insertion: thesis Table 4.4 (and the ClimateX paper);
* the controls with known answers (:mod:`analyses.controls`): run last, reported first.

Then the claims registry on their records, and ``summary.json``, from which ``REPORT.md`` is
written (:mod:`analyses.replication.findings`), the published numbers beside ours. Sizes: the
config's presets (:data:`~analyses.replication.config.PRESETS`, ``--quick`` / ``--full``). On
the built-ins (:data:`~analyses.replication.config.BUILTINS`: ``--builtins``, or no data
folder) the same steps run on generated datasets; those that need a seed experiment's file
(thesis tables, Figure 4's shift, finetuning, insertion) have nothing to do, and no published
claim is tested.
"""

from __future__ import annotations

import time
from dataclasses import fields as dataclass_fields, replace
from functools import partial
from pathlib import Path

from tqdm.auto import tqdm

from analyses.layer_sweep import SweepResult, pair_scores, read_sweep, run_sweep
from analyses.probes_vs_prompting import PvPConfig, run_probes_vs_prompting
from analyses.replication.claims import evaluate_claims
from analyses.replication.config import BUILTINS, ReplicationConfig, replication_config
from analyses.replication.findings import replication_summary, replication_markdown
from analyses.replication.steps import TABLE_STEPS, StepContext, TableStep, sections
from analyses.controls import ControlRows
from analyses.distribution_shift import ShiftResult
from ppairs_lens.activations.pipeline import ensure_stores
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import Dataset
from analyses.replication.sets import (
    ReplicationSizes,
    comparison_names,
    replication_datasets,
    shifted_names,
    summeval_names,
)
from ppairs_lens.data import BUILTIN_NAMES, builtin_dataset
from analyses.replication.fetch import fetched_data_folder
from ppairs_lens.data.specs import load_dataset_spec
from ppairs_lens.errors import DataError
from ppairs_lens.evaluation.protocol import PAPER_TEST_SIZE, EvalSettings
from ppairs_lens.evaluation.store_split import store_fits
from ppairs_lens.evaluation.text_baselines import HeldOutTextBaselines, held_out_text_baselines
from ppairs_lens.io.checksums import file_sha256
from ppairs_lens.io.json_fields import read_json_object
from ppairs_lens.io.outputs import save_config, write_json
from ppairs_lens.io.records import record_data
from ppairs_lens.io.step_cache import StepCache
from ppairs_lens.io.study_runner import StudyRunner, declared_result
from ppairs_lens.judges.held_out import HeldOutScores, held_out_datasets, score_held_out_sets
from ppairs_lens.judges.run_estimate import announce
from ppairs_lens.judges.study import HeldOutJudges, judge_study
from ppairs_lens.models.loading import load_model, model_name
from ppairs_lens.models.spec import ModelSpec

__all__ = ["LATER_MODEL_STEPS", "REFRESH_INPUTS", "ReplicationConfig", "cli",
           "plan_replication", "refresh", "run_replication"]
#: The outputs a re-decision (:func:`refresh`) reads beside ``summary.json``; the run records
#: their SHA-256 there, and a re-decision refuses one changed since.
REFRESH_INPUTS = ("layer_sweep.csv", "layer_sweep_summary.json")


def _output_hashes(fig: Path) -> dict[str, str]:
    return {n: file_sha256(fig / n) for n in REFRESH_INPUTS if (fig / n).is_file()}


def _decide(out: Path, sweep: SweepResult, records: dict, kinds: dict[str, type], hashes: dict,
            **facts) -> dict:
    """``summary.json`` from the steps' ``records`` (by section of ``kinds``), the run's
    ``facts`` and the claims decided on them, written to ``out``: the run and :func:`refresh`
    both end here."""
    summary = replication_summary(**facts, sections={
        k: None if records.get(k) is None else records[k].data() for k in kinds})
    summary.update(evaluate_claims(summary, sweep))        # the claims registry decides
    summary["outputs_sha256"] = hashes
    write_json(out / "summary.json", summary)
    return summary


def _datasets(cfg: ReplicationConfig, log) -> dict[str, Dataset]:
    """The seed experiments' files at ``cfg.sizes``, or ``cfg.datasets``; then ``extra``."""
    if cfg.datasets is None:
        out = replication_datasets(cfg.shared_data, cfg.sizes, seed=cfg.settings.seed, log=log)
    else:
        out = {}
        for spec in cfg.datasets:  # a built-in keeps its name at any size (ablation_dataset)
            d = (builtin_dataset(spec, seed=cfg.settings.seed, n=cfg.max_pairs)
                 if spec in BUILTIN_NAMES else
                 load_dataset_spec(spec, max_pairs=cfg.max_pairs, seed=cfg.settings.seed))
            out[d.name] = d
    for spec in cfg.extra:
        d = load_dataset_spec(spec, max_pairs=cfg.sizes.mctaco_pairs, seed=cfg.settings.seed)
        out[d.name] = d
    return out


def step_configs(cfg: ReplicationConfig, paths: dict[str, str], kinds: dict[str, str]
                 ) -> dict:
    """Each step's config, the one ``cfg`` nests, told where it reads (``paths``: dataset
    name -> store path, ``kinds``: name -> record kind)."""
    names = list(paths)
    abl = [paths[cfg.ablation_dataset]] if cfg.ablation_dataset in paths else []
    climatex = Path(cfg.shared_data) / "climatex" / "ipcc_statements_dataset.tsv"
    return {
        "sweep": replace(cfg.sweep, stores=[paths[n] for n in names]),
        "probes vs prompting": replace(cfg.probes_vs_prompting, datasets=[
            n for n in names if n not in shifted_names(names)]),
        "thesis tables": replace(cfg.thesis_tables, stores=[
            paths[n] for n in summeval_names(names)]),
        "transfer": replace(cfg.transfer, stores=[
            paths[n] for n in comparison_names(names, kinds)]),
        "distribution shift": cfg.shift,
        "finetuning": cfg.finetuning,
        "ablation": replace(cfg.ablation, stores=abl),
        "steering": replace(cfg.steering, stores=abl),
        "insertion": replace(cfg.insertion, path=str(climatex)),
        "controls": cfg.controls,
    }


#: The step of the zero-shot judge study, whose prompts the plan counts unless it is remembered.
JUDGES_STEP = "prompted judges"

#: The steps before the table steps, the runner's own (a progress bar counts them all).
EARLY_STEPS = ("load model", "harvest", JUDGES_STEP, "text baselines",
               "direct scoring and G-Eval", "layer sweep")

#: The main job's steps after the prompted judges that run the model, each with a progress
#: bar of its own; the plan names them and leaves them out of its estimate.
LATER_MODEL_STEPS = ("direct scoring and G-Eval", "finetuning", "ablation", "steering",
                     "insertion", "controls")


def _step_inputs(bridge, cfg: ReplicationConfig, kept: list[ActivationStore]) -> dict:
    """What the steps after the harvest are remembered under: the config, the model and the
    fingerprints of the stores that fit the split (``kept``)."""
    return dict(cfg=cfg, model=model_name(bridge), stores=[s.fingerprint() for s in kept])


def plan_replication(bridge, cfg: ReplicationConfig, ds: list[Dataset],
                     cache: StepCache | None = None) -> list:
    """The main job's model passes before any runs (for its estimate): each store's harvest
    and the zero-shot judge study's prompts (the harvest answers the items' own order; done
    when every store is finished and ``cache``, the run's, remembers the study on them), then
    the later model steps by name."""
    from ppairs_lens.judges.run_estimate import PlannedStep, plan_held_out_run, planned_template
    from ppairs_lens.judges.study import study_prompts

    steps = plan_held_out_run(bridge, ds, cfg.stores, split=None, forms=())
    planned = [planned_template(bridge, d, cfg.stores) for d in ds]
    finished = [store for store, _ in planned]
    if cache is not None and all(s is not None for s in finished):
        split = cfg.settings.split_kwargs()
        kept = [s for s in finished if store_fits(s, split, lambda _: None)]
        studied = cache.has(JUDGES_STEP, cache.key(JUDGES_STEP,
                                                   **_step_inputs(bridge, cfg, kept)))
    else:
        studied = False
    for d, (_, tpl) in zip(ds, planned):
        if d.kind == "comparison":
            steps.append(PlannedStep(d.name, "zero_shot", tuple(
                study_prompts(bridge.tokenizer, d, tpl, cfg.judges)), studied))
    steps += [PlannedStep.untimed("main job", name, 1, "step") for name in LATER_MODEL_STEPS]
    return steps


def run_replication(cfg: ReplicationConfig, *, reuse: bool = True, bridge=None,
                    calibrate: bool = True, steps: tuple[TableStep, ...] = TABLE_STEPS
                    ) -> dict | None:
    """The replication; None when no replication data is found. Its plan and estimated model
    time are printed before the harvest (``calibrate`` False: only remembered rates)."""
    log = tqdm.write
    datasets = _datasets(cfg, log)
    if not datasets:
        return None
    # a model handed in is not loaded: its step is not counted
    early = EARLY_STEPS if bridge is None else EARLY_STEPS[1:]
    run = StudyRunner(cfg.out, len(early) + len(steps), reuse=reuse, desc="replication")
    out = cfg.out
    bridge = bridge if bridge is not None else run.timed("load model",
                                                         lambda: load_model(cfg.model))
    names = list(datasets)
    ds = [datasets[n] for n in names]
    announce(bridge, plan_replication(bridge, cfg, ds, run.cache), measure=calibrate, log=log)
    t0 = time.time()  # a rate counts the pairs harvested now, not those of reused stores
    stores = run.timed("harvest", lambda: ensure_stores(bridge, ds, cfg.stores), units=lambda
                       st: (sum(s.pairs_written_since(t0) for s in st), "pairs harvested"))
    split = cfg.settings.split_kwargs()  # for the library's own split functions
    keep = [k for k, s in enumerate(stores) if store_fits(s, split, log)]
    names, ds, stores = [names[k] for k in keep], [ds[k] for k in keep], [stores[k] for k in keep]
    store_of = dict(zip(names, stores))
    common = _step_inputs(bridge, cfg, stores)

    # Each step declares the record it hands on (tests/test_step_signatures.py checks it);
    # the runner rebuilds that type from the step cache, so a reused step reads as a fresh one.
    def judges_step() -> dict[str, HeldOutJudges]:
        return judge_study(bridge, stores, ds, cfg.judges, log=log)
    judges = run.step(JUDGES_STEP, judges_step, units=lambda j: (sum(
        v.n_prompts.get("zero_shot_run", 0) for v in j.values()), "prompts run"), **common)

    def texts_step() -> dict[str, HeldOutTextBaselines]:   # P(item 1) per held-out pair id
        return {d.name: held_out_text_baselines(s.pairs(), d, embedding=bridge.W_E.detach(),
                                                tokenizer=bridge.tokenizer, **split)
                for s, d in zip(stores, ds)}
    texts = run.step("text baselines", texts_step, **common)

    scored = [n for n in names if all(r.score1 is not None for r in datasets[n].records)]

    def scoring_step() -> dict[str, HeldOutScores]:   # one pass: aspects share articles
        return score_held_out_sets(bridge, {n: held_out_datasets(store_of[n], datasets[n],
                                                                 **split)[1] for n in scored})
    ratings = run.step("direct scoring and G-Eval", scoring_step, **common)
    per_pair = pair_scores({n: {**judges[n].p_by_pair(),
                                **(texts[n].p_by_pair() if n in texts else {}),
                                **(ratings[n].p_by_pair() if n in ratings else {})}
                            for n in names})
    judge_records = {n: judges[n].record() for n in names}  # what the summary keeps
    cfgs = step_configs(cfg, {n: str(store_of[n].path) for n in names},
                        {n: datasets[n].kind for n in names})

    def sweep_step() -> SweepResult:
        return run_sweep(stores, out, cfgs["sweep"], judges=per_pair)
    sweep = run.step("layer sweep", sweep_step, outputs=("layer_sweep.csv", "layer_sweep.png"),
                     judges=per_pair, **common)
    ctx = StepContext(bridge=bridge, cfg=cfg, out=Path(out), log=log, datasets=datasets,
                      stores=store_of, judges=judges, ratings=ratings, sweep=sweep,
                      configs=cfgs)
    records = {}
    for step in steps:
        result = run.step(step.name, partial(step.run, ctx), outputs=step.outputs,
                          units=step.units(ctx), result_type=declared_result(step.run),
                          **step.key(ctx), **(common if step.on_stores else
                                              {"cfg": cfg, "model": common["model"]}))
        if step.section:
            records[step.section] = result
    run.close()

    summary = _decide(  # the summary is JSON: the records' data from here on
        Path(out), sweep, records, sections(steps),
        _output_hashes(Path(out)), model=model_name(bridge), timings=run.timings,
        reused=run.reused, cfg=cfg, datasets={n: len(d) for n, d in datasets.items()},
        judges=judge_records)
    save_config(out, "replication", cfg)
    print(replication_markdown(summary))
    return summary


def refresh(figures: str | Path = "figures", steps: tuple[TableStep, ...] = TABLE_STEPS
            ) -> dict:
    """Re-decide a finished replication's claims from its own outputs in ``figures`` (no model
    run): the probes-vs-prompting table from the sweep's summary and rows, the shift verdicts
    from its rows, then ``summary.json``. For when a verdict rule changed after the run.
    ``steps``: the table steps the run ran (:func:`run_replication`'s), whose sections are
    read back as their records."""
    from analyses.distribution_shift import gap_verdict

    fig = Path(figures)
    s = read_json_object(fig / "summary.json")
    missing = sorted({f.name for f in dataclass_fields(ReplicationSizes)} - set(s["sizes"]))
    if missing:  # today's default would caption numbers drawn at another size
        raise DataError(f"'sizes' lacks {', '.join(missing)}: the run predates them, so its "
                        "sizes cannot be told; rerun it (make demo)",
                        file=str(fig / "summary.json"))
    for name, sha in (s.get("outputs_sha256") or {}).items():
        if not (fig / name).is_file() or file_sha256(fig / name) != sha:
            raise DataError("changed since the run wrote it (its SHA-256 is not the one "
                            "summary.json recorded: re-saved, or rows deleted): restore it or "
                            "rerun the run (make demo)", file=str(fig / name))
    sweep = read_sweep(fig)
    if any(r.kind == "surface" for r in sweep.rows):  # would drop the length baseline
        raise DataError("names the length baseline 'surface', as runs before it was named "
                        "'length' did; rerun it (make demo)", file=str(fig / "layer_sweep.csv"))
    names = sweep.datasets()
    settings = EvalSettings(n_boot=s["n_boot"], test_size=s["test_size"],
                            split_by=s["split_by"], **{k: s[k] for k in ("seed", "quick")
                                                       if k in s})
    pvp = run_probes_vs_prompting(sweep, s["judges"], fig, PvPConfig(
        datasets=[n for n in names if n not in shifted_names(names)],  # as the main job
        settings=settings))
    shift = ShiftResult.from_data(s["shift"]) if s.get("shift") else None
    if shift:
        in_dist = {r.method: r.lo for r in shift.rows if r.role == "in distribution"}
        shift = replace(shift, drops=tuple(
            replace(d, verdict=gap_verdict(record_data(d), in_dist,
                                           d.method.split(" - ")[1][:-5]).text)
            if d.verdict else d for d in shift.drops))
    cfg = ReplicationConfig(sizes=ReplicationSizes(**{k: tuple(v) if isinstance(v, list) else v
                                                      for k, v in s["sizes"].items()}),
                            settings=settings,
                            datasets=(tuple(BUILTINS["datasets"]) if s.get("kind") == "builtins"
                                      else None))
    # each section read back as its record (refused, naming the field, where it does not fit)
    kinds = sections(steps)
    records = {k: t.from_data(s[k]) for k, t in kinds.items() if s.get(k) is not None}
    records.update(probes_vs_prompting=pvp, shift=shift)
    records.setdefault("controls", ControlRows())  # a run before the controls: none
    return _decide(fig, sweep, records, kinds, s.get("outputs_sha256") or _output_hashes(fig),
                   model=s["model"], timings=s["timings_s"], reused=s["reused_steps"],
                   cfg=cfg, datasets=s["datasets"], judges=s["judges"],
                   environment=s.get("environment"))


def cli(args, bridge=None) -> None:
    """``ppairs-lens run``: the main job at the options' preset, on the seed experiments'
    data where ``--shared-data`` exists (the default absent: fetched into the cache first),
    else, or with ``--builtins`` or ``--datasets``, on the built-ins."""
    builtins = getattr(args, "builtins", False) or bool(args.datasets)
    if (not builtins and not Path(args.shared_data).is_dir()
            and not getattr(args, "shared_data_given", False)):
        args.shared_data = str(fetched_data_folder() or args.shared_data)
    if not builtins and not Path(args.shared_data).is_dir():
        print(f"{args.shared_data} not found: the seed experiments' data is absent (a fresh "
              f"clone without ../shared), so the main job runs on the generated built-ins")
        builtins = True
    fields = dict(model=ModelSpec.from_args(args), shared_data=args.shared_data,
                  extra=list(args.extra), out=args.out, stores=args.stores,
                  settings=args.settings)
    if args.max_pairs is not None:  # an option given wins over the preset's size
        fields["max_pairs"] = args.max_pairs.default
    if builtins:
        names = BUILTINS["datasets"]
        fields.update(BUILTINS, datasets=(*names, *(d for d in args.datasets or []
                                                      if d not in names)))
    elif getattr(args, "test_size", None) is None:  # the paper's halves unless --test-size
        fields["settings"] = args.settings.but(test_size=PAPER_TEST_SIZE)
    cfg = replication_config(args.preset, **fields)
    run_replication(cfg, reuse=not getattr(args, "recompute", False), bridge=bridge,
                    calibrate=not args.no_calibration)
