"""A probe kind is one registry entry (docs/architecture.md, "Adding a probe kind"): the
class below is the whole of a new kind, and both a probe fitted alone and the layer sweep
use it, with the same direction at every layer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ppairs_lens.errors import ProbeError
from ppairs_lens.probes.estimators import (
    KINDS,
    PROBE_KINDS,
    DirectionBatch,
    ScaledDirectionProbe,
    make_probe,
    register,
)
from ppairs_lens.probes.sweep import fit_sweep


class SignedMeanProbe(ScaledDirectionProbe):
    """The worked example: the mean of the differences, each signed by its label."""

    kind = "signed_mean"
    label = "signed mean"
    colour = "#8c564b"
    in_default_sweep = False

    @classmethod
    def directions(cls, batch: DirectionBatch, **params):
        sign = (2 * batch.y - 1).to(batch.diffs.dtype)
        v = torch.einsum("n,lnd->ld", sign, batch.diffs)
        return v / v.norm(dim=-1, keepdim=True), {}


@pytest.fixture
def new_kind():
    register(SignedMeanProbe)
    try:
        yield SignedMeanProbe.kind
    finally:
        KINDS.pop(SignedMeanProbe.kind)


def _planted(n=60, layers=3, d=16, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(1, 3, n)
    w = rng.standard_normal(d)
    x = rng.standard_normal((n, 2, layers, d))
    x[:, 0] += np.where(y == 1, 1.0, -1.0)[:, None, None] * w
    return x, y


def test_a_new_kind_is_one_entry_fitted_alone_and_in_the_sweep_alike(new_kind):
    x, y = _planted()
    sweep = fit_sweep(x, y, kinds=("supervised", new_kind))
    for layer in range(x.shape[2]):
        alone = make_probe(new_kind).fit(x[:, :, layer], y)
        np.testing.assert_allclose(sweep.directions[new_kind][layer].numpy(), alone.direction_,
                                   atol=1e-10)
        assert alone.score(x[:, :, layer], y) > 0.9
    assert new_kind not in PROBE_KINDS                 # not in the default sweep
    assert KINDS[new_kind].label == "signed mean"


def test_a_kind_registered_twice_or_unknown_is_refused(new_kind):
    with pytest.raises(ProbeError, match="registered twice"):
        register(SignedMeanProbe)
    KINDS.pop(new_kind)
    with pytest.raises(ProbeError, match="unknown probe kind 'signed_mean'"):
        fit_sweep(*_planted(), kinds=(new_kind,))
    register(SignedMeanProbe)                         # the fixture removes it again


@pytest.mark.parametrize("kind", ["pca", "mass_mean", "ccs"])
def test_each_builtin_kind_fitted_alone_equals_the_sweep(kind):
    x, y = _planted(n=40, layers=2, d=8, seed=1)
    sweep = fit_sweep(x, y, kinds=(kind,))
    for layer in range(2):
        alone = make_probe(kind).fit(x[:, :, layer], y)
        # CCS is gradient descent from seeded starts: alike to its optimiser's tolerance
        np.testing.assert_allclose(sweep.directions[kind][layer].numpy(), alone.direction_,
                                   atol=1e-9 if kind != "ccs" else 1e-4)
