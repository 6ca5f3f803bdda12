"""Layer sweep: how well each probe type reads the judgement at every layer (paper Figs 6-7).

For each store: drop ties, split by context (no article on both sides), fit every probe kind
at every read-out at once (:func:`ppairs_lens.probes.sweep.fit_sweep`), and score the held-out pairs
with bootstrap CIs. Writes ``layer_sweep.csv`` (one row per dataset x kind x layer),
``layer_sweep.config.json`` and ``layer_sweep.{png,svg}``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ppairs_lens.io.outputs import save_config, save_figure, write_csv
from ppairs_lens.evaluation.metrics import evaluate, within_context_spearman
from ppairs_lens.io.plotting import caption, color, label, style
from ppairs_lens.probes.estimators import PROBE_KINDS
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.evaluation.best_layers import best_layers
from ppairs_lens.evaluation.store_split import split_store
from ppairs_lens.probes.sweep import fit_sweep


@dataclass
class SweepConfig:
    """What a layer sweep ran on; saved beside its results."""

    stores: list[str]
    kinds: tuple[str, ...] = PROBE_KINDS
    test_size: float = 0.3
    split_by: str = "context"  # "context" | "pair" | "item"
    seed: int = 0
    C: float = 1.0
    n_boot: int = 300
    metric: str = "accuracy"  # plotted metric: accuracy | f1 | auroc
    zero_shot: dict[str, dict] = field(default_factory=dict)  # dataset -> metrics, if measured


def sweep_store(store: ActivationStore, cfg: SweepConfig) -> list[dict]:
    """Rows of (dataset, kind, layer, metric, value, lo, hi) for one store."""
    sp = split_store(store, test_size=cfg.test_size, split_by=cfg.split_by, seed=cfg.seed)
    probes = fit_sweep(sp.acts_train, sp.labels_train, cfg.kinds, C=cfg.C,
                       model_name=store.meta["model"])
    proba = probes.predict_proba(sp.acts_test)
    groups = [p["context_id"] for p in sp.pairs_test]
    gold = {}
    for p in sp.pairs_test:
        if p.get("score1") is not None:
            gold[p["item1_id"]], gold[p["item2_id"]] = p["score1"], p["score2"]
    rows = []
    for kind in cfg.kinds:
        for li, name in enumerate(store.hook_names):
            pk = proba[kind][li]
            if np.isnan(pk).any():
                continue  # a degenerate layer (no pair-specific signal): nothing to score
            scores = evaluate(sp.labels_test, pk, groups=groups, n_boot=cfg.n_boot, seed=cfg.seed)
            if gold:
                scores["spearman"] = within_context_spearman(
                    [(p["context_id"], p["item1_id"], p["item2_id"]) for p in sp.pairs_test],
                    pk, gold, n_boot=cfg.n_boot, seed=cfg.seed)
            for metric, s in scores.items():
                rows.append({"dataset": sp.name, "kind": kind, "layer": li, "hook": name,
                             "metric": metric, "value": s["value"], "lo": s["lo"], "hi": s["hi"],
                             "n_train": len(sp.labels_train), "n_test": len(sp.labels_test)})
    return rows


def plot_sweep(rows: list[dict], cfg: SweepConfig, model: str):
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    with style():
        ncol = min(3, len(datasets))
        nrow = -(-len(datasets) // ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=(3.4 * ncol, 2.6 * nrow), squeeze=False,
                                 sharey=True)
        for ax, ds in zip(axes.flat, datasets):
            for kind in cfg.kinds:
                rs = [r for r in rows if r["dataset"] == ds and r["kind"] == kind
                      and r["metric"] == cfg.metric]
                if not rs:
                    continue
                x = [r["layer"] for r in rs]
                ax.plot(x, [r["value"] for r in rs], color=color(kind), label=label(kind), lw=1.4)
                ax.fill_between(x, [r["lo"] for r in rs], [r["hi"] for r in rs],
                                color=color(kind), alpha=0.18, lw=0)
            zs = cfg.zero_shot.get(ds, {}).get(cfg.metric)
            if zs:
                ax.axhline(zs["value"], color=color("zero_shot"), ls="--", lw=1,
                           label="zero-shot prompt (calibrated"
                           + (f", {cfg.zero_shot[ds]['n_records']} test pairs)"
                              if "n_records" in cfg.zero_shot.get(ds, {}) else ")"))
            ax.axhline(0.5 if cfg.metric != "spearman" else 0.0, color="k", lw=0.6, alpha=0.5)
            n_test = next((r["n_test"] for r in rows if r["dataset"] == ds), 0)
            ax.set_title(f"{ds} (test n={n_test})")
            ax.set_xlabel("layer (last = final norm output)")
            ax.set_ylabel(f"held-out {cfg.metric}")
        for ax in list(axes.flat)[len(datasets):]:
            ax.set_visible(False)
        axes.flat[0].legend(loc="lower right")
        fig.suptitle(f"Layer sweep of PPairS probes — {model}", y=1.0)
        caption(fig, f"95% bootstrap CIs (by context, {cfg.n_boot} resamples); split by "
                     f"{cfg.split_by}, test fraction {cfg.test_size}, seed {cfg.seed}.")
        fig.tight_layout()
    return fig


def run_sweep(stores: list[ActivationStore], out: str | Path, cfg: SweepConfig | None = None
              ) -> list[dict]:
    """Sweep every store; write the table, figure and config to ``out``."""
    cfg = cfg or SweepConfig(stores=[str(s.path) for s in stores])
    out = Path(out)
    rows = [r for s in stores for r in sweep_store(s, cfg)]
    write_csv(out / "layer_sweep.csv", rows)
    save_config(out, "layer_sweep", cfg)
    fig = plot_sweep(rows, cfg, stores[0].meta["model"])
    save_figure(fig, out, "layer_sweep")
    return rows


def cli(args, bridge) -> None:
    """``ppairs-lens sweep`` on the model ``bridge`` (loaded by :mod:`analyses.cli`)."""
    from ppairs_lens.activations.pipeline import ensure_store
    from ppairs_lens.data import BUILTIN_NAMES
    from ppairs_lens.data.specs import load_dataset_spec

    specs = args.datasets or list(BUILTIN_NAMES)
    stores = [ensure_store(bridge, load_dataset_spec(s, max_pairs=args.max_pairs, seed=args.seed),
                           args.stores, template=args.template, names=args.hooks) for s in specs]
    rows = run_sweep(stores, args.out, SweepConfig(stores=[str(s.path) for s in stores],
                                                   seed=args.seed, split_by=args.split,
                                                   n_boot=100 if args.quick else 300))
    for r in best_layers(rows):
        print(f"{r['dataset']:32s} {r['kind']:10s} best layer {r['layer']:2d}: "
              f"{r['value']:.3f} [{r['lo']:.3f}, {r['hi']:.3f}]")
