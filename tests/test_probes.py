"""Single-layer contrast features and probes on synthetic activations with a planted direction."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from ppairs_lens.errors import ProbeError
from ppairs_lens.probes import principal
from ppairs_lens.probes.estimators import fit_logistic_scale
from ppairs_lens.probes.estimators import (
    PROBE_KINDS,
    MassMeanProbe,
    PCAProbe,
    SupervisedProbe,
    make_probe,
)
from ppairs_lens.probes.features import (
    contrast_features,
    drop_ties,
    labels_to_targets,
    side_means,
)
from ppairs_lens.probes.principal import top_principal_direction


def _unit(rng: np.random.Generator, d: int) -> np.ndarray:
    v = rng.normal(size=d)
    return v / np.linalg.norm(v)


def planted(n: int = 800, d: int = 32, *, strength: float = 2.0, noise: float = 0.5,
            nuisance: float = 30.0, seed: int = 0):
    """Pairs whose sides differ along a planted unit direction ``r`` by the label's sign.

    x0 = base + o0 + 0.5*strength*s*r + noise,  x1 = base + o1 - 0.5*strength*s*r + noise,
    s = +1 (label 1) / -1 (label 2). ``base`` is a large per-pair component shared by both
    sides (cancels in the difference); ``o0`` / ``o1`` are large side offsets (the "1" vs "2"
    token), so the *uncentred* difference has a big constant component that only centring by
    the side means removes.
    """
    rng = np.random.default_rng(seed)
    r = _unit(rng, d)
    s = rng.choice([-1.0, 1.0], size=n)
    base = nuisance * rng.normal(size=(n, 1)) * _unit(rng, d) + rng.normal(size=(n, d))
    o0, o1 = nuisance * _unit(rng, d), nuisance * _unit(rng, d)
    x0 = base + o0 + 0.5 * strength * s[:, None] * r + noise * rng.normal(size=(n, d))
    x1 = base + o1 - 0.5 * strength * s[:, None] * r + noise * rng.normal(size=(n, d))
    acts = torch.tensor(np.stack([x0, x1], axis=1), dtype=torch.float32)
    return acts, np.where(s > 0, 1, 2), r


# ---------------------------------------------------------------------------- features

def test_side_means_and_features_single_and_all_layers():
    acts, _, _ = planted(n=50, d=8)
    mp, mn = side_means(acts)
    assert mp.shape == mn.shape == (8,)
    feats = contrast_features(acts, mp, mn)
    assert feats.shape == (50, 8)
    torch.testing.assert_close(feats.mean(0), torch.zeros(8), atol=1e-4, rtol=0)
    # Swapping the sides (and their means) negates the features.
    torch.testing.assert_close(contrast_features(acts.flip(1), mn, mp), -feats)
    all_layers = torch.stack([acts, 2 * acts, acts + 1], dim=2)         # [n, 2, 3, d]
    mp3, mn3 = side_means(all_layers)
    assert mp3.shape == (3, 8)
    f3 = contrast_features(all_layers, mp3, mn3)
    assert f3.shape == (50, 3, 8)
    torch.testing.assert_close(f3[:, 0], feats)
    torch.testing.assert_close(f3[:, 1], 2 * feats)
    torch.testing.assert_close(f3[:, 2], feats)
    with pytest.raises(ProbeError, match="d_model 8 vs 7"):
        contrast_features(acts, mp[:7], mn[:7])
    with pytest.raises(ProbeError, match=r"\[n, 2, d\]"):
        side_means(torch.zeros(5, 3, 8))


def test_labels_to_targets_and_refusals():
    assert labels_to_targets([1, 2, 2, 1]).tolist() == [1, 0, 0, 1]
    assert labels_to_targets(np.array([1.0, 2.0])).tolist() == [1, 0]
    assert labels_to_targets(torch.tensor([2, 1])).dtype == torch.int64
    with pytest.raises(ProbeError, match="tie"):
        labels_to_targets([1, 0, 2])
    for bad in ([1, 3], [1.5, 1], [True, False], ["1", "2"]):
        with pytest.raises(ProbeError):
            labels_to_targets(bad)


def test_drop_ties_keeps_alignment_and_types():
    acts = torch.arange(5 * 2 * 3, dtype=torch.float32).reshape(5, 2, 3)
    labels = [1, 0, 2, 0, 1]
    ctx = np.array(["a", "b", "c", "d", "e"])
    ids = ["p0", "p1", "p2", "p3", "p4"]
    a, lab, c, i = drop_ties(acts, labels, ctx, ids)
    assert isinstance(a, torch.Tensor) and a.shape == (3, 2, 3)
    torch.testing.assert_close(a, acts[[0, 2, 4]])
    assert lab == [1, 2, 1] and isinstance(lab, list)
    assert c.tolist() == ["a", "c", "e"] and isinstance(c, np.ndarray)
    assert i == ["p0", "p2", "p4"]
    with pytest.raises(ProbeError, match="rows"):
        drop_ties(acts, labels, ids[:3])


# ---------------------------------------------------------------------------- recovery

@pytest.mark.parametrize("kind", PROBE_KINDS)
def test_probe_recovers_planted_direction(kind):
    acts, labels, r = planted(n=1200, d=32, seed=1)
    tr, te = slice(0, 800), slice(800, None)
    probe = make_probe(kind).fit(acts[tr], labels[tr])
    assert probe.direction_.shape == (32,)
    assert np.linalg.norm(probe.direction_) == pytest.approx(1.0)
    assert float(probe.direction_ @ r) > 0.9          # sign too: oriented towards item 1
    assert probe.score(acts[te], labels[te]) > 0.95
    proba = probe.predict_proba(acts[te])
    assert proba.shape == (400, 2)
    np.testing.assert_allclose(proba.sum(1), 1.0)
    assert probe.classes_.tolist() == [2, 1]
    pred = probe.predict(acts[te])
    np.testing.assert_array_equal(pred, np.where(proba[:, 1] >= 0.5, 1, 2))
    assert probe.score(acts[te], labels[te]) == pytest.approx(np.mean(pred == labels[te]))
    np.testing.assert_allclose(probe.coef_, probe.scale_ * probe.direction_)


def test_centring_matters():
    """Uncentred differences are dominated by the side offsets; the probes' are not."""
    acts, labels, r = planted(n=800, d=32, seed=2)
    raw = (acts[:, 0] - acts[:, 1]).double().numpy()
    top_raw = np.linalg.svd(raw, full_matrices=False)[2][0]
    assert abs(top_raw @ r) < 0.5
    assert PCAProbe().fit(acts, labels).direction_ @ r > 0.9


