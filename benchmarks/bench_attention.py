"""The fused attention path against the bridge's own eager attention, on one loaded model.

What the main job runs most: a harvest that also reads the judge's answers (prefix-shared
passes over long articles and answers), then the swapped-order judge prompts. Both are timed
with the bridge's eager attention and with :mod:`ppairs_lens.models.fused_attention`,
alternating (the best of ``--rounds`` each, so a slow spell hits both), on the same pairs;
the read-outs and answers are compared.

Run: ``python -m benchmarks.bench_attention [--rounds 2]``. Needs ``../shared/datasets``
(the --quick replication's datasets); skipped with a printed reason without it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

from benchmarks.common import max_rel_err, timed
from ppairs_lens.activations.harvest import harvest_with_judge
from ppairs_lens.activations.prompts import build_contrast_pairs, default_template
from analyses.replication.config import replication_config
from analyses.replication.sets import replication_datasets
from ppairs_lens.judges.zero_shot import choice_logodds_of, swapped_dataset
from ppairs_lens.models.fused_attention import set_fused_attention
from ppairs_lens.models.loading import load_model

SHARED = Path(__file__).resolve().parents[2] / "shared" / "datasets"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    if not SHARED.is_dir():
        print(f"bench_attention skipped: {SHARED} is missing (needs ../shared/datasets)")
        return {}
    model = load_model()
    datasets = list(replication_datasets(SHARED, replication_config("quick").sizes, log=lambda _: None)
                    .values())
    pairs = [p for d in datasets
             for p in build_contrast_pairs(model.tokenizer, d, default_template(d))]
    swapped = [p for d in datasets
               for p in build_contrast_pairs(model.tokenizer, swapped_dataset(d),
                                             default_template(d))]

    def work():
        h = harvest_with_judge(model, pairs)
        return h.acts, h.judge_logodds, choice_logodds_of(model, swapped, desc="")

    best = {True: float("inf"), False: float("inf")}
    out = {}
    for _ in range(args.rounds):
        for fused in (False, True):
            n_fused = set_fused_attention(model, fused)
            t, out[fused] = timed(work)
            best[fused] = min(best[fused], t)
    err = max_rel_err(out[False][0], out[True][0])
    dld = max(float(np.max(np.abs(np.asarray(out[False][k]) - np.asarray(out[True][k]))))
              for k in (1, 2))
    n_tok = sum(len(p.prefix_ids) + 1 for p in pairs + swapped)
    print(f"[attention] {len(pairs)} pairs harvested + {len(swapped)} swapped judge prompts "
          f"(~{n_tok} prompt tokens before sharing), {n_fused} blocks: eager {best[False]:.1f} s,"
          f" fused {best[True]:.1f} s: {best[False] / best[True]:.2f}x faster (read-outs max "
          f"rel err {err:.1e}, judge log-odds max |d| {dld:.1e})")
    return {"eager_s": best[False], "fused_s": best[True],
            "speedup": best[False] / best[True], "max_rel_err": err, "max_dlogodds": dld}


if __name__ == "__main__":
    main()
