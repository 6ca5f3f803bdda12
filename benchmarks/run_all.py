"""All benchmarks in one run: ``python -m benchmarks.run_all`` (or ``make bench``)."""

from benchmarks import (
    ablation_directions,
    bench_attention,
    bench_estimate,
    bench_harvest,
    bench_judge_study,
    bench_judges,
    bench_memory,
    bench_prompts,
    bench_sweep,
)

if __name__ == "__main__":
    bench_prompts.main([])
    bench_harvest.main([])
    bench_attention.main([])
    bench_judges.main([])
    bench_judge_study.main([])
    bench_estimate.main([])
    bench_sweep.main([])
    bench_memory.main([])
    ablation_directions.main([])