@pytest.mark.parametrize("standardize", [False, True])
def test_supervised_is_sklearn_logistic_regression_on_centred_differences(standardize):
    """The probe runs to convergence (Newton, tol 1e-9): it is scikit-learn's estimator with
    the same settings run to convergence too, by its own Newton solver (lbfgs stops short:
    at its default tol=1e-4 by ~1e-2, and even at tol=1e-12 by ~1e-6 relative here).
    Standardised, it is that estimator on the differences divided by their training RMS,
    its weights mapped back to the raw differences."""
    acts, labels, _ = planted(n=400, d=16, seed=3)
    probe = SupervisedProbe(C=0.3, standardize=standardize).fit(acts, labels)
    x = acts.double()
    feats = contrast_features(x, *side_means(x)).numpy()
    rms = np.sqrt(np.mean(feats ** 2)) if standardize else 1.0
    lr = LogisticRegression(C=0.3, fit_intercept=False, class_weight="balanced",
                            solver="newton-cholesky", tol=1e-12, max_iter=1000
                            ).fit(feats / rms, (labels == 1).astype(int))
    np.testing.assert_allclose(probe.coef_, lr.coef_[0] / rms, rtol=1e-6, atol=1e-9)
    assert probe.intercept_ == 0.0
    np.testing.assert_allclose(probe.decision_function(acts), lr.decision_function(feats / rms),
                               rtol=1e-6, atol=1e-9)


def test_scale_is_a_calibrated_one_d_fit():
    """The 1-D fit matches an (almost unregularised) sklearn logistic regression."""
    rng = np.random.default_rng(4)
    proj = rng.normal(size=(2000,))
    y = (rng.random(2000) < 1 / (1 + np.exp(-1.7 * proj))).astype(float)
    s = float(fit_logistic_scale(torch.from_numpy(proj), torch.from_numpy(y)))
    # lam=1 on the standardised scale is sklearn C = 1 / var(proj) on the raw one.
    ref = LogisticRegression(C=1.0 / proj.var(), fit_intercept=False, tol=1e-12).fit(
        proj[:, None], y)
    assert s == pytest.approx(float(ref.coef_[0, 0]), rel=1e-4)
    assert s == pytest.approx(1.7, abs=0.25)


