"""Supervised probes on standardised features (C means the same at every layer) and the
bootstrap sign confidence of the label-free directions."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch

from ppairs_lens.errors import ProbeError
from ppairs_lens.probes.estimators import PCAProbe, SupervisedProbe
from ppairs_lens.probes.sign_confidence import bootstrap_weights, sign_confidence
from ppairs_lens.probes.sweep import fit_sweep


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def noisy_pairs(n: int, d: int, *, seed: int, signal: float = 0.6
                ) -> tuple[torch.Tensor, np.ndarray]:
    """``[n, 2, d]`` pairs with a weak planted direction: the L2 penalty matters."""
    rng = np.random.default_rng(seed)
    r = rng.normal(size=d)
    r /= np.linalg.norm(r)
    s = rng.choice([-1.0, 1.0], size=n)
    x0 = 0.5 * signal * s[:, None] * r + rng.normal(size=(n, d))
    x1 = -0.5 * signal * s[:, None] * r + rng.normal(size=(n, d)) + 3.0
    return torch.tensor(np.stack([x0, x1], 1)), np.where(s > 0, 1, 2)


@pytest.mark.parametrize("n, d", [(60, 40), (30, 80)])     # primal Newton; dual (n < d)
def test_scaling_a_layer_leaves_standardised_predictions_unchanged(n, d):
    """Layer 1 is layer 0 times 100. Standardised, its probe predicts exactly as layer 0's on
    the same (scaled) pairs; raw, the fixed C is a far weaker penalty there and it does not."""
    acts, labels = noisy_pairs(n, d, seed=n)
    test, _ = noisy_pairs(200, d, seed=n + 1)
    two = torch.stack([acts, 100 * acts], dim=2)
    two_test = torch.stack([test, 100 * test], dim=2)
    for standardize in (True, False):
        sw = fit_sweep(two, labels, kinds=["supervised"], standardize=standardize)
        assert bool(sw.converged.all())
        p = sw.predict_proba(two_test)["supervised"]
        gap = float(np.abs(p[0] - p[1]).max())
        if standardize:
            assert gap < 1e-8, gap
            np.testing.assert_allclose(sw.coef("supervised")[1].numpy(),
                                       sw.coef("supervised")[0].numpy() / 100, rtol=1e-6)
        else:
            assert gap > 0.05, gap
    # the single-layer estimator does the same
    a = SupervisedProbe().fit(acts, labels).predict_proba(test)
    b = SupervisedProbe().fit(100 * acts, labels).predict_proba(100 * test)
    np.testing.assert_allclose(a, b, rtol=0, atol=1e-8)
    raw_a = SupervisedProbe(standardize=False).fit(acts, labels).predict_proba(test)
    raw_b = SupervisedProbe(standardize=False).fit(100 * acts, labels).predict_proba(100 * test)
    assert np.abs(raw_a - raw_b).max() > 0.05


def test_bootstrap_weights_resample_whole_groups():
    groups = ["a", "a", "b", "c", "c", "c"]
    w = bootstrap_weights(6, groups, 500, seed=3)
    assert w.shape == (500, 6)
    np.testing.assert_array_equal(w[:, 0], w[:, 1])          # one group: drawn together
    np.testing.assert_array_equal(w[:, 3], w[:, 5])
    assert set(np.unique(w.sum(1) - w[:, 2] - 2 * w[:, 0] - 3 * w[:, 3])) == {0.0}
    assert (w[:, 0] > 0).mean() == pytest.approx(1 - (2 / 3) ** 3, abs=0.06)
    np.testing.assert_array_equal(w, bootstrap_weights(6, groups, 500, seed=3))
    assert not np.array_equal(w, bootstrap_weights(6, groups, 500, seed=4))
    np.testing.assert_array_equal(bootstrap_weights(4, None, 300, 0).sum(1), 4)
    with pytest.raises(ProbeError, match="groups"):
        bootstrap_weights(5, groups, 10, 0)
    with pytest.raises(ProbeError, match="n_boot"):
        bootstrap_weights(6, groups, 0, 0)


def test_sign_confidence_separates_decided_from_coin_flip_signs():
    rng = np.random.default_rng(0)
    y = torch.tensor(rng.integers(0, 2, 400), dtype=torch.float64)
    strong = 2 * y - 1 + 0.3 * torch.tensor(rng.normal(size=400))
    noise = torch.tensor(rng.normal(size=400))
    noise = noise * torch.sign(((noise * (y - y.mean())).sum()))   # oriented, as fitted
    conf = sign_confidence(torch.stack([strong, noise]), y, n_boot=400, seed=1)
    assert conf[0] == 1.0
    assert 0.5 <= float(conf[1]) < 0.97


def test_group_bootstrap_is_less_sure_when_pairs_repeat():
    """20 distinct pairs repeated 10 times: pairs as units count each copy as evidence."""
    rng = np.random.default_rng(2)
    y0 = np.tile([0.0, 1.0], 10)
    p0 = 0.25 * (2 * y0 - 1) + rng.normal(size=20)
    p0 *= np.sign(np.sum(p0 * (y0 - y0.mean())))
    y, proj = torch.tensor(np.repeat(y0, 10)), torch.tensor(np.repeat(p0, 10))
    groups = np.repeat(np.arange(20), 10)
    by_pair = float(sign_confidence(proj, y, None, n_boot=400, seed=0))
    by_group = float(sign_confidence(proj, y, groups, n_boot=400, seed=0))
    assert by_pair > by_group + 0.1, (by_pair, by_group)


def test_sweep_reports_sign_confidence_like_the_single_probe():
    """A layer with a planted direction along the top variance: confidence ~1; a layer whose
    top variance is a label-free axis: a sign the labels barely decide; all-zero: NaN."""
    rng = np.random.default_rng(5)
    n, d = 300, 12
    s = rng.choice([-1.0, 1.0], size=n)
    good = np.zeros((n, 2, d))
    good[:, 0, 0] = 3 * s + 0.3 * rng.normal(size=n)
    good[:, :, 1:] = rng.normal(size=(n, 2, d - 1))
    bad = rng.normal(size=(n, 2, d))
    z = rng.normal(size=n)
    sc = s - s.mean()
    z -= (z @ sc) / (sc @ sc) * sc                               # uncorrelated with s ...
    bad[:, 0, 0] = 10 * (z / z.std() + 1e-3 * sc)                # ... up to a hair: dominant
    bad[:, 0, 1] = s + rng.normal(size=n)
    flat = np.ones((n, 2, d))
    acts = torch.tensor(np.stack([good, bad, flat], axis=2))
    labels = np.where(s > 0, 1, 2)
    groups = [f"g{i // 3}" for i in range(n)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        sw = fit_sweep(acts, labels, groups=groups, seed=7)
    assert set(sw.sign_confidence) == {"pca", "mass_mean"}
    conf = sw.sign_confidence["pca"]
    assert float(conf[0]) == 1.0 and 0.4 < float(conf[1]) < 0.7 and bool(torch.isnan(conf[2]))
    assert float(sw.sign_confidence["mass_mean"][0]) == 1.0
    for layer in (0, 1):
        alone = PCAProbe(seed=7).fit(acts[:, :, layer], labels, groups=groups)
        assert alone.sign_confidence_ == pytest.approx(float(conf[layer]), abs=1e-12)
        assert sw.to_probe("pca", layer).sign_confidence_ == pytest.approx(float(conf[layer]))
    with pytest.raises(ProbeError, match="groups"):
        fit_sweep(acts[:, :, :1], labels, groups=groups[:-1])
