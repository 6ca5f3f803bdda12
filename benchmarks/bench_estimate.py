"""How far the commands' model-time estimate is from the time the work then takes.

``sweep`` and ``shift`` time a few prompts of each step kind, then estimate every step from
its planned tokens (:func:`ppairs_lens.judges.run_estimate.estimate_run`). This benchmark
plans a harvest and each judge form on a pairwise file the tests do not use (LLMBar's
CaseStudy Normal, ``--max-pairs`` of it), measures the rates as the commands do (on a fresh
measurement, none remembered), then runs each step and prints, per step, the estimate, the
time it took and their ratio, with whether it is within ±25%.

Run: ``python -m benchmarks.bench_estimate [--max-pairs 60]`` (the embedded model; needs
../shared/datasets).
"""

from __future__ import annotations

import argparse
import tempfile
import time

from benchmarks.common import SHARED
from ppairs_lens.activations.pipeline import ensure_store
from ppairs_lens.data.specs import load_dataset_spec
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.judges.held_out import judge_held_out
from ppairs_lens.judges.run_estimate import estimate_run, plan_held_out_run
from ppairs_lens.models.loading import load_model

#: The estimate is useful when the time taken is within this share of it either way.
TOLERANCE = 0.25
FORMS = ("zero_shot", "few_shot")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-pairs", type=int, default=60)
    args = ap.parse_args(argv)
    path = SHARED / "llmbar" / "CaseStudy_Normal" / "dataset.json"
    if not path.is_file():
        print(f"bench_estimate skipped: {path} is missing (needs ../shared/datasets)")
        return {}
    model = load_model()
    d = load_dataset_spec(f"{path}@CaseStudy Normal", max_pairs=args.max_pairs, seed=0)
    split = EvalSettings(test_size=0.5).split_kwargs()
    with tempfile.TemporaryDirectory() as root:
        steps = plan_held_out_run(model, [d], root, split=split, forms=FORMS)
        est = estimate_run(model, steps)
        took: dict[str, float] = {}
        t = time.perf_counter()
        store = ensure_store(model, d, root, progress=False)
        took["harvest"] = time.perf_counter() - t
        last = [time.perf_counter()]

        def done(form, _result) -> None:
            took[form] = time.perf_counter() - last[0]
            last[0] = time.perf_counter()

        last[0] = time.perf_counter()
        judge_held_out(model, store, d, **split, forms=FORMS, on_done=done)
    print(f"model-time estimate against the time taken: {d.name}, {len(d.records)} pairs, "
          f"rates timed on a few prompts in {est.timing_seconds:.1f} s")
    out = {}
    for s in steps:
        e, a = est.step_seconds(s), took.get(s.kind)
        if a is None or e <= 0:
            continue
        ratio = a / e
        ok = abs(ratio - 1) <= TOLERANCE
        out[s.kind] = {"estimate_s": e, "took_s": a, "ratio": ratio, "within": ok}
        print(f"  {s.kind:10s} {len(s.prompts):4d} prompts  estimated {e:7.1f} s  took "
              f"{a:7.1f} s  x{ratio:.2f}  {'within' if ok else 'outside'} ±{TOLERANCE:.0%}")
    return out


if __name__ == "__main__":
    main()
