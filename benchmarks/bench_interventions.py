"""The main job's ablation and steering steps at the demo's sizes: the passes they made
before against the steps as they run now, on the same MT-Bench store, model and directions.

Before: the ablation ran the prompts twice (the control at the read-out hook in a pass of its
own, then every direction of the preset), the steering ``1 + len(alphas)`` times (the
unsteered judge, then a pass per alpha). Now each step runs the prompts once: the control
rides as one more branch (:func:`ppairs_lens.interventions.batched.
judge_under_direction_sets`), the unsteered judge and every alpha x direction are the
branches of one steering pass. The prompts' prefixes (MT-Bench's long answers) are most of
either step's cost, so the passes saved are the time saved. The script prints the old passes'
seconds beside the whole new steps' (read-out choice, probe fits, tables and figure
included), their ratio, and the largest difference between the two paths' log-odds.

The new steps run first (``--new-only``: they alone), then the old passes.

Run: ``python -m benchmarks.bench_interventions [--store stores/SmolLM2-135M-Instruct/mt-bench-...
--data ../shared/datasets --new-only]`` (without ``--store``: the demo's store, harvested if
missing).
"""

from __future__ import annotations

import argparse
import csv
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from analyses.ablation import choose_layer, run_ablation
from analyses.replication.run import step_configs
from analyses.replication.config import ReplicationConfig
from analyses.steering import run_steering
from benchmarks.common import SHARED
from ppairs_lens.activations.pipeline import ensure_store, store_template
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.activations.store import ActivationStore
from analyses.replication.sets import replication_datasets
from ppairs_lens.data.specs import subsample_by_context
from ppairs_lens.interventions.conditions import BASELINE, CONTROL
from ppairs_lens.evaluation.store_split import split_store
from ppairs_lens.interventions.batched import judge_under_directions
from ppairs_lens.interventions.directions import (
    choice_unembedding_direction,
    null_directions,
    probe_directions,
)
from ppairs_lens.interventions.steering import judge_under_steering
from ppairs_lens.models.loading import load_model


def _test_ds(dataset, sp, n, seed):
    keep = {p.pair_id for p in sp.pairs_test}
    return subsample_by_context(replace(dataset, name=f"{dataset.name}:test", records=[
        r for r in dataset.records if r.pair_id in keep]), n, seed)


def _directions(sp, layer, cfg, name) -> tuple[list[str], list[torch.Tensor]]:
    """The probes' directions, then the nulls, as both steps draw them."""
    _, kept, rows = probe_directions(sp.acts_train, sp.labels_train, layer, cfg.kinds,
                                     C=cfg.C, name=name)
    n_names, _, n_rows = null_directions(sp.acts_train, layer, cfg.n_random, cfg.n_matched,
                                         cfg.settings.seed)
    return kept + n_names, rows + n_rows


def ablation_before(bridge, store, dataset, cfg) -> tuple[float, np.ndarray, list[str]]:
    """The old ablation's passes: the read-out control alone, then the preset's directions."""
    sp = split_store(store, **cfg.settings.split_kwargs())
    layer, _ = choose_layer(sp, cfg)
    template = store_template(store)
    names, rows = _directions(sp, layer, cfg, store.meta.dataset)
    k = len(rows) - cfg.n_random - cfg.n_matched  # probes kept: baseline, probes, control, nulls
    names = [BASELINE, *names[:k], CONTROL, *names[k:]]
    r = torch.stack([torch.zeros(store.d_model), *rows[:k],
                     choice_unembedding_direction(bridge, dataset, template), *rows[k:]])
    test_ds = _test_ds(dataset, sp, cfg.max_eval_pairs, cfg.settings.seed)
    st = HarvestSettings(token_budget=cfg.token_budget)
    t = time.perf_counter()
    ctrl = judge_under_directions(bridge, test_ds, template, r[[0, names.index(CONTROL)]],
                                  [store.hook_names[layer]], settings=st)
    out = judge_under_directions(bridge, test_ds, template, r, cfg.presets[0], settings=st)
    secs = time.perf_counter() - t
    return secs, np.concatenate([out["z"], ctrl["z"][:, 1:]], axis=1), names


