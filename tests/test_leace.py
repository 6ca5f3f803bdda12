"""LEACE erasure: after it no probe separates the classes; as hooks it is removed on exit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("concept_erasure", reason="LEACE needs ppairs-lens[erasure]")

from ppairs_lens.interventions.leace import apply_eraser, erase, fit_leace  # noqa: E402
from ppairs_lens.probes.estimators import make_probe  # noqa: E402
from tests.test_probes import planted  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_erased_pairs_carry_no_linear_label_information():
    acts, labels, _ = planted(n=400, d=12, seed=5)
    assert make_probe("mass_mean").fit(acts, labels).score(acts, labels) > 0.95
    eraser = fit_leace(acts, labels)
    erased = apply_eraser(eraser, acts.double())
    diffs = (erased[:, 0] - erased[:, 1]).numpy()
    y = np.where(labels == 1, 1.0, -1.0)
    # the class-conditional means of the differences coincide: no linear probe beats chance
    cov = ((diffs - diffs.mean(0)) * (y - y.mean())[:, None]).mean(0)
    assert np.abs(cov).max() < 1e-8 * np.abs(diffs).max()


@torch.no_grad()
def test_erase_hooks_change_only_inside_the_block(tiny):
    hook = "blocks.0.hook_resid_post"
    d = tiny.cfg.d_model
    g = torch.Generator().manual_seed(0)
    acts = torch.randn(40, 2, d, generator=g)
    labels = np.where(np.arange(40) % 2 == 0, 1, 2)
    acts[labels == 1, 0, 0] += 3.0
    eraser = fit_leace(acts, labels)
    tokens = torch.tensor([[1, 5, 9, 13]])

    def cached():
        _, cache = tiny.run_with_cache(tokens, names_filter=lambda n: n == hook)
        return cache[hook].clone()

    clean = cached()
    with erase(tiny, eraser, hook):
        erased = cached()
    torch.testing.assert_close(erased, apply_eraser(eraser, clean), atol=1e-4, rtol=1e-4)
    assert not torch.allclose(erased, clean)
    torch.testing.assert_close(cached(), clean)
