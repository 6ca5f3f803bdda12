"""The ClimateX insertion step: today's probe path against the path it had before, on the
same statements, the same probe and the same model.

Before: lockstep insertion asked one comparison per statement a round (each of a step's
``k`` prompts ran the statement's part again) and every pass ran the whole model. Now: a
step's ``k`` comparisons go in one round (the statement's part runs once for them) and every
pass stops after the probe's read-out block. Both place the same statements with the same
references; the script prints their times side by side, the ratio, and whether every
predicted level (and each step's mean preference, to float error) agrees.

The probe is trained once, as the demo trains it (``ReplicationConfig``'s ClimateX sizes), and
shared; the two paths alternate for ``--rounds`` rounds (best time kept), so a slow spell of a
shared machine hits both. ``--new-only`` times the new path alone (e.g. on all 300
statements, where the old one would take many minutes).

Run: ``python -m benchmarks.bench_insertion [--statements 24 --rounds 1 --new-only
--data ../shared/datasets]``.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from analyses.insertion import (
    insertion_data,
    place_statements,
    train_insertion_probe,
)
from analyses.replication.config import ReplicationConfig
from benchmarks.common import SHARED
from ppairs_lens.judges.comparators import ProbeComparator
from ppairs_lens.judges.context_cache import ContextKV
from ppairs_lens.judges.comparators import run_lockstep
from ppairs_lens.models.loading import load_model
from ppairs_lens.models.spec import ModelSpec
from ppairs_lens.ranking.insertion import insertion_score


def place_before(comp, data, k: int, seed: int) -> dict:
    """The path before: each task sees a plain ``compare`` (no ``prefetch``), so a round holds
    one comparison per statement."""
    def task(iid: str, j: int):
        return lambda cmp: insertion_score(iid, data.levels, data.references,
                                           lambda a, b: cmp(a, b), k=k, seed=seed + j,
                                           return_trace=True)

    return run_lockstep({iid: task(iid, j) for j, iid in enumerate(data.true)}, comp)


def comparator(bridge, trained, data, cfg, *, before: bool) -> ProbeComparator:
    settings = cfg.harvest_settings()
    runner = ContextKV(bridge, settings=settings, stop_after_reads=not before)
    return ProbeComparator(bridge, trained.probe, trained.layer, data.flat, data.meta,
                           calibrate=cfg.calibrate_probe, runner=runner, settings=settings)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    rc = ReplicationConfig()
    ap.add_argument("--statements", type=int, default=rc.insertion.max_test)
    ap.add_argument("--k", type=int, default=rc.insertion.k)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--new-only", action="store_true")
    ap.add_argument("--data", default=str(SHARED), help="the shared datasets folder")
    args = ap.parse_args()
    cfg = replace(rc.insertion,
                  path=str(Path(args.data) / "climatex" / "ipcc_statements_dataset.tsv"),
                  max_test=args.statements, k=args.k, settings=rc.settings)
    bridge = load_model(ModelSpec())
    data = insertion_data(cfg)
    t0 = time.perf_counter()
    trained = train_insertion_probe(bridge, data, cfg)
    train_s = time.perf_counter() - t0
    print(f"{len(data.true)} test statements, k={cfg.k}, probe at read-out {trained.hook} "
          f"(layer {trained.layer} of {bridge.cfg.n_layers}), trained in {train_s:.1f} s")
    paths = {"new": False} if args.new_only else {"before": True, "new": False}
    best: dict[str, float] = {}
    out: dict[str, dict] = {}
    rows: dict[str, int] = {}
    for _ in range(args.rounds):
        for name, before in paths.items():
            comp = comparator(bridge, trained, data, cfg, before=before)
            place = place_before if before else place_statements
            t = time.perf_counter()
            out[name] = place(comp, data, cfg.k, cfg.settings.seed)
            best[name] = min(best.get(name, np.inf), time.perf_counter() - t)
            rows[name] = comp.runner.n_tokens
    n = len(data.true)
    for name in paths:
        print(f"{name:>6}: {best[name]:7.1f} s  ({best[name] / n:.3f} s a statement, "
              f"{rows[name]} tokens through the model)")
    if "before" in out:
        ids = list(data.true)
        same = sum(out["before"][i][0] == out["new"][i][0] for i in ids)
        dp = max(abs(a.mean_p - b.mean_p) for i in ids for a, b in
                 zip(out["before"][i][1].steps, out["new"][i][1].steps))
        paths_same = all(out["before"][i][1].path == out["new"][i][1].path for i in ids)
        print(f"before / new: {best['before'] / best['new']:.2f}x faster; same level on "
              f"{same}/{n} statements, same search paths: {paths_same}, largest step "
              f"mean-preference difference {dp:.2e}")
    acc = np.mean([out["new"][i][0] == data.true[i] for i in data.true])
    print(f"new path: accuracy {acc:.3f} on {n} statements; with training "
          f"{train_s + best['new']:.1f} s for the whole insertion step")


if __name__ == "__main__":
    main()