def steering_before(bridge, store, dataset, cfg) -> tuple[float, np.ndarray, np.ndarray, list]:
    """The old steering's passes: the unsteered judge, then one pass per alpha."""
    sp = split_store(store, **cfg.settings.split_kwargs())
    layer, _ = choose_layer(sp, cfg)
    names, rows = _directions(sp, layer, cfg, store.meta.dataset)
    r = torch.stack(rows)
    unit = float(sp.acts_train[:, 0, layer].double().norm(dim=-1).median())
    test_ds = _test_ds(dataset, sp, cfg.max_eval_pairs, cfg.settings.seed)
    st = HarvestSettings(token_budget=cfg.token_budget)
    template, hook = store_template(store), [store.hook_names[layer]]
    t = time.perf_counter()
    z0 = judge_under_steering(bridge, test_ds, template, torch.zeros(1, store.d_model), hook,
                              settings=st)["z"][:, 0]
    z = np.stack([judge_under_steering(bridge, test_ds, template, float(a) * unit * r, hook,
                                       settings=st)["z"] for a in cfg.alphas])
    return time.perf_counter() - t, z0, z, names


def _csv(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", help="the demo's MT-Bench activation store (read only)")
    ap.add_argument("--data", default=str(SHARED), help="the shared datasets folder")
    ap.add_argument("--ablation-pairs", type=int, help="default: the demo's")
    ap.add_argument("--steering-pairs", type=int, help="default: the demo's")
    ap.add_argument("--new-only", action="store_true", help="time the steps as they run now")
    args = ap.parse_args()
    rc = ReplicationConfig(shared_data=args.data)
    if args.ablation_pairs:
        rc.ablation = replace(rc.ablation, max_eval_pairs=args.ablation_pairs)
    if args.steering_pairs:
        rc.steering = replace(rc.steering, max_eval_pairs=args.steering_pairs)
    dataset = replication_datasets(args.data, rc.sizes, seed=rc.settings.seed,
                                   log=lambda s: None)[rc.ablation_dataset]
    bridge = load_model(rc.model)
    store = (ActivationStore.open(args.store) if args.store
             else ensure_store(bridge, dataset, rc.stores))
    cfgs = step_configs(rc, {dataset.name: str(store.path)}, {dataset.name: dataset.kind})
    acfg, scfg = cfgs["ablation"], cfgs["steering"]
    quiet = lambda s: None  # noqa: E731
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        run_ablation(bridge, [(store, dataset)], tmp, acfg, log=quiet)
        new_a = time.perf_counter() - t
        t = time.perf_counter()
        rows = run_steering(bridge, [(store, dataset)], tmp, scfg, log=quiet).data()
        new_s = time.perf_counter() - t
        print(f"now: ablation step {new_a:.1f} s ({acfg.max_eval_pairs} pairs), steering step "
              f"{new_s:.1f} s ({scfg.max_eval_pairs} pairs)")
        if args.new_only:
            return
        old_a, za, names = ablation_before(bridge, store, dataset, acfg)
        saved = {(r["condition"], r["pair_id"]): float(r["z"])
                 for r in _csv(Path(tmp) / "ablation_z.csv")}
        ids = [r["pair_id"] for r in _csv(Path(tmp) / "ablation_z.csv")
               if r["condition"] == names[0]]
        da = max(abs(saved[(c, p)] - za[i, j]) for j, c in enumerate(names)
                 for i, p in enumerate(ids) if (c, p) in saved)
        old_s, z0, zs, snames = steering_before(bridge, store, dataset, scfg)
        dz = (zs - z0[None, :, None]).mean(1)
        ds_ = max(abs(r["delta_z"] - dz[list(scfg.alphas).index(r["alpha"]),
                                        snames.index(r["condition"])])
                  for r in rows if r["kind"] == "probe")
    print(f"ablation: {acfg.n_random} + {acfg.n_matched} nulls, {acfg.max_eval_pairs} pairs; "
          f"steering: {scfg.n_random} + {scfg.n_matched} nulls, {len(scfg.alphas)} alphas, "
          f"{scfg.max_eval_pairs} pairs")
    print(f"ablation: before {old_a:6.1f} s (its passes alone), now {new_a:6.1f} s (the whole "
          f"step): {old_a / new_a:.2f}x; largest |z| difference {da:.1e}")
    print(f"steering: before {old_s:6.1f} s (its passes alone), now {new_s:6.1f} s (the whole "
          f"step): {old_s / new_s:.2f}x; largest delta_z difference {ds_:.1e}")


if __name__ == "__main__":
    main()
