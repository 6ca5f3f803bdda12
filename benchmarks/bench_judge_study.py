"""The zero-shot judge study with and without the answers the harvest kept.

A harvest reads, at each pair's last prompt token, the zero-shot judge's answer to the items'
own order (its store keeps it: ``ActivationStore.judge_logodds``), so
:func:`ppairs_lens.judges.study.judge_study` runs only the swapped order. This benchmark
harvests the main job's ``--quick`` datasets once, then times the study on those stores as
they are and on the same stores with the kept answers hidden (every prompt run, as for a
store written before they were kept), alternating for ``--rounds`` rounds, best kept; it
checks that both give the same answers (float error) and prints the ratio.

Run: ``python -m benchmarks.bench_judge_study [--rounds 2]`` (needs ../shared/datasets).
"""

from __future__ import annotations

import argparse
import tempfile

import numpy as np

from benchmarks.common import SHARED, timed
from ppairs_lens.activations.pipeline import ensure_stores
from analyses.replication.config import replication_config
from analyses.replication.sets import replication_datasets
from ppairs_lens.evaluation.protocol import PAPER_TEST_SIZE, EvalSettings
from ppairs_lens.judges.study import JudgeStudySettings, judge_study
from ppairs_lens.models.loading import load_model


class WithoutKeptAnswers:
    """A store as one written before harvests kept the judge's answers."""

    def __init__(self, store):
        self._store = store

    def __getattr__(self, name):
        return getattr(self._store, name)

    def judge_logodds(self):
        return None


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args(argv)
    if not SHARED.is_dir():
        print(f"bench_judge_study skipped: {SHARED} is missing (needs ../shared/datasets)")
        return {}
    model = load_model()
    datasets = list(replication_datasets(SHARED, replication_config("quick").sizes, log=lambda _: None)
                    .values())
    settings = JudgeStudySettings(EvalSettings(test_size=PAPER_TEST_SIZE), train_pairs=4,
                                  allure=None)
    with tempfile.TemporaryDirectory() as root:
        stores = ensure_stores(model, datasets, root, progress=False)
        old = [WithoutKeptAnswers(s) for s in stores]
        t_kept, t_all = float("inf"), float("inf")
        for _ in range(args.rounds):  # alternate, so a slow spell hits both
            t, kept = timed(lambda: judge_study(model, stores, datasets, settings,
                                                log=lambda _: None))
            t_kept = min(t_kept, t)
            t, every = timed(lambda: judge_study(model, old, datasets, settings,
                                                 log=lambda _: None))
            t_all = min(t_all, t)
    dz = max(float(np.max(np.abs(kept[n].forms.paper - every[n].forms.paper))) for n in kept)
    run = sum(j.n_prompts["zero_shot_run"] for j in kept.values())
    total = sum(j.n_prompts["zero_shot"] for j in kept.values())
    print(f"[judge study] {len(datasets)} --quick datasets, {total} prompts: every prompt run "
          f"{t_all:.1f} s; with the harvest's answers {run} run, {t_kept:.1f} s: "
          f"{t_all / t_kept:.2f}x faster (max |dp| {dz:.1e})")
    return {"every_prompt_s": t_all, "kept_s": t_kept, "speedup": t_all / t_kept,
            "prompts": total, "prompts_run": run, "max_dp": dz}


if __name__ == "__main__":
    main()
