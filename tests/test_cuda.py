"""The same numbers on a CUDA device as on the CPU: harvest (shared prefixes, padding, fused and
separate branch passes), ablation hooks, zero-shot logits, the probe comparator and the sweep.

Skipped where no GPU is present (CI has none); run on a lent GPU with ``pytest tests/test_cuda.py``.
Both models are the same seeded tiny model, one moved to the GPU. Float32 matrix products on
the GPU round differently (and may use TF32 if a user enables it), hence tolerances of 1e-4.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ppairs_lens.interventions.ablation import ablation_hook_sets
from ppairs_lens.judges.comparators import ProbeComparator
from ppairs_lens.judges.zero_shot import choice_logodds_of, choice_probabilities
from ppairs_lens.activations.harvest import harvest_pairs, harvest_with_judge
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.models.tiny import tiny_model
from ppairs_lens.probes.estimators import make_probe
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.probes.sweep import fit_sweep

from .conftest import small_comparisons
from .test_comparators import LAYER, META, comparisons_of, scored_items
from .test_sweep import planted_layers

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA device here: GPU equivalence checks skipped")


@pytest.fixture(scope="module")
def gpu_tiny(tokenizer):
    return tiny_model(seed=0, tokenizer=tokenizer).to("cuda", print_details=False)


@pytest.mark.parametrize("budget", [100_000, 150])
def test_harvest_on_cuda_equals_cpu(tiny, gpu_tiny, budget):
    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(12))
    settings = HarvestSettings(token_budget=budget)
    cpu = harvest_pairs(tiny, pairs, settings)
    gpu = harvest_pairs(gpu_tiny, pairs, settings)
    assert gpu.device.type == "cpu" and gpu.dtype == torch.float32
    torch.testing.assert_close(gpu, cpu, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("budget", [100_000, 150])
def test_harvest_with_the_judges_answer_on_cuda_equals_cpu(tiny, gpu_tiny, budget):
    """The store's harvest on the GPU: left-padded tails read at the prompts' end, the
    activations and the judge's answer as on the CPU and as the judge's own run."""
    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(12))
    settings = HarvestSettings(token_budget=budget)
    gpu = harvest_with_judge(gpu_tiny, pairs, settings)
    torch.testing.assert_close(gpu.acts, harvest_pairs(tiny, pairs, settings),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(gpu.judge_logodds, choice_logodds_of(tiny, pairs),
                               rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("positions", ["all", "last"])  # "last": the unfused branch pass
def test_ablated_logits_on_cuda_equal_cpu(tiny, gpu_tiny, positions):
    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(6))
    r = torch.randn(64, generator=torch.Generator().manual_seed(3))  # a CPU direction
    out = []
    for bridge in (tiny, gpu_tiny):
        hooks, final_hooks = ablation_hook_sets(bridge, r, "full", positions)
        out.append(choice_probabilities(bridge, pairs, hooks=hooks, final_hooks=final_hooks))
    np.testing.assert_allclose(out[1], out[0], atol=1e-5)
    plain = choice_probabilities(gpu_tiny, pairs)
    assert not np.allclose(out[1], plain, atol=1e-5)  # the ablation did act on the GPU


def test_probe_comparator_on_cuda_equals_cpu(tiny, gpu_tiny):
    items = scored_items()
    ids = list(items)
    ds = comparisons_of(items, [(ids[i], ids[j]) for i in range(8) for j in range(i + 1, 8)][:16])
    acts = harvest_pairs(tiny, build_contrast_pairs(tiny.tokenizer, ds))
    probe = make_probe("mass_mean").fit(acts[:, :, LAYER], np.array(ds.labels()), layer=LAYER)
    asks = [("c1/s0", "c1/s3"), ("c1/s5", "c1/s2"), ("c2/s1", "c2/s7")]
    got = [ProbeComparator(b, probe, LAYER, items, META) for b in (tiny, gpu_tiny)]
    np.testing.assert_allclose([got[1](a, b) for a, b in asks], [got[0](a, b) for a, b in asks],
                               atol=1e-5)


def test_sweep_on_cuda_equals_cpu():
    acts, labels, _ = planted_layers(n=300, n_layers=5, d=40, seed=2, noise=0.5)
    cpu = fit_sweep(acts, labels)
    for gpu in (fit_sweep(acts, labels, device="cuda"), fit_sweep(acts.cuda(), labels)):
        for kind in cpu.directions:
            # float64 on both devices: only summation order differs
            torch.testing.assert_close(gpu.directions[kind].cpu(), cpu.directions[kind],
                                       rtol=1e-6, atol=1e-8)
        want = cpu.score(acts, labels)
        for got in (gpu.score(acts, labels), gpu.score(acts.cuda(), labels)):
            for kind, acc in got.items():
                np.testing.assert_array_equal(acc, want[kind])
