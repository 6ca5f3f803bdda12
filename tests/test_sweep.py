"""Batched all-layer probe fitting against the single-layer estimators and scikit-learn."""

from __future__ import annotations

import copy
import dataclasses
import json
import warnings

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression

from ppairs_lens.activations.pair_info import PairInfo
from ppairs_lens.activations.store_meta import StoreMeta
from ppairs_lens.errors import ProbeError
from ppairs_lens.probes.estimators import PROBE_KINDS, SupervisedProbe, make_probe
from ppairs_lens.probes.features import contrast_features, side_means
from ppairs_lens.probes.logistic import batched_logistic_regression
from ppairs_lens.probes.sweep import fit_sweep
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.io.records import record_data


def planted_layers(n: int = 600, n_layers: int = 4, d: int = 24, *, seed: int = 0,
                   noise: float = 1.0, nuisance: float = 20.0, aniso: float = 0.3):
    """``[n, 2, layer, d]`` activations: a per-layer planted direction whose strength grows
    with depth (layer 0 nearly noise), a large shared per-pair component and large side
    offsets, anisotropic noise (like residual streams)."""
    rng = np.random.default_rng(seed)
    r = rng.normal(size=(n_layers, d))
    r /= np.linalg.norm(r, axis=1, keepdims=True)
    s = rng.choice([-1.0, 1.0], size=n, p=[0.4, 0.6])            # unbalanced classes
    strength = np.linspace(0.3, 3.0, n_layers)[None, :, None]
    scales = np.exp(aniso * rng.normal(size=(n_layers, d)))      # anisotropic noise
    base = nuisance * rng.normal(size=(n, n_layers, 1)) * rng.normal(size=(n_layers, d))
    off = nuisance * rng.normal(size=(2, n_layers, d))
    x0 = base + off[0] + 0.5 * strength * s[:, None, None] * r \
        + noise * scales * rng.normal(size=(n, n_layers, d))
    x1 = base + off[1] - 0.5 * strength * s[:, None, None] * r \
        + noise * scales * rng.normal(size=(n, n_layers, d))
    acts = torch.tensor(np.stack([x0, x1], axis=1), dtype=torch.float32)
    return acts, np.where(s > 0, 1, 2), r


@pytest.fixture(scope="module")
def data():
    acts, labels, r = planted_layers(n=900, n_layers=5, d=40, seed=1, noise=0.5)
    return acts[:600], labels[:600], acts[600:], labels[600:], r


@pytest.fixture(scope="module")
def sweep(data):
    tr_x, tr_y, *_ = data
    return fit_sweep(tr_x, tr_y, model_name="toy", layers=[10, 11, 12, 13, 14])


def test_sweep_matches_sklearn_loop_on_every_layer(data, sweep):
    """Against scikit-learn's default lbfgs (tol 1e-4, which stops short of the optimum the
    sweep reaches): nearly the same direction and accuracy."""
    tr_x, tr_y, te_x, te_y, _ = data
    acc_tr = sweep.score(tr_x, tr_y)["supervised"]
    acc_te = sweep.score(te_x, te_y)["supervised"]
    for layer in range(tr_x.shape[2]):
        x_tr, x_te = tr_x[:, :, layer].double(), te_x[:, :, layer].double()
        means = side_means(x_tr)
        lr = LogisticRegression(fit_intercept=False, class_weight="balanced", max_iter=1000
                                ).fit(contrast_features(x_tr, *means).numpy(), tr_y == 1)
        ref = lr.coef_[0] / np.linalg.norm(lr.coef_[0])
        cos = float(ref @ sweep.directions["supervised"][layer].numpy())
        assert cos > 0.99, (layer, cos)
        for x, y, acc in ((x_tr, tr_y, acc_tr), (x_te, te_y, acc_te)):
            assert abs(lr.score(contrast_features(x, *means).numpy(), y == 1) - acc[layer]) \
                <= 0.005
    assert bool(sweep.converged.all())


