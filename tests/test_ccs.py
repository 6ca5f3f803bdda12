"""CCS as a fourth probe kind: finds a planted direction without labels, equals the sweep's
layer, and saves and loads like the others."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ppairs_lens.probes.estimators import ALL_PROBE_KINDS, make_probe
from ppairs_lens.probes.persistence import load_probe, save_probe
from ppairs_lens.probes.sweep import fit_sweep
from tests.test_probes import planted

pytestmark = pytest.mark.usefixtures("one_torch_thread")  # tiny Adam steps: threads only cost


@pytest.fixture(scope="module")
def data():
    acts, labels, r = planted(n=300, d=16, seed=3)
    return acts, labels, r


def test_ccs_recovers_the_planted_direction(data):
    acts, labels, r = data
    probe = make_probe("ccs").fit(acts[:200], labels[:200])
    assert abs(float(probe.direction_ @ r)) > 0.7  # the shared nuisance pulls it a little
    assert probe.score(acts[200:], labels[200:]) > 0.95
    assert probe.ccs_loss_ < 0.25 and 0.5 <= probe.sign_confidence_ <= 1
    assert probe.get_params()["n_tries"] == 5


def test_sweep_ccs_layer_equals_the_single_probe(data):
    acts, labels, _ = data
    x = torch.stack([acts, 3 * acts + 1], dim=2)[:200]
    sweep = fit_sweep(x, labels[:200], kinds=("ccs", "pca"))
    assert "ccs" in ALL_PROBE_KINDS
    for layer in range(2):
        alone = make_probe("ccs").fit(x[:, :, layer], labels[:200])
        np.testing.assert_allclose(sweep.directions["ccs"][layer].numpy(), alone.direction_,
                                   atol=1e-5)
        via = sweep.to_probe("ccs", layer)
        assert type(via) is type(alone)


def test_ccs_round_trip(data, tmp_path):
    acts, labels, _ = data
    probe = make_probe("ccs", n_epochs=100).fit(acts[:200], labels[:200])
    loaded = load_probe(save_probe(probe, tmp_path / "ccs"))
    assert loaded.kind == "ccs" and loaded.n_epochs == 100
    np.testing.assert_array_equal(loaded.predict(acts[200:]), probe.predict(acts[200:]))