def test_shuffled_labels_give_chance_on_held_out_data():
    acts, labels, _ = planted(n=6000, d=32, seed=5)
    shuffled = np.random.default_rng(0).permutation(labels)
    probe = SupervisedProbe().fit(acts[:3000], shuffled[:3000])
    assert abs(probe.score(acts[3000:], shuffled[3000:]) - 0.5) < 0.1


def test_applies_training_means_to_test_data():
    acts, labels, _ = planted(n=600, d=16, seed=6)
    train, test = acts[:400], acts[400:].double()
    probe = MassMeanProbe().fit(train, labels[:400])
    mu_pos, mu_neg = probe.mu_pos_.copy(), probe.mu_neg_.copy()
    np.testing.assert_array_equal(mu_pos, train[:, 0].double().mean(0).numpy())
    # Test features are the test activations minus the *training* means, exactly.
    expected = ((test[:, 0] - torch.from_numpy(mu_pos))
                - (test[:, 1] - torch.from_numpy(mu_neg))).numpy()
    np.testing.assert_array_equal(probe.transform(test), expected)
    # Shifting the test set moves its features by the shift: nothing is re-centred on it.
    c0, c1 = torch.randn(16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)
    shifted = test + torch.stack([c0, c1])[None]
    np.testing.assert_allclose(probe.transform(shifted) - probe.transform(test),
                               np.broadcast_to((c0 - c1).numpy(), (200, 16)), atol=1e-10)
    dec = probe.decision_function(shifted)
    np.testing.assert_allclose(dec - probe.decision_function(test),
                               float((c0 - c1).numpy() @ probe.coef_), atol=1e-8)
    np.testing.assert_array_equal(probe.mu_pos_, mu_pos)      # applying never refits
    np.testing.assert_array_equal(probe.mu_neg_, mu_neg)


def test_accepts_numpy_and_is_an_sklearn_estimator():
    acts, labels, _ = planted(n=300, d=8, seed=7)
    probe = SupervisedProbe(C=2.0).fit(acts.numpy(), labels)
    np.testing.assert_allclose(probe.predict_proba(acts.numpy()), probe.predict_proba(acts))
    assert probe.get_params()["C"] == 2.0
    fresh = clone(probe)
    assert not hasattr(fresh, "direction_") and fresh.C == 2.0
    with pytest.raises(ProbeError, match="not fitted"):
        fresh.predict(acts)


# ---------------------------------------------------------------------------- refusals

def test_refuses_other_d_model_layer_and_model():
    acts, labels, _ = planted(n=200, d=16, seed=8)
    probe = PCAProbe().fit(acts, labels, layer=5, model_name="m-a")
    assert (probe.layer_, probe.model_name_) == (5, "m-a")
    other, _, _ = planted(n=20, d=12, seed=9)
    with pytest.raises(ProbeError, match=r"d_model=16.*d_model=12"):
        probe.predict_proba(other)
    with pytest.raises(ProbeError, match="layer 5.*layer 6"):
        probe.predict(acts, layer=6)
    with pytest.raises(ProbeError, match="m-a.*m-b"):
        probe.score(acts, labels, model_name="m-b")
    probe.predict(acts, layer=5, model_name="m-a")            # matching metadata is fine
    with pytest.raises(ProbeError, match="one layer"):
        probe.predict(torch.stack([acts, acts], dim=2))


@pytest.mark.parametrize("kind", PROBE_KINDS)
def test_refuses_too_few_per_class(kind):
    acts, _, _ = planted(n=30, d=8, seed=10)
    with pytest.raises(ProbeError, match="each class"):
        make_probe(kind).fit(acts, np.ones(30, dtype=int))
    with pytest.raises(ProbeError, match="each class"):
        make_probe(kind).fit(acts, np.r_[2, np.ones(29, dtype=int)])


@pytest.mark.parametrize("kind", PROBE_KINDS)
def test_refuses_degenerate_features(kind):
    rng = np.random.default_rng(11)
    x0 = torch.tensor(rng.normal(size=(40, 8)) * 50)
    acts = torch.stack([x0, x0 + 3.0], dim=1)          # sides differ only by a constant
    labels = np.tile([1, 2], 20)
    with pytest.raises(ProbeError, match="zero after centring"):
        make_probe(kind).fit(acts, labels)
    const = torch.ones(40, 2, 8)
    with pytest.raises(ProbeError, match="zero after centring"):
        make_probe(kind).fit(const, labels)