@pytest.mark.parametrize("shape", [(600, 40), (60, 150)], ids=["d<n", "n<d dual"])
def test_supervised_probe_alone_equals_the_sweep_at_its_layer(shape):
    """One solver: a probe fitted alone on a layer and the same layer fitted in a sweep of all
    layers (batched, chunked, sharing the Gram matrix with PCA when n < d) agree to 1e-6."""
    n, d = shape
    acts, labels, _ = planted_layers(n=n, n_layers=4, d=d, seed=8)
    sw = fit_sweep(acts, labels)
    te, _, _ = planted_layers(n=100, n_layers=4, d=d, seed=9)
    for layer in range(4):
        alone = SupervisedProbe().fit(acts[:, :, layer], labels)
        np.testing.assert_allclose(alone.coef_, sw.coef("supervised")[layer].numpy(),
                                   rtol=1e-6, atol=1e-6 * np.abs(alone.coef_).max())
        np.testing.assert_allclose(alone.direction_, sw.directions["supervised"][layer].numpy(),
                                   rtol=0, atol=1e-6)
        np.testing.assert_allclose(alone.predict_proba(te[:, :, layer])[:, 1],
                                   sw.predict_proba(te)["supervised"][layer], rtol=0, atol=1e-6)
        # the same solver's iterations; float noise at the stopping tolerance (the batched
        # products sum in another order) may take one more or one fewer
        assert abs(alone.n_iter_ - int(sw.n_iter[layer])) <= 1


@pytest.mark.parametrize("kind", ["pca", "mass_mean"])
def test_unsupervised_kinds_match_single_probes(data, sweep, kind):
    tr_x, tr_y, te_x, _, _ = data
    proba = sweep.predict_proba(te_x)[kind]
    for layer in range(tr_x.shape[2]):
        ref = make_probe(kind).fit(tr_x[:, :, layer], tr_y)
        np.testing.assert_allclose(sweep.directions[kind][layer].numpy(), ref.direction_,
                                   atol=1e-8)
        assert float(sweep.scales[kind][layer]) == pytest.approx(ref.scale_, rel=1e-8)
        np.testing.assert_allclose(proba[layer], ref.predict_proba(te_x[:, :, layer])[:, 1],
                                   atol=1e-9)


def test_sweep_recovers_planted_directions(data, sweep):
    _, _, te_x, te_y, r = data
    scores = sweep.score(te_x, te_y)
    for kind in PROBE_KINDS:
        for layer in (3, 4):                                     # the strong layers
            cos = float(sweep.directions[kind][layer].numpy() @ r[layer])
            assert cos > 0.9, (kind, layer, cos)
            assert scores[kind][layer] > 0.9


def test_to_probe_is_the_equivalent_estimator(data, sweep):
    _, _, te_x, te_y, _ = data
    proba = sweep.predict_proba(te_x)
    preds = sweep.predict(te_x)
    for kind in PROBE_KINDS:
        probe = sweep.to_probe(kind, 2)
        assert probe.layer_ == 12 and probe.model_name_ == "toy"
        assert probe.n_features_in_ == 40
        np.testing.assert_allclose(probe.predict_proba(te_x[:, :, 2])[:, 1], proba[kind][2],
                                   atol=1e-12)
        np.testing.assert_array_equal(probe.predict(te_x[:, :, 2]), preds[kind][2])
        assert probe.score(te_x[:, :, 2], te_y) == pytest.approx(
            sweep.score(te_x, te_y)[kind][2])
    assert isinstance(sweep.to_probe("supervised", -1), SupervisedProbe)
    with pytest.raises(ProbeError, match="layer 13"):
        sweep.to_probe("pca", 3).predict(te_x[:, :, 3], layer=13 + 1)
    with pytest.raises(ProbeError, match="out of range"):
        sweep.to_probe("pca", 5)


