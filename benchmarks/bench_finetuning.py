"""The main job's finetuning step on the demo's ROCStories store, at the sizes it had and the
sizes it has now, side by side in one process (same model, same store).

Before: 20 test pairs, a label curve of (4, 8, 16) for LoRA and full finetuning (a test read
per point), the zero-shot judge asked again. Now (``ReplicationConfig.finetuning``): the
sizes declared there, the zero-shot judge's log-odds handed in as the judges step hands them
(read here once, outside the clock). Prints each run's seconds, the ratio, and how many test
pairs each scored.

Run: ``python -m benchmarks.bench_finetuning --store STORE_DIR [--data ../shared/datasets]``
(``STORE_DIR``: a demo run's ``stores/SmolLM2-135M-Instruct/rocstories-*``; opened, not written).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

from analyses import finetuning as F
from analyses.replication.run import step_configs
from analyses.replication.config import ReplicationConfig
from benchmarks.common import SHARED
from ppairs_lens.activations.store import ActivationStore
from analyses.replication.sets import replication_datasets
from ppairs_lens.judges.zero_shot import zero_shot
from ppairs_lens.models.loading import load_model
from ppairs_lens.models.spec import ModelSpec


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", required=True)
    ap.add_argument("--data", default=str(SHARED))
    args = ap.parse_args()
    rc = ReplicationConfig()
    ds = replication_datasets(Path(args.data), rc.sizes, seed=rc.settings.seed)["rocstories"]
    store = ActivationStore.open(args.store)
    bridge = load_model(ModelSpec())
    now = step_configs(rc, {"rocstories": str(store.path)}, {"rocstories": ds.kind})["finetuning"]
    before = replace(now, max_test=20, curve_sizes=(4, 8, 16), curve_sizes_full=None)
    template, _, _, test = F.prepare_comparison(bridge, store, ds, now)
    res = zero_shot(bridge, test, template)  # what the judges step has already
    known = dict(zip([r.pair_id for r in test.records], map(float, res.z)))
    times = {}
    for name, cfg, z in (("before", before, None), ("now", now, known)):
        t0 = time.perf_counter()
        rows, _, _ = F.compare_store(bridge, store, ds, cfg, z)
        times[name] = time.perf_counter() - t0
        print(f"{name:6s} test {rows[0].n_test:3d} curve {cfg.curve_sizes} "
              f"{times[name]:7.1f} s  " + "  ".join(f"{r.method} {r.accuracy:.3f}"
                                                     for r in rows))
    print(f"ratio before / now: {times['before'] / times['now']:.2f}")


if __name__ == "__main__":
    main()