def test_refuses_non_finite_ties_and_bad_kinds():
    acts, labels, _ = planted(n=50, d=8, seed=12)
    bad = acts.clone()
    bad[3, 1, 2] = float("nan")
    with pytest.raises(ProbeError, match="non-finite.*pair index 3"):
        SupervisedProbe().fit(bad, labels)
    probe = SupervisedProbe().fit(acts, labels)
    with pytest.raises(ProbeError, match="non-finite"):
        probe.predict(bad)
    tied = labels.copy()
    tied[0] = 0
    with pytest.raises(ProbeError, match="drop_ties"):
        SupervisedProbe().fit(acts, tied)
    with pytest.raises(ProbeError, match="labels"):
        SupervisedProbe().fit(acts, labels[:-1])
    with pytest.raises(ProbeError, match="unknown probe kind"):
        make_probe("lda")
    with pytest.raises(ProbeError, match="bad parameters"):
        make_probe("pca", C=1.0)


def test_supervised_refuses_an_intercept_and_warns_when_not_converged():
    acts, labels, _ = planted(n=200, d=8, seed=14)
    with pytest.raises(ProbeError, match="fit_intercept"):
        SupervisedProbe(fit_intercept=True).fit(acts, labels)
    with pytest.raises(ProbeError, match="class_weight"):
        SupervisedProbe(class_weight={1: 2.0}).fit(acts, labels)
    assert 1 <= SupervisedProbe().fit(acts, labels).n_iter_ < 100
    with pytest.warns(ConvergenceWarning, match="did not converge in 1 Newton"):
        SupervisedProbe(max_iter=1).fit(acts, labels)


def test_randomized_pca_path_matches_exact():
    """Above ``exact_max`` the top component comes from seeded subspace iteration."""
    acts, labels, _ = planted(n=300, d=64, seed=13)
    x = acts.double()
    diffs = contrast_features(x, *side_means(x))
    exact = top_principal_direction(diffs)
    approx = top_principal_direction(diffs, exact_max=8)
    assert abs(float(exact @ approx)) > 1 - 1e-8
    wide = diffs[:40]                                  # n < d: the n x n Gram path
    assert abs(float(top_principal_direction(wide) @ top_principal_direction(
        wide, exact_max=8))) > 1 - 1e-6
    assert abs(float(top_principal_direction(wide) @ torch.linalg.svd(wide)[2][0])) > 1 - 1e-8


def test_top_eigenvector_arpack_path_and_exact_fallback(monkeypatch):
    """Matrices larger than ``EXACT_EIG_MAX`` get ARPACK's top eigenvector, equal to LAPACK's;
    those ARPACK cannot do (a zero matrix) are solved exactly, and tiny ones only exactly."""
    rng = np.random.default_rng(0)
    m = 3 * principal.EXACT_EIG_MAX
    q = np.linalg.qr(rng.normal(size=(3, m, m)))[0]
    vals = np.sort(rng.random((3, m)), -1) * np.array([[1.0], [1.0], [0.0]])
    vals[:, -1] = [5.0, 1.2, 0.0]           # clear gap; small gap (ratio 1.2); zero matrix
    a = torch.tensor(np.einsum("bij,bj,bkj->bik", q, vals, q))
    exact_calls = []
    real = principal.exact_top_eigenvectors
    monkeypatch.setattr(principal, "exact_top_eigenvectors",
                        lambda f: (exact_calls.append(len(f)), real(f))[1])
    principal.top_eigenvector(a[:2])
    assert exact_calls == []                  # gaps, small or not: ARPACK suffices
    v = principal.top_eigenvector(a)
    assert exact_calls == [1]                 # the zero matrix
    assert torch.isfinite(v).all()
    for b in range(2):
        ref = torch.tensor(q[b, :, -1])
        assert abs(float(v[b] @ ref)) > 1 - 1e-12
        assert abs(float(v[b].norm()) - 1) < 1e-12
    # A matrix's result does not depend on the others in its batch (one shared start vector).
    torch.testing.assert_close(principal.top_eigenvector(a[1:2])[0], v[1], rtol=0, atol=0)
    small = a[:1, :8, :8]
    exact_calls.clear()
    principal.top_eigenvector(small)
    assert exact_calls == [1]