@pytest.mark.parametrize("standardize", [False, True])
def test_solvers_agree_including_dual_and_cg(standardize):
    """Primal Newton, Newton-CG and the Woodbury (n < d) form all reach sklearn's optimum
    (sklearn run to a tight tolerance: its default lbfgs stops ~1e-3 short of it), raw or
    standardised (sklearn on the features over their RMS, weights mapped back), and converge."""
    acts, labels, _ = planted_layers(n=300, n_layers=3, d=24, seed=2, aniso=1.0)
    wide, wlabels, _ = planted_layers(n=60, n_layers=2, d=150, seed=3, aniso=1.0)
    for x, y in ((acts, labels), (wide, wlabels)):
        ref = []
        for layer in range(x.shape[2]):
            xl = x[:, :, layer].double()
            feats = contrast_features(xl, *side_means(xl)).numpy()
            rms = np.sqrt(np.mean(feats ** 2)) if standardize else 1.0
            ref.append(LogisticRegression(fit_intercept=False, class_weight="balanced",
                                          tol=1e-12, max_iter=100_000).fit(feats / rms, y == 1
                                                                           ).coef_[0] / rms)
        for solver in ("newton", "newton-cg"):
            sw = fit_sweep(x, y, kinds=["supervised"], solver=solver, standardize=standardize)
            assert bool(sw.converged.all()) and sw.standardize == standardize
            for layer, coef in enumerate(ref):
                w = sw.coef("supervised")[layer].numpy()
                np.testing.assert_allclose(w, coef, rtol=1e-4, atol=1e-6 * np.abs(coef).max())


def test_batched_logistic_regression_objective_scaling():
    """C multiplies the weighted log-loss sum, as in sklearn: the gradient vanishes there."""
    rng = np.random.default_rng(4)
    x = torch.tensor(rng.normal(size=(2, 200, 5)))
    y = torch.tensor((rng.random(200) < 0.3).astype(float))
    for C in (0.01, 1.0, 100.0):
        w, _, conv = batched_logistic_regression(x, y, C)
        assert bool(conv.all())
        sw = torch.where(y > 0, 200 / (2 * y.sum()), 200 / (2 * (200 - y.sum())))
        p = torch.sigmoid(torch.einsum("lnd,ld->ln", x, w))
        grad = C * torch.einsum("lnd,ln->ld", x, sw * (p - y)) + w
        assert float(grad.abs().max()) < 1e-6


def test_degenerate_layer_is_marked_not_fatal():
    acts, labels, _ = planted_layers(n=200, n_layers=3, d=16, seed=5)
    acts[:, 0, 0] = acts[0, 0, 0]          # layer 0: every pair has the same activations
    acts[:, 1, 0] = acts[0, 1, 0]
    with pytest.warns(UserWarning, match="degenerate"):
        sw = fit_sweep(acts, labels)
    for kind in PROBE_KINDS:
        assert sw.degenerate[kind].tolist() == [True, False, False]
        proba = sw.predict_proba(acts)[kind]
        assert np.isnan(proba[0]).all() and np.isfinite(proba[1:]).all()
        assert np.isnan(sw.score(acts, labels)[kind][0])
        with pytest.raises(ProbeError, match="degenerate"):
            sw.to_probe(kind, 0)
    with pytest.raises(ProbeError, match="every layer"):
        fit_sweep(acts[:, :, :1], labels)


def test_chunking_device_and_half_precision_give_the_same_probes():
    acts, labels, _ = planted_layers(n=200, n_layers=4, d=16, seed=6)
    ref = fit_sweep(acts, labels)
    one = fit_sweep(acts, labels, layer_batch=1)
    half = fit_sweep(acts.half(), labels, layer_batch=3)
    for kind in PROBE_KINDS:
        torch.testing.assert_close(one.directions[kind], ref.directions[kind])
        cos = (half.directions[kind] * ref.directions[kind]).sum(-1)
        assert float(cos.min()) > 0.99
    np.testing.assert_allclose(one.predict_proba(acts, layer_batch=1)["pca"],
                               ref.predict_proba(acts)["pca"])


