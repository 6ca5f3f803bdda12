"""The main job: the whole PPairS study on one model, every table and figure in one folder.

Steps: harvest (stores reused when present), calibrated zero-shot baseline on each held-out
split, layer sweeps, cross-dataset transfer and cosine similarity, directional ablation with
its controls, PAIRS ranking. ``ppairs-lens run`` (what ``make demo`` runs) calls :func:`run`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from tqdm.auto import tqdm

from analyses.ablation import AblationConfig, run_ablation
from analyses.ablation_plots import summary_lines
from analyses.cross_dataset import TransferConfig, run_transfer
from analyses.layer_sweep import SweepConfig, run_sweep
from analyses.ranking import RankingConfig, run_ranking
from ppairs_lens.judges.zero_shot import evaluate_zero_shot
from ppairs_lens.io.outputs import save_config, write_json
from ppairs_lens.models.loading import load_model, model_name
from ppairs_lens.io.step_cache import StepCache
from ppairs_lens.activations.pipeline import ensure_store
from ppairs_lens.data import BUILTIN_NAMES
from ppairs_lens.data.specs import load_dataset_spec, subsample_by_context
from ppairs_lens.evaluation.best_layers import best_layers
from ppairs_lens.evaluation.store_split import split_store


@dataclass
class StudyConfig:
    """The whole study; saved as ``study.config.json`` beside the outputs."""

    model: str | None = None  # None: the embedded SmolLM2-135M-Instruct
    datasets: list[str] = field(default_factory=lambda: list(BUILTIN_NAMES))
    max_pairs: int | None = None  # per dataset (whole contexts, seeded)
    stores: str = "stores"
    out: str = "figures"
    seed: int = 0
    split_by: str = "context"  # held-out pairs: "context" | "item" | "pair" | "auto"
    zero_shot_max_pairs: int | None = 60  # held-out records per dataset (whole contexts)
    ablation_dataset: str = "larger_number"
    # The ablation re-runs the model once per (preset, direction): these sizes keep the whole
    # study within ~15 minutes on 2 CPU cores; `ppairs-lens ablate` runs larger ones.
    ablation_eval_pairs: int = 40
    ablation_random: int = 5
    ablation_refit_train: int = 60
    ranking_dataset: str = "story_sentiment"
    ranking_eval_contexts: int = 8
    n_boot: int = 300
    quick: bool = False  # small settings for tests and previews


def quick(cfg: StudyConfig) -> StudyConfig:
    """Small settings: a preview in a couple of minutes (and what the tests run)."""
    return replace(cfg, max_pairs=cfg.max_pairs or 80, zero_shot_max_pairs=40,
                   ablation_eval_pairs=16, ablation_random=3, ablation_refit_train=32,
                   ranking_eval_contexts=2, n_boot=50, quick=True)


def _zero_shot_on_test(bridge, store, dataset, cfg: StudyConfig) -> dict:
    """The calibrated prompted judgement on the same held-out pairs the probes are scored on."""
    sp = split_store(store, test_size=0.3, split_by=cfg.split_by, seed=cfg.seed, layers=[0])
    test_ids = {p["pair_id"] for p in sp.pairs_test}
    subset = replace(dataset, records=[r for r in dataset.records if r.pair_id in test_ids])
    if cfg.zero_shot_max_pairs is not None:
        subset = subsample_by_context(subset, cfg.zero_shot_max_pairs, seed=cfg.seed)
    res = evaluate_zero_shot(bridge, subset)
    return {**res["metrics"], "n_records": res["n_scored"]}


def run(cfg: StudyConfig, *, reuse: bool = True, bridge=None) -> dict:
    """The study. Steps whose inputs (config, store fingerprints, code) are unchanged since a
    finished earlier run into the same ``out`` are taken from it (``reuse=False``: recompute
    all); stores are always reused when complete. ``bridge``: an already loaded model
    (default: load ``cfg.model``)."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    cache = StepCache(out / ".ppairs-steps", enabled=reuse,
                      code_packages=("ppairs_lens", "analyses"))
    timings: dict[str, float] = {}
    reused: list[str] = []
    steps = tqdm(total=7, desc="study", unit="step")

    def step(name: str, fn, outputs=(), **inputs):
        t = time.perf_counter()
        result, was = cache.run(name, cache.key(name, **inputs), fn,
                                [out / o for o in outputs])
        timings[name] = round(time.perf_counter() - t, 1)
        if was:
            reused.append(name)
        steps.set_postfix_str(f"{name} {timings[name]:.0f}s" + (" (reused)" if was else ""))
        steps.update(1)
        return result

    t = time.perf_counter()
    bridge = bridge if bridge is not None else load_model(cfg.model)
    timings["load model"] = round(time.perf_counter() - t, 1)
    steps.update(1)

    t = time.perf_counter()
    datasets = [load_dataset_spec(s, max_pairs=cfg.max_pairs, seed=cfg.seed) for s in cfg.datasets]
    stores = [ensure_store(bridge, d, cfg.stores) for d in datasets]
    timings["harvest"] = round(time.perf_counter() - t, 1)
    steps.update(1)
    common = dict(cfg=cfg, model=model_name(bridge),
                  stores=[s.fingerprint() for s in stores])

    zero_shot = step("zero-shot baseline", lambda: {
        d.name: _zero_shot_on_test(bridge, s, d, cfg) for s, d in zip(stores, datasets)},
        **common)

    sweep_rows = step("layer sweep", lambda: run_sweep(
        stores, out, SweepConfig(stores=[str(s.path) for s in stores], seed=cfg.seed,
                                 split_by=cfg.split_by, n_boot=cfg.n_boot,
                                 zero_shot=zero_shot)),
        outputs=["layer_sweep.csv", "layer_sweep.png"], zero_shot=zero_shot, **common)

    transfer = step("transfer", lambda: run_transfer(
        stores, out, TransferConfig(stores=[str(s.path) for s in stores], seed=cfg.seed,
                                    split_by=cfg.split_by, n_boot=cfg.n_boot)),
        outputs=["transfer.csv", "transfer.png"], **common)

    names = [d.name for d in datasets]
    a = next((i for i, n in enumerate(names) if n.startswith(cfg.ablation_dataset)), 0)
    abl_rows = step("ablation", lambda: run_ablation(
        bridge, [(stores[a], datasets[a])], out, AblationConfig(
            stores=[str(stores[a].path)], seed=cfg.seed, n_boot=cfg.n_boot, split_by=cfg.split_by,
            n_random=cfg.ablation_random, max_eval_pairs=cfg.ablation_eval_pairs,
            max_refit_train=cfg.ablation_refit_train), log=tqdm.write)[0],
        outputs=["ablation.csv", "ablation.png"], **common)

    rank_rows = step("ranking", lambda: run_ranking(bridge, RankingConfig(
        dataset=cfg.ranking_dataset, model=cfg.model, n_eval_contexts=cfg.ranking_eval_contexts,
        n_train_contexts=10 if not cfg.quick else 4, n_boot=cfg.n_boot, seed=cfg.seed), out),
        outputs=["ranking.csv", "ranking.png"], **common)
    steps.close()

    summary = {"model": model_name(bridge), "timings_s": timings, "reused_steps": reused,
               "best_layers": best_layers(sweep_rows), "zero_shot": zero_shot,
               "transfer": transfer.get("summary"), "ranking": rank_rows,
               "ablation": summary_lines(abl_rows)}
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
    print("\nBest layer per probe (held-out accuracy, 95% CI) vs calibrated zero-shot:")
    for r in summary["best_layers"]:
        zs = summary["zero_shot"].get(r["dataset"], {}).get("accuracy", {})
        print(f"  {r['dataset']:24s} {r['kind']:10s} layer {r['layer']:2d}: {r['value']:.3f} "
              f"[{r['lo']:.3f}, {r['hi']:.3f}]   zero-shot {zs.get('value', float('nan')):.3f}")
    print("\nAblation:")
    for line in summary["ablation"]:
        print("  " + line)
    print("\nRanking (mean within-context Spearman):")
    for r in summary["ranking"]:
        if "spearman" in r:
            print(f"  {r.get('method', '?'):24s} {r['spearman']:.3f}")


def cli(args, bridge=None) -> None:
    """``ppairs-lens run``; ``bridge``: the loaded model (:mod:`analyses.cli` passes it)."""
    cfg = StudyConfig(model=args.model, out=args.out, stores=args.stores, seed=args.seed,
                      max_pairs=args.max_pairs, split_by=args.split)
    if args.datasets:
        cfg.datasets = list(BUILTIN_NAMES) + [d for d in args.datasets if d not in BUILTIN_NAMES]
    run(quick(cfg) if args.quick else cfg, reuse=not getattr(args, "recompute", False),
        bridge=bridge)
