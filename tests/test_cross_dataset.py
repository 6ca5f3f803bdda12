"""Cross-dataset transfer and cosine similarity of probe directions, on planted stores."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from analyses.cross_dataset import (
    TransferConfig,
    cosine_readout,
    cosine_rows,
    fit_store,
    fit_stores,
    run_transfer,
    summarize,
    swept_kinds,
    transfer_rows,
)
from ppairs_lens.activations.pair_info import PairInfo
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.activations.store_meta import StoreMeta
from ppairs_lens.errors import ProbeError, StoreError
from ppairs_lens.evaluation.readout_choice import layer_setting
from ppairs_lens.evaluation.store_split import split_pairs
from ppairs_lens.probes.direction_similarity import random_reference
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.io.records import ABSENT, record_data

D = 32          # d_model of the synthetic stores
N = 400         # pairs per store (2 per context)
N_LAYERS = 2    # blocks; read-outs = blocks' resid_post + final norm
HOOKS = [f"blocks.{i}.hook_resid_post" for i in range(N_LAYERS)] + ["ln_final.hook_out"]


def planted_acts(direction: np.ndarray, *, seed: int, n: int = N, strength: float = 8.0,
                 nuisance: float = 10.0) -> tuple[np.ndarray, np.ndarray]:
    """``[n, 2, read-out, d]`` with ``x0 - x1 = strength * s * direction + noise`` on every
    read-out (strength growing with depth), a shared per-pair component and large
    *dataset-specific* side offsets (what the side means remove); labels 1 / 2 from ``s``."""
    rng = np.random.default_rng(seed)
    n_ro = len(HOOKS)
    s = rng.choice([-1.0, 1.0], size=n, p=[0.45, 0.55])
    gain = np.linspace(0.6, 1.0, n_ro)[None, :, None]
    base = nuisance * rng.normal(size=(n, 1, 1)) * rng.normal(size=(n_ro, D))
    off = nuisance * rng.normal(size=(2, n_ro, D))
    half = 0.5 * strength * gain * s[:, None, None] * direction
    x0 = base + off[0] + half + rng.normal(size=(n, n_ro, D))
    x1 = base + off[1] - half + rng.normal(size=(n, n_ro, D))
    return np.stack([x0, x1], axis=1).astype(np.float32), np.where(s > 0, 1, 2)


def write_store(path: Path, name: str, acts: np.ndarray, labels: np.ndarray, *,
                model: str = "toy-model", shard_size: int = 256,
                kind: str | None = None) -> ActivationStore:
    """A complete store holding ``acts`` ``[n, 2, read-out, d]``, two pairs per context."""
    n, _, n_ro, d = acts.shape
    meta = {"model": model, "dataset": name, "dataset_fingerprint": f"fp-{name}",
            "template_hash": "t0", "hook_names": HOOKS[:n_ro], "d_model": d,
            "dtype": "float32", "shard_size": shard_size, **({"kind": kind} if kind else {})}
    pairs = [{"pair_id": f"{name}:{i}", "label": int(labels[i]), "context_id": f"{name}:c{i // 2}",
              "item1_id": f"{i}a", "item2_id": f"{i}b"} for i in range(n)]
    store = ActivationStore.create(path, StoreMeta.from_json(meta),
                                   [PairInfo.from_json(p) for p in pairs])
    t = torch.from_numpy(acts)
    for k in range(store.n_shards):
        a, b = store.shard_range(k)
        store.write_shard(k, t[a:b])
    return store


def _unit(v):
    return v / np.linalg.norm(v)


CFG = dict(settings=EvalSettings(n_boot=40, seed=0), n_random=4000)


pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """Three datasets with the *same* planted direction (different noise, side offsets)."""
    root = tmp_path_factory.mktemp("shared")
    r = _unit(np.random.default_rng(100).normal(size=D))
    stores = []
    for i, name in enumerate(["alpha", "beta", "gamma"]):
        acts, labels = planted_acts(r, seed=i)
        stores.append(write_store(root / name, name, acts, labels))
    cfg = TransferConfig(stores=[str(s.path) for s in stores], **CFG)
    result = run_transfer(stores, root / "out", cfg)
    return stores, cfg, result, root


@pytest.fixture(scope="module")
def independent(tmp_path_factory):
    """Three datasets with independent random planted directions (orthogonalised: at d=32
    independent directions still overlap by ~1/sqrt(d), which alone gives above-chance
    transfer; in a model's d they are orthogonal to that precision anyway)."""
    root = tmp_path_factory.mktemp("independent")
    q, _ = np.linalg.qr(np.random.default_rng(200).normal(size=(D, 3)))
    stores = []
    for i, name in enumerate(["delta", "epsilon", "zeta"]):
        acts, labels = planted_acts(q[:, i], seed=10 + i)
        stores.append(write_store(root / name, name, acts, labels))
    cfg = TransferConfig(stores=[str(s.path) for s in stores], **CFG)
    fitted = fit_stores(stores, cfg)
    return cfg, fitted


def _between(rows, kind):
    return [r for r in rows if r["relation"] == "between_datasets" and r["kind_a"] == kind]


def _off_diag(rows, kind, center="target", metric="accuracy"):
    return [r.value for r in rows if r.kind == kind and r.center == center
            and r.metric == metric and not r.in_distribution]


def test_shared_direction_gives_high_cosine_and_full_transfer(shared):
    _, cfg, result, _ = shared
    assert cfg.kinds == ("supervised", "pca", "mass_mean", "ccs")      # CCS by default
    for kind in cfg.kinds:
        bar = 0.8 if kind == "ccs" else 0.9   # CCS's unregularised direction keeps more noise
        between = _between(result.cosine, kind)
        assert len(between) == 3
        assert all(r["abs_cos"] > bar and r["cos"] > bar for r in between), (kind, between)
        off = _off_diag(result.rows, kind)
        assert len(off) == 6 and min(off) > 0.9, (kind, off)
        s = result.per_kind[kind]
        assert s.mean_abs_cos > bar and s.off_diagonal > 0.9
        assert s.split_half_abs_cos > 0.9       # the self-agreement ceiling
        halves = [r for r in result.cosine if r["relation"] == "split_half"
                  and r["kind_a"] == kind]
        assert len(halves) == 3
        assert s.mean_abs_cos > result.random["p99"]


def test_centring_variants(shared):
    """Diagonal identical under both centrings; with dataset-specific side offsets the
    training means bias every transferred pair, the target's own means do not."""
    _, cfg, result, _ = shared
    rows = [r for r in result.rows if r.metric == "accuracy"]
    diag = {(r.train, r.kind, r.center): r.value for r in rows if r.in_distribution}
    for (ds, kind, center), v in diag.items():
        assert v == diag[(ds, kind, "train" if center == "target" else "target")]
    for kind in cfg.kinds:
        assert np.mean(_off_diag(rows, kind, "train")) < np.mean(_off_diag(rows, kind)) - 0.1
    assert all(r.headline == (r.center == "target") for r in rows)


def test_outputs_and_config_are_written(shared):
    _, cfg, result, root = shared
    out = root / "out"
    for name in ("transfer", "cosine", "cosine_distribution", "layer_cosine"):
        for ext in ("png", "svg"):
            assert (out / f"{name}.{ext}").stat().st_size > 0
    for name in ("transfer.csv", "cosine.csv", "layer_cosine.csv", "transfer_summary.json"):
        assert (out / name).is_file()
    saved = json.loads((out / "transfer.config.json").read_text())["config"]
    assert saved["layer"] is None and saved["center_target"] == "target"
    assert saved["settings"]["split_by"] == "auto" and saved["standardize"] is True
    summary = json.loads((out / "transfer_summary.json").read_text())
    assert summary["layer_rule"] == "val" and summary["split_by"] == {
        n: "context" for n in ("alpha", "beta", "gamma")}     # two pairs per context
    assert summary["transfer_layers"] == result.layers
    assert result.hook == HOOKS[summary["layer"]]
    for r in result.rows:
        assert r.layer_rule == "val" and r.layer == result.layers[r.train][r.kind]
        assert r.hook == HOOKS[r.layer]
        if r.kind == "ccs":     # not validated: fitted at the cosine read-out only
            assert r.layer == summary["layer"] and math.isnan(r.val_value)
            assert "cosine read-out" in r.selected_by
        else:
            assert 0.5 < r.val_value <= 1.0 and r.selected_by == "validation"
    # per-layer view: adjacent read-outs, kind pairs, dataset pairs (kinds at every read-out)
    views = {r["view"] for r in result.layer_cosine}
    assert views == {"adjacent_layers", "between_kinds", "between_datasets"}
    adj = [r for r in result.layer_cosine if r["view"] == "adjacent_layers"]
    assert len(adj) == 3 * len(swept_kinds(cfg)) * (len(HOOKS) - 1) and "ccs" not in {
        r["kind"] for r in adj}
    assert all(r["cos"] > 0.9 for r in adj)   # one planted direction at every read-out
    between = [r for r in result.layer_cosine if r["view"] == "between_datasets"]
    assert len(between) == 3 * len(swept_kinds(cfg)) * len(HOOKS)
    assert set(summary["per_kind"]) == set(cfg.kinds)


@pytest.mark.parametrize("kind", ["supervised", "ccs"])
def test_agreement_verdict_holds_for_a_shared_direction(shared, kind):
    _, _, result, _ = shared
    a = result.per_kind[kind].agreement
    assert a.outcome == "holds", a.reason
    assert a.evidence["used"] == ["alpha", "beta", "gamma"]
    assert a.evidence["p_covariance"] < 0.01 and a.evidence["n_pairs"] == 3
    assert all(v.lo > 0.5 for v in a.in_distribution.values())


def test_ccs_is_fitted_at_the_cosine_readout_only(shared):
    """CCS transfers from, and is compared at, the cosine read-out; nowhere else fitted."""
    stores, cfg, result, _ = shared
    fitted = fit_stores(stores[:2], cfg)
    li = cosine_readout(fitted, cfg)
    for f in fitted:
        assert f.chosen["ccs"] == li and f.choices["ccs"].index == li
        deg = f.sweep.degenerate["ccs"].numpy()
        assert not deg[li] and deg.sum() == len(HOOKS) - 1
        assert np.isfinite(f.sweep.directions["ccs"][li].numpy()).all()
    rows = [r for r in result.rows if r.kind == "ccs" and r.metric == "accuracy"]
    assert len(rows) == 2 * 9 and {r.hook for r in rows} == {result.hook}
    kinds = {(r["kind_a"], r["kind_b"]) for r in result.cosine}
    assert {("ccs", "ccs"), ("supervised", "ccs")} <= kinds
    assert [r for r in result.cosine if r["relation"] == "split_half"
            and r["kind_a"] == "ccs"]


def test_agreement_verdict_is_inconclusive_for_independent_directions(independent):
    """Not beating the nulls is no evidence of disagreement (no equivalence test): the claim
    stays inconclusive, never "fails" on non-significance."""
    from ppairs_lens.evaluation.cosine_verdict import agreement_verdicts

    cfg, fitted = independent
    v = agreement_verdicts([(f.name, f.split, f.sweep) for f in fitted], ["supervised"], 1,
                           n_boot=40, seed=0, n_sim=500)["supervised"]
    assert v["outcome"] == "inconclusive", v["reason"]


def test_transfer_is_not_scored_across_prompt_kinds(tmp_path):
    r = _unit(np.random.default_rng(7).normal(size=D))
    stores = [write_store(tmp_path / n, n, *planted_acts(r, seed=i), kind=k)
              for i, (n, k) in enumerate([("cmp", "comparison"), ("stm", "statement")])]
    cfg = TransferConfig(stores=[str(s.path) for s in stores], **CFG)
    rows = transfer_rows([fit_store(s, cfg) for s in stores], cfg)
    cross = [r for r in rows if r.train != r.test]
    assert cross and all(np.isnan(r.value) and "prompt kinds differ" in r.refused
                         for r in cross)
    assert all(r.value > 0.9 and not r.refused for r in rows
               if r.train == r.test and r.metric == "accuracy")


def test_independent_directions_look_random_and_do_not_transfer(independent):
    cfg, fitted = independent
    ref = random_reference(D, cfg.n_random, cfg.settings.seed)
    c_rows = cosine_rows(fitted, cfg)
    t_rows = transfer_rows(fitted, cfg)
    for kind in cfg.kinds:
        between = _between(c_rows, kind)
        assert all(r["abs_cos"] < ref["p99"] for r in between), (kind, between, ref["p99"])
        off = _off_diag(t_rows, kind)
        lo, hi = (0.25, 0.75) if kind == "ccs" else (0.3, 0.7)    # CCS: a noisier direction
        assert 0.4 < np.mean(off) < 0.6 and all(lo < v < hi for v in off), (kind, off)
        diag = [r.value for r in t_rows if r.kind == kind and r.in_distribution
                and r.metric == "accuracy"]
        assert min(diag) > 0.9                 # each dataset is itself easy
    summary = summarize(t_rows, c_rows, ref, cfg)
    assert all(s.mean_abs_cos < ref["p95"] for s in summary.values())


def test_flipping_a_direction_flips_signed_cosine_only(shared, tmp_path):
    stores, cfg, _, _ = shared
    a, b = stores[0], stores[1]
    flipped = write_store(tmp_path / "beta_neg", "beta_neg", -b.load().numpy(),
                          b.labels().numpy())
    cfg = TransferConfig(stores=[], **CFG)
    fa, fb, fn = fit_stores([a, b, flipped], cfg)
    rows = {(r["dataset_a"], r["dataset_b"], r["kind_a"]): r
            for r in cosine_rows([fa, fb, fn], cfg) if r["relation"] == "between_datasets"}
    for kind in cfg.kinds:
        same, neg = rows[("alpha", "beta", kind)], rows[("alpha", "beta_neg", kind)]
        tol = 1e-2 if kind == "ccs" else 1e-6  # CCS: Adam from one seeded start (not odd in x)
        assert neg["abs_cos"] == pytest.approx(same["abs_cos"], abs=tol)
        assert neg["cos"] == pytest.approx(-same["cos"], abs=tol)
        assert rows[("beta", "beta_neg", kind)]["cos"] == pytest.approx(-1.0, abs=tol)


def test_random_reference_matches_theory():
    ref = random_reference(576, 10_000, seed=1)
    assert ref["mean"] == pytest.approx(math.sqrt(2 / (math.pi * 576)), rel=0.05)
    assert ref["mean_exact"] == pytest.approx(math.sqrt(2 / (math.pi * 576)), rel=0.01)
    assert ref["mean"] < ref["p95"] < ref["p99"] < 0.2


def test_refuses_mixed_models_and_bad_settings(shared, tmp_path):
    stores, _, _, _ = shared
    acts, labels = planted_acts(_unit(np.ones(D)), seed=5, n=40)
    other_model = write_store(tmp_path / "m", "other", acts, labels, model="another-model")
    with pytest.raises(StoreError, match="same model"):
        run_transfer([stores[0], other_model], tmp_path / "o1")
    wide = np.concatenate([acts, acts], axis=-1)
    other_d = write_store(tmp_path / "d", "wide", wide, labels)
    with pytest.raises(StoreError, match="d_model"):
        run_transfer([stores[0], other_d], tmp_path / "o2")
    with pytest.raises(StoreError, match="at least 2"):
        run_transfer(stores[:1], tmp_path / "o3")
    with pytest.raises(ProbeError, match="center_target"):
        run_transfer(stores, tmp_path / "o4", TransferConfig(stores=[], center_target="both"))
    with pytest.raises(StoreError, match="out of range"):
        run_transfer(stores, tmp_path / "o5", TransferConfig(stores=[], layer=len(HOOKS)))


def test_an_int_layer_still_forces_one_readout(shared, tmp_path):
    """Backwards compatible: ``layer=-2`` is the last block's resid_post everywhere."""
    stores, _, _, _ = shared
    cfg = TransferConfig(stores=[], layer=-2, **CFG)
    fitted = [fit_store(st, cfg) for st in stores[:2]]
    rows = transfer_rows(fitted, cfg)
    assert {r.layer for r in rows} == {len(HOOKS) - 2}
    assert {r.hook for r in rows} == {HOOKS[-2]}
    assert {r.layer_rule for r in rows} == {"fixed"}
    assert all(np.isnan(r.val_value) for r in rows)
    assert all(f.val_scores is None and set(f.chosen.values()) == {len(HOOKS) - 2}
               for f in fitted)
    assert {r["layer"] for r in cosine_rows(fitted, cfg)} == {len(HOOKS) - 2}
    with pytest.raises(ProbeError, match="must be None"):
        TransferConfig(stores=[], layer="best").validate()


def test_layer_is_chosen_on_validation_not_on_the_test_set(tmp_path):
    """Read-out 0 separates the classes on the *test* pairs only (a test-only spike); read-out
    1 weakly on every pair. The transfer probes must sit at read-out 1, though read-out 0
    scores higher on the test set."""
    rng = np.random.default_rng(7)
    n = N
    r = _unit(rng.normal(size=D))
    s = rng.choice([-1.0, 1.0], size=n)
    labels = np.where(s > 0, 1, 2)
    pairs = [PairInfo(f"spike:{i}", int(labels[i]), f"spike:c{i // 2}", item1_id=f"{i}a",
                      item2_id=f"{i}b") for i in range(n)]
    cfg = TransferConfig(stores=[], **CFG)
    _, test, used = split_pairs(pairs, **cfg.settings.split_kwargs())
    assert used == "context"
    in_test = np.zeros(n, bool)
    in_test[test] = True
    diff = rng.normal(size=(n, len(HOOKS), D))
    # read-out 0: weak on the training pairs, a spike on the test pairs
    diff[:, 0] += np.where(in_test, 6.0, 0.4)[:, None] * s[:, None] * r
    diff[:, 1] += 1.2 * s[:, None] * r                          # weak, everywhere
    x1 = 5.0 * rng.normal(size=(n, len(HOOKS), D))
    acts = np.stack([x1 + diff, x1], axis=1).astype(np.float32)
    spiked = write_store(tmp_path / "spike", "spike", acts, labels)
    fitted = fit_store(spiked, cfg)
    test_acc = fitted.sweep.score(fitted.split.acts_test, fitted.split.labels_test)
    assert fitted.chosen["ccs"] == 1          # CCS: at the read-out the others choose
    for kind in swept_kinds(cfg):
        assert test_acc[kind][0] > test_acc[kind][1] + 0.05, (kind, test_acc[kind])
        assert fitted.chosen[kind] == 1, (kind, fitted.val_scores[kind])
        assert fitted.val_scores[kind][1] > fitted.val_scores[kind][0]


def test_kinds_option_and_ccs_alone_refused(shared, tmp_path):
    from analyses.cross_dataset import main

    stores, _, _, _ = shared
    assert main([str(s.path) for s in stores[:2]] + ["--kinds", "pca", "ccs", "--n-boot", "20",
                                                    "--out", str(tmp_path / "o")]) == 0
    saved = json.loads((tmp_path / "o" / "transfer_summary.json").read_text())
    assert set(saved["per_kind"]) == {"pca", "ccs"}
    with pytest.raises(ProbeError, match="add one of"):
        TransferConfig(stores=[], kinds=("ccs",)).validate()


def test_layer_setting_from_text():
    assert layer_setting("val") is None and layer_setting("-2") == -2
    with pytest.raises(ValueError):
        layer_setting("best")


def test_accuracy_rows_carry_group_differences_that_decide_table_1(shared):
    """Each accuracy row records its target's per-group accuracy minus chance (for Table 1's
    claims; the summary only, not transfer.csv); renamed as Table 1 datasets, a shared
    direction makes the transferred probes beat chance and match the in-domain ones."""
    import csv

    from analyses.replication.claims import evaluate_claims

    _, _, result, root = shared
    acc = [r for r in result.rows if r.metric == "accuracy"]
    assert acc and all(len(r.group_diffs) == r.n_groups for r in acc)
    assert all(r.group_diffs is ABSENT for r in result.rows if r.metric != "accuracy")
    with open(root / "out" / "transfer.csv", encoding="utf-8") as f:
        cols = next(csv.reader(f))
    assert "n_groups" in cols and "group_diffs" not in cols
    name = dict(zip(("alpha", "beta", "gamma"), ("rocstories", "mctaco", "hanna-coherence")))
    rows = [{**record_data(r), "train": name[r.train], "test": name[r.test]} for r in acc
            if r.headline]
    by = {c["id"]: c for c in evaluate_claims({"model": "meta-llama/Llama-3.1-70B-Instruct",
                                               "transfer": {"accuracy": rows}}, None)["claims"]}
    for kind in ("supervised", "pca"):
        c = by[f"table1.{kind}-transfers.rocstories"]
        assert "sign-flip" in c["method"] and c["value"] > 0.3, c
        want = {r["n_groups"] for r in rows if r["test"] == "rocstories"}
        assert c["outcome"] == "holds" and {c["n_groups"]} == want, c
    assert by["ours.table1.pca-as-in-domain.rocstories"]["value"] == pytest.approx(0, abs=0.1)
    assert by["table1.pca-transfers.newsroom-coherence"]["outcome"] == "not run in this preset"


def test_pc1_alignment_is_high_where_the_label_direction_dominates_and_low_where_it_does_not():
    import torch

    from ppairs_lens.evaluation.cosine_verdict import pc1_alignment

    rng = np.random.default_rng(0)
    n, d = 200, 16
    y = rng.integers(1, 3, n)
    sign = np.where(y == 1, 1.0, -1.0)
    signal, loud = np.eye(d)[0], np.eye(d)[1]

    def acts(signal_scale: float, loud_scale: float) -> torch.Tensor:
        diff = (sign[:, None] * signal * signal_scale
                + rng.normal(size=(n, 1)) * loud * loud_scale + rng.normal(size=(n, d)) * 0.1)
        x = np.zeros((n, 2, 1, d))
        x[:, 0, 0] = diff / 2
        x[:, 1, 0] = -diff / 2
        return torch.tensor(x, dtype=torch.float32)

    # the labelled direction carries most of the variance: PC1 is the probe's direction
    assert pc1_alignment(acts(3.0, 0.5), y, 0, kind="supervised") > 0.95
    # a louder unlabelled direction takes PC1: the probe stays on the labelled one
    assert pc1_alignment(acts(0.5, 3.0), y, 0, kind="supervised") < 0.2
    assert pc1_alignment(acts(0.5, 3.0), y, 0, kind="pca") == pytest.approx(1.0)
