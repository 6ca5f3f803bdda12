"""The main job: the whole PPairS study on one model, every table and figure in one folder.

Steps: harvest the built-ins and, where ``../shared/datasets`` exists, real datasets (stores
reused when present; a missing folder is skipped with a printed reason); the calibrated
zero-shot and few-shot judges on every held-out pair; layer sweeps with no-model baselines and
layers chosen on validation; cross-dataset transfer and cosine similarity; directional
ablation against two nulls of 100 directions on one built-in and two real datasets; PAIRS
ranking. Splits are leak-free (``split_by="auto"``). ``summary.json`` and the README's
findings (:mod:`analyses.findings`) come from these outputs. ``ppairs-lens run`` (what
``make demo`` runs) calls :func:`run`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from tqdm.auto import tqdm

from analyses.ablation import AblationConfig, run_ablation
from analyses.ablation_plots import summary_lines
from analyses.cross_dataset import TransferConfig, run_transfer
from analyses.findings import findings_markdown, study_summary
from analyses.layer_sweep import SweepConfig, pair_scores, run_sweep_with_summary
from analyses.ranking import RankingConfig, run_ranking
from ppairs_lens.activations.pipeline import ensure_store
from ppairs_lens.data import BUILTIN_NAMES, builtin_dataset
from ppairs_lens.data.fetch import fetched_data_folder
from ppairs_lens.data.records import Dataset
from ppairs_lens.data.specs import load_dataset_spec
from ppairs_lens.evaluation.protocol import PAPER_TEST_SIZE, EvalSettings
from ppairs_lens.io.outputs import save_config, write_json
from ppairs_lens.io.study_runner import StudyRunner
from ppairs_lens.judges.held_out import judge_entry, judge_held_out
from ppairs_lens.models.loading import load_model, model_name
from ppairs_lens.models.spec import ModelSpec

#: Real datasets the study adds where ``StudyConfig.shared_data`` exists (paths inside it):
#: Geometry of Truth true/false statements about cities (grouped by city) and about which of
#: two numbers is larger (grouped by the first number). Statements need one prompt per pair
#: (no item order to swap) and are short, which keeps the study's time down; comparison files
#: (SummEval, MC-TACO, Story Cloze) run through ``ppairs-lens sweep`` / ``ablate``.
REAL_DATASETS = ("geometry_of_truth/cities.csv", "geometry_of_truth/larger_than.csv")


@dataclass
class StudyConfig:
    """The whole study; saved as ``study.config.json`` beside the outputs."""

    model: ModelSpec = ModelSpec()  # default: embedded SmolLM2 on the CPU; a name also loads
    datasets: list[str] = field(default_factory=lambda: list(BUILTIN_NAMES))
    # Built-in sizes other than each generator's default ({name: n}).
    builtin_sizes: dict[str, int] = field(default_factory=dict)
    # Real data, read from shared_data when it exists (else skipped with a printed reason).
    shared_data: str = "../shared/datasets"
    real_datasets: list[str] = field(default_factory=lambda: list(REAL_DATASETS))
    real_max_pairs: int = 400  # per real dataset (whole contexts, seeded)
    max_pairs: int | None = None  # per dataset, overrides the sizes above (quick runs)
    stores: str = "stores"
    out: str = "figures"
    # One protocol (seed, n_boot, test share, split_by, quick), the same object in every step.
    settings: EvalSettings = EvalSettings()
    few_shot_k: int = 4  # demonstrations of the few-shot judge (0: no few-shot judge)
    few_shot_max_pairs: int | None = 60  # test pairs the few-shot judge runs on (whole contexts)
    # Ablation: one built-in and the real datasets (those present), at most 200 held-out pairs
    # each (the study's test share, whole leak groups: ~120 of a 400-pair store), 100 isotropic
    # and 100 variance-matched null directions, all batched into one pass per prompt.
    ablation_datasets: list[str] = field(default_factory=lambda: [
        "larger_number", "cities", "larger_than"])
    ablation_eval_pairs: int = 200
    ablation_random: int = 100
    ablation_matched: int = 100
    ranking_dataset: str = "story_sentiment"
    ranking_eval_contexts: int = 20
    ranking_train_contexts: int = 10

    def __post_init__(self):
        self.model = ModelSpec.coerce(self.model)


def quick(cfg: StudyConfig) -> StudyConfig:
    """Small settings: a preview in a couple of minutes (and what the tests run)."""
    return replace(cfg, max_pairs=cfg.max_pairs or 80, ablation_eval_pairs=16,
                   ablation_random=8, ablation_matched=8, ranking_eval_contexts=2,
                   ranking_train_contexts=4, few_shot_k=2, settings=cfg.settings.as_quick())


def study_datasets(cfg: StudyConfig, log=print) -> list[Dataset]:
    """The built-ins, then the real datasets found under ``cfg.shared_data``."""
    out = []
    for spec in cfg.datasets:
        if spec in BUILTIN_NAMES:
            n = cfg.max_pairs or cfg.builtin_sizes.get(spec)
            out.append(builtin_dataset(spec, seed=cfg.settings.seed, n=n))
        else:
            out.append(load_dataset_spec(spec, max_pairs=cfg.max_pairs, seed=cfg.settings.seed))
    root = Path(cfg.shared_data)
    if cfg.real_datasets and not root.is_dir():
        log(f"real datasets skipped: {root} does not exist (a clone without ../shared); the "
            f"study runs on the built-ins only")
        return out
    for rel in cfg.real_datasets:
        path = root / rel
        if not path.is_file():
            log(f"real dataset skipped: {path} is missing")
            continue
        out.append(load_dataset_spec(str(path), max_pairs=cfg.max_pairs or cfg.real_max_pairs,
                                     seed=cfg.settings.seed))
    return out


def _judges(bridge, stores, datasets, cfg: StudyConfig) -> dict:
    """Zero-shot and few-shot judges on every held-out pair, per dataset (for pairing)."""
    return {s.meta.dataset: judge_entry(judge_held_out(
        bridge, s, d, **cfg.settings.split_kwargs(), few_shot_k=cfg.few_shot_k,
        few_shot_max_pairs=cfg.few_shot_max_pairs))
        for s, d in zip(stores, datasets)}


def study_configs(cfg: StudyConfig, stores: list[str], ablation_stores: list[str]) -> dict:
    """Each step's config (store paths), every one holding the study's own ``settings``
    object: no step splits or resamples differently."""
    s = cfg.settings
    return {
        "sweep": SweepConfig(stores=list(stores), settings=s),
        "transfer": TransferConfig(stores=list(stores), settings=s),
        "ablation": AblationConfig(stores=list(ablation_stores), settings=s,
                                   n_random=cfg.ablation_random, n_matched=cfg.ablation_matched,
                                   max_eval_pairs=cfg.ablation_eval_pairs),
        "ranking": RankingConfig(dataset=cfg.ranking_dataset, model=cfg.model.name, settings=s,
                                 n_eval_contexts=cfg.ranking_eval_contexts,
                                 n_train_contexts=cfg.ranking_train_contexts),
    }


def run(cfg: StudyConfig, *, reuse: bool = True, bridge=None) -> dict:
    """The study. Steps whose inputs (config, store fingerprints, code) are unchanged since a
    finished earlier run into the same ``out`` are taken from it (``reuse=False``: recompute
    all); stores are always reused when complete. ``bridge``: an already loaded model
    (default: load ``cfg.model``, a ``ModelSpec``)."""
    out = Path(cfg.out)
    run_ = StudyRunner(out, 8, reuse=reuse)
    step = run_.step
    bridge = bridge if bridge is not None else run_.timed("load model",
                                                          lambda: load_model(cfg.model))
    datasets = study_datasets(cfg, log=tqdm.write)
    stores = run_.timed("harvest", lambda: [ensure_store(bridge, d, cfg.stores)
                                            for d in datasets])
    common = dict(cfg=cfg, model=model_name(bridge),
                  stores=[s.fingerprint() for s in stores])
    names = [s.meta.dataset for s in stores]

    judges = step("prompted judges", lambda: _judges(bridge, stores, datasets, cfg), **common)

    pick = list(dict.fromkeys([i for want in cfg.ablation_datasets for i, n in enumerate(names)
                               if n.startswith(want)][:len(cfg.ablation_datasets)]))
    cfgs = study_configs(cfg, [str(s.path) for s in stores], [str(stores[i].path) for i in pick])

    sweep = step("layer sweep", lambda: run_sweep_with_summary(
        stores, out, cfgs["sweep"], judges=pair_scores(judges)),
                 outputs=("layer_sweep.csv", "layer_sweep.png", "layer_sweep_summary.json"),
                 judges=judges, **common)

    transfer = step("transfer", lambda: run_transfer(stores, out, cfgs["transfer"]),
                    outputs=("transfer.csv", "transfer.png"), **common)

    abl_rows = step("ablation", lambda: run_ablation(
        bridge, [(stores[i], datasets[i]) for i in pick], out, cfgs["ablation"],
        log=tqdm.write)[0], outputs=("ablation.csv", "ablation_null.csv", "ablation.png"),
        **common)

    rank_rows = step("ranking", lambda: run_ranking(bridge, cfgs["ranking"], out),
                     outputs=("ranking.csv", "ranking.png"), **common)
    run_.close()

    summary = study_summary(model=model_name(bridge), timings=run_.timings, reused=run_.reused,
                            sweep=sweep["summary"], judges=judges,
                            transfer=transfer.get("summary"), ablation=abl_rows,
                            ranking=rank_rows)
    write_json(out / "summary.json", summary)
    save_config(out, "study", cfg)
    print_summary(summary)
    return summary


def print_summary(summary: dict) -> None:
    print(f"\nPPairS study on {summary['model']} — "
          f"{sum(summary['timings_s'].values()):.0f} s ({summary['timings_s']})")
    if summary.get("reused_steps"):
        print(f"  reused from the last run (inputs and code unchanged): "
              f"{', '.join(summary['reused_steps'])}; --recompute to redo them")
    print()
    print(findings_markdown(summary))
    print("\nAblation (log-odds of the calibrated judge):")
    for line in summary_lines(summary["ablation"]):
        print("  " + line)
    print("\nRanking (mean within-context Spearman):")
    for r in summary["ranking"]:
        if "spearman" in r:
            print(f"  {r.get('dataset', ''):16s} {r.get('method', '?'):24s} {r['spearman']:.3f}")


def cli(args, bridge=None) -> None:
    """``ppairs-lens run``: the replication on the seed experiments' data
    (:mod:`analyses.replication`) where ``--shared-data`` exists, else (or with
    ``--builtins``, or ``--datasets``) the study on the built-ins; ``bridge``: the loaded
    model."""
    from analyses.replication import ReplicationConfig, full, quick as quick_replication
    from analyses.replication import run_replication

    builtins = getattr(args, "builtins", False) or bool(args.datasets)
    if (not builtins and not Path(args.shared_data).is_dir()
            and not getattr(args, "shared_data_given", False)):
        args.shared_data = str(fetched_data_folder() or args.shared_data)
    if not builtins and Path(args.shared_data).is_dir():
        # the paper's halves unless --test-size says otherwise
        settings = (args.settings if getattr(args, "test_size", None) is not None
                    else args.settings.but(test_size=PAPER_TEST_SIZE))
        rc = ReplicationConfig(model=ModelSpec.from_args(args), shared_data=args.shared_data,
                               extra=list(args.extra), out=args.out, stores=args.stores,
                               settings=settings)
        rc = quick_replication(rc) if args.quick else full(rc) if args.full else rc
        run_replication(rc, reuse=not getattr(args, "recompute", False), bridge=bridge)
        return
    if not builtins:
        print(f"{args.shared_data} not found: the seed experiments' data is absent (a fresh "
              f"clone without ../shared), so the study runs on the generated built-ins")
    _builtins_cli(args, bridge)


def _builtins_cli(args, bridge=None) -> None:
    """The built-ins study (``--builtins``, or no shared data)."""
    cfg = StudyConfig(model=ModelSpec.from_args(args), out=args.out, stores=args.stores,
                      settings=args.settings, max_pairs=args.max_pairs,
                      real_datasets=[] if not Path(args.shared_data).is_dir() else
                      list(REAL_DATASETS), shared_data=args.shared_data)
    if args.datasets:  # extra datasets join the built-ins and the real ones
        cfg.datasets = list(BUILTIN_NAMES) + [d for d in args.datasets if d not in BUILTIN_NAMES]
    run(quick(cfg) if args.quick else cfg, reuse=not getattr(args, "recompute", False),
        bridge=bridge)