def test_sweep_refusals():
    acts, labels, _ = planted_layers(n=100, n_layers=3, d=16, seed=7)
    with pytest.raises(ProbeError, match=r"\[n, 2, layer, d\]"):
        fit_sweep(acts[:, :, 0], labels)
    with pytest.raises(ProbeError, match="unknown probe kind"):
        fit_sweep(acts, labels, kinds=["lda"])
    with pytest.raises(ProbeError, match="each class"):
        fit_sweep(acts, np.ones(100, dtype=int))
    tied = labels.copy()
    tied[5] = 0
    with pytest.raises(ProbeError, match="tie"):
        fit_sweep(acts, tied)
    bad = acts.clone()
    bad[4, 0, 2, 3] = float("inf")
    with pytest.raises(ProbeError, match=r"non-finite.*\[2\]"):
        fit_sweep(bad, labels)
    with pytest.raises(ProbeError, match="3 layer labels"):
        fit_sweep(acts[:, :, :2], labels, layers=[1, 2, 3])
    sw = fit_sweep(acts, labels, model_name="a")
    with pytest.raises(ProbeError, match=r"d_model=16.*d_model=8"):
        sw.predict_proba(acts[..., :8])
    with pytest.raises(ProbeError, match="3 layers.*2 layers"):
        sw.predict_proba(acts[:, :, :2])
    with pytest.raises(ProbeError, match="'a'.*'b'"):
        sw.predict_proba(acts, model_name="b")
    with pytest.raises(ProbeError, match="no 'pca'"):
        fit_sweep(acts, labels, kinds=["supervised"]).to_probe("pca", 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")       # a healthy sweep raises no warnings
        fit_sweep(acts, labels)


def test_kernel_newton_reaches_the_primal_optimum():
    """n < d runs Newton in the span of the data (kernel only, float32 systems while they
    work): the returned weights still satisfy the primal optimality condition to the
    tolerance, also for nearly separable data with weak regularisation (large weights) and
    for huge activations, where float32 systems fail and float64 takes over."""
    rng = np.random.default_rng(5)
    y = torch.tensor((rng.random(40) < 0.5).astype(float))
    for C, scale in ((0.1, 1), (1.0, 1), (1000.0, 1), (1e6, 1), (1.0, 1e4)):
        x = torch.tensor(rng.normal(size=(3, 40, 120))) * scale
        w, it, conv = batched_logistic_regression(x, y, C, solver="newton")
        assert bool(conv.all())
        sw = torch.where(y > 0, 40 / (2 * y.sum()), 40 / (2 * (40 - y.sum())))
        grad = lambda v: torch.einsum("lnd,ln->ld", x, C * sw * (torch.sigmoid(
            torch.einsum("lnd,ld->ln", x, v)) - y)) + v
        g0 = grad(torch.zeros_like(w)).norm(dim=-1)
        assert (grad(w).norm(dim=-1) <= 1e-7 * g0).all(), (C, it)


# ---- the layer-sweep analysis: baselines, validation-chosen layers, paired summaries -------

def _planted_store(path, pairs: list[PairInfo], *, n_layers: int = 3, d: int = 16, seed: int = 0):
    """A store whose activations carry each pair's label along a planted direction that
    strengthens with depth."""
    from ppairs_lens.activations.store import ActivationStore

    rng = np.random.default_rng(seed)
    s = np.array([1.0 if p.label == 1 else -1.0 for p in pairs])
    r = rng.normal(size=(n_layers, d))
    r /= np.linalg.norm(r, axis=1, keepdims=True)
    strength = np.linspace(0.2, 3.0, n_layers)[None, :, None]
    x = rng.normal(size=(len(pairs), 2, n_layers, d))
    x[:, 0] += 0.5 * strength * s[:, None, None] * r
    x[:, 1] -= 0.5 * strength * s[:, None, None] * r
    meta = {"model": "toy", "dataset": pairs[0].pair_id.split(":")[0],
            "dataset_fingerprint": "x", "template_hash": "t", "dtype": "float32",
            "hook_names": [f"blocks.{i}.hook_resid_post" for i in range(n_layers)],
            "d_model": d, "shard_size": len(pairs)}
    store = ActivationStore.create(path, StoreMeta.from_json(meta), pairs)
    store.write_shard(0, torch.tensor(x, dtype=torch.float32))
    return ActivationStore.open(path)


def _context_pairs(n_ctx: int = 50, seed: int = 0) -> list[PairInfo]:
    """Contexts of 4 scored items, all 6 pairs each, random item order."""
    rng = np.random.default_rng(seed)
    out = []
    for c in range(n_ctx):
        scores = rng.permutation(4).astype(float)
        for i in range(4):
            for j in range(i + 1, 4):
                a, b = (i, j) if rng.random() < 0.5 else (j, i)
                out.append(PairInfo(f"ctx:{c}:{a}|{b}", 1 if scores[a] > scores[b] else 2,
                                    f"c{c}", f"c{c}", f"S{a}", f"S{b}", scores[a], scores[b],
                                    int(rng.integers(50, 150)), int(rng.integers(50, 150))))
    return out


def _item_pairs(n: int = 700, n_items: int = 60, seed: int = 1) -> list[PairInfo]:
    """Pairs among ranked items without contexts; the better item is the longer one."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        a, b = rng.choice(n_items, size=2, replace=False)
        out.append(PairInfo(f"items:{k}", 1 if a < b else 2, f"items:{k}", f"items:{k}",
                            f"w{a}", f"w{b}", None, None, 200 - int(a), 200 - int(b)))
    return out


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    from analyses.layer_sweep import PairScores, SweepConfig, run_sweep

    tmp = tmp_path_factory.mktemp("sweep")
    ctx_pairs = _context_pairs()
    stores = [_planted_store(tmp / "ctx", ctx_pairs),
              _planted_store(tmp / "items", _item_pairs(), seed=1)]
    # A judge right on 3 pairs in 4, known for every other pair only.
    judge = {p.pair_id: (0.8 if (p.label == 1) == (k % 8 != 0) else 0.2)
             for k, p in enumerate(ctx_pairs) if k % 2 == 0}
    cfg = SweepConfig(stores=[str(s.path) for s in stores], settings=EvalSettings(n_boot=50))
    before = copy.deepcopy(cfg)
    res = run_sweep(stores, tmp / "out", cfg,
                    judges=PairScores({"ctx": {"zero_shot": judge}}))
    assert cfg == before  # the judges are an input: nothing is written back into the config
    return res, tmp / "out", judge


def test_sweep_rows_carry_baselines_judges_and_validation_scores(swept):
    res, out, judge = swept
    rows = res.table()
    by = lambda ds, kind, metric="accuracy": [r for r in rows if r["dataset"] == ds  # noqa: E731
                                              and r["kind"] == kind and r["metric"] == metric]
    for ds, split in (("ctx", "context"), ("items", "item")):
        assert {r["split_used"] for r in rows if r["dataset"] == ds} == {split}
        for kind in PROBE_KINDS:
            rs = by(ds, kind)
            assert [r["layer"] for r in rs] == [0, 1, 2]
            assert all(0.0 <= r["val_value"] <= 1.0 for r in rs)
        for kind in ("memorisation", "length") if ds == "ctx" else ("length",):
            (b,) = by(ds, kind)
            assert b["layer"] == -1 and b["hook"] == "" and b["predictor"]
            assert b["lo"] <= b["value"] <= b["hi"]
    # Contexts of 4 scored items rank; pairs without contexts do not (Spearman = 2 acc - 1).
    assert by("ctx", "supervised", "spearman") and not by("items", "supervised", "spearman")
    assert by("ctx", "length", "spearman")
    # Held-out items are unseen: memorisation knows nothing (n/a, no row of constant 0.5s);
    # length decides in "items".
    assert not by("items", "memorisation")
    assert by("items", "length")[0]["value"] == 1.0
    (zs,) = by("ctx", "zero_shot")
    n_test = by("ctx", "supervised")[0]["n_test"]
    assert 0 < zs["n_test"] < n_test and 0.6 < zs["value"] < 0.9
    assert not by("items", "zero_shot")
    csv_text = (out / "layer_sweep.csv").read_text()
    assert "memorisation" in csv_text and "val_value" in csv_text.splitlines()[0]
    assert (out / "layer_sweep.png").is_file()


def test_sweep_summary_reports_the_validation_layer_and_paired_differences(swept):
    from ppairs_lens.evaluation.readout_choice import best_layers

    res, out, _ = swept
    summary = json.loads((out / "layer_sweep_summary.json").read_text())
    assert summary["entries"] == json.loads(json.dumps(res.summary()["entries"]))
    best = {(r["dataset"], r["kind"]): r for r in best_layers(res.table())}
    for e in summary["entries"]:
        rs = sorted((r for r in res.table() if r["dataset"] == e["dataset"]
                     and r["kind"] == e["kind"] and r["metric"] == "accuracy"),
                    key=lambda r: r["layer"])
        vals = [r["val_value"] for r in rs]
        assert e["layer"] == vals.index(max(vals))  # the first validation maximum
        assert [r["chosen"] for r in rs] == [r["layer"] == e["layer"] for r in rs]
        assert e["layer"] == best[e["dataset"], e["kind"]]["layer"]
        assert e["test"]["value"] == pytest.approx(rs[e["layer"]]["value"])
        want = {"length"} | ({"zero_shot", "memorisation"} if e["dataset"] == "ctx" else set())
        if e["dataset"] == "items":
            assert "nothing to memorise" in e["unavailable"]["memorisation"]
        # and every other probe kind at its own chosen read-out (supervised - unsupervised)
        want |= {f"probe:{k}" for k in {x["kind"] for x in summary["entries"]
                                         if x["dataset"] == e["dataset"]} - {e["kind"]}}
        assert set(e["minus"]) == want
        for d in e["minus"].values():
            assert d["lo"] <= d["value"] <= d["hi"]
            assert d["a"] - d["b"] == pytest.approx(d["value"])
        assert e["minus"]["length"]["n"] == e["n_test"]
    config = json.loads((out / "layer_sweep.config.json").read_text())
    assert '"split_by": "auto"' in json.dumps(config)
    # The judges' probabilities are an input of the sweep, not what it ran with: the saved
    # config holds none of them (their rows are in the table, their differences above).
    assert "p_by_pair" not in json.dumps(config) and "zero_shot" not in config["config"]


def test_judge_results_are_no_field_of_the_sweep_config(tmp_path):
    """A config says what a sweep ran with; what earlier steps found (the judges' per-pair
    probabilities) is passed beside it; a saved config that holds them is refused by name."""
    from analyses.layer_sweep import SweepConfig, pair_scores
    from ppairs_lens.errors import PPairsError
    from ppairs_lens.io.outputs import load_config

    names = {f.name for f in dataclasses.fields(SweepConfig)}
    assert not names & {"zero_shot", "judges", "few_shot", "p_by_pair"}
    old = {"config": {"stores": ["a"], "zero_shot": {"ctx": {"p_by_pair": 12}}}}
    (tmp_path / "layer_sweep.config.json").write_text(json.dumps(old))
    with pytest.raises(PPairsError, match=r"layer_sweep.config.json: field 'config' does not "
                                          r"fit SweepConfig.*zero_shot"):
        load_config(SweepConfig, tmp_path / "layer_sweep.config.json")
    entry = {"p_by_pair": {"x": 0.7}, "few_shot_p_by_pair": {"x": 0.6},
             "metrics": {"accuracy": {"value": 1.0}}, "split_used": "pair"}
    got = pair_scores({"ctx": entry})
    assert got.by_dataset == {"ctx": {"zero_shot": {"x": 0.7}, "few_shot": {"x": 0.6}}}
    assert got.of("ctx", "few_shot") == {"x": 0.6} and got.of("other", "zero_shot") == {}


def test_sweep_without_a_possible_validation_split_takes_the_fallback_and_says_so(
        tmp_path, monkeypatch):
    import analyses.layer_sweep as ls
    import ppairs_lens.evaluation.readout_choice as rc

    def impossible(*a, **k):
        raise ProbeError("no usable validation split")

    monkeypatch.setattr(rc, "validation_scores", impossible)
    store = _planted_store(tmp_path / "s", _context_pairs(n_ctx=20))
    with pytest.warns(UserWarning, match="no validation split"):
        rows = [record_data(r) for r in ls.sweep_store(
            store, ls.SweepConfig(stores=[], settings=EvalSettings(n_boot=20)))]
    from ppairs_lens.evaluation.readout_choice import best_layers

    for r in best_layers(rows):
        assert r["selected_by"].startswith("fallback") and r["layer"] == 2  # last resid_post


def test_a_sweep_with_ccs_chooses_its_readout_on_validation(tmp_path):
    import analyses.layer_sweep as ls
    from ppairs_lens.evaluation.readout_choice import best_layers
    from ppairs_lens.probes.estimators import ALL_PROBE_KINDS

    store = _planted_store(tmp_path / "s", _context_pairs(n_ctx=20))
    rows = [record_data(r) for r in ls.sweep_store(store, ls.SweepConfig(
        stores=[], kinds=ALL_PROBE_KINDS, settings=EvalSettings(n_boot=20)))]
    best = {r["kind"]: r for r in best_layers(rows)}
    assert set(best) >= set(ALL_PROBE_KINDS)
    assert best["ccs"]["selected_by"] == "validation" and best["ccs"]["value"] > 0.7
