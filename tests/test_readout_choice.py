"""The one read-out choice: chosen on validation (never the test set), one fallback, first
maximum on ties, and the same read-out in every analysis that shows one."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import ppairs_lens.evaluation.readout_choice as rc
from ppairs_lens.activations.pair_info import PairInfo
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.activations.store_meta import StoreMeta
from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.readout_choice import (
    ReadoutChoice,
    best_layers,
    choose_readout,
    choose_readouts,
    common_readout,
    fallback_index,
)
from ppairs_lens.evaluation.store_split import split_store, training_split, validation_split
from ppairs_lens.probes.estimators import PROBE_KINDS
from ppairs_lens.evaluation.protocol import EvalSettings

pytestmark = pytest.mark.usefixtures("one_torch_thread")

HOOKS = ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post", "ln_final.hook_out"]
PLANTED = 0          # neither the fallback (1: the last resid_post) nor the last read-out
D = 16


def planted_acts(labels: np.ndarray, seed: int) -> np.ndarray:
    """``[n, 2, 3, D]``: the label is readable at read-out :data:`PLANTED` only."""
    rng = np.random.default_rng(seed)
    s = np.where(labels == 1, 1.0, -1.0)
    r = rng.normal(size=D)
    r /= np.linalg.norm(r)
    x = rng.normal(size=(len(labels), 2, len(HOOKS), D))
    x[:, 0, PLANTED] += 1.5 * s[:, None] * r
    x[:, 1, PLANTED] -= 1.5 * s[:, None] * r
    return x.astype(np.float32)


def planted_store(path, name: str = "planted", n: int = 240, seed: int = 0) -> ActivationStore:
    rng = np.random.default_rng(seed)
    labels = np.where(rng.random(n) < 0.5, 1, 2)
    pairs = [PairInfo(f"{name}:{i}", int(labels[i]), f"c{i // 2}", f"g{i // 2}", f"{i}a",
                      f"{i}b") for i in range(n)]
    meta = {"model": "toy", "dataset": name, "dataset_fingerprint": f"fp-{name}",
            "template_hash": "t", "dtype": "float32", "hook_names": HOOKS, "d_model": D,
            "shard_size": n}
    store = ActivationStore.create(path, StoreMeta.from_json(meta), pairs)
    store.write_shard(0, torch.from_numpy(planted_acts(labels, seed)))
    return ActivationStore.open(path)


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("readout")
    return [planted_store(tmp / "a", "a", seed=0), planted_store(tmp / "b", "b", seed=1)]


def test_every_analysis_chooses_the_planted_readout(stores, tiny, monkeypatch):
    from analyses.ablation import AblationConfig, choose_layer
    from analyses.cross_dataset import TransferConfig, cosine_readout, fit_store
    from analyses.layer_sweep import SweepConfig, sweep_split
    from ppairs_lens.data.builtin import builtin_dataset
    from ppairs_lens.judges import probe_judge

    store = stores[0]
    sp = split_store(store, test_size=0.3, seed=0)
    # sweep: the summary and the table's chosen rows
    rows, entries = sweep_split(sp, store.hook_names, "toy", SweepConfig(stores=[], settings=EvalSettings(n_boot=20)))
    assert {e.layer for e in entries} == {PLANTED}
    assert {e.selected_by for e in entries} == {"validation"}
    assert {r.layer for r in rows if r.chosen} == {PLANTED}
    # transfer: each source's probes and the cosines' common read-out
    cfg = TransferConfig(stores=[], settings=EvalSettings(n_boot=20))
    fitted = [fit_store(s, cfg) for s in stores]
    assert all(set(f.chosen.values()) == {PLANTED} for f in fitted)
    assert cosine_readout(fitted, cfg) == PLANTED
    # ablation: the directions' read-out (on the same split: the same numbers)
    layer, how = choose_layer(sp, AblationConfig(stores=[]))
    assert layer == PLANTED and "validation" in how
    # ranking and insertion: the probe judge (train_probe) on its harvested training pairs
    ds = builtin_dataset("larger_number", n=160, seed=0)
    labels = np.asarray(ds.labels())
    keep = labels != 0
    ds = ds.__class__(**{**ds.__dict__, "records": [r for r, k in zip(ds.records, keep) if k]})
    acts = torch.from_numpy(planted_acts(np.asarray(ds.labels()), seed=2))
    monkeypatch.setattr(probe_judge, "harvest_pairs", lambda *a, **k: acts)
    trained = probe_judge.train_probe(tiny, ds, kind="supervised", layer=None, seed=0,
                                      settings=None)
    assert trained.layer == PLANTED and trained.layer_selection == "validation"
    assert trained.hook == HOOKS[PLANTED]


def test_one_fit_for_every_kind_and_every_caller(stores):
    sp = split_store(stores[0], test_size=0.3, seed=0)
    again = split_store(stores[0], test_size=0.3, seed=0)        # a new object, same data
    every = choose_readouts(sp, PROBE_KINDS)
    for k in PROBE_KINDS:
        one = choose_readout(again, k)
        assert one == every[k] and len(one.val_scores) == len(HOOKS)
        assert one.val_value == max(one.val_scores)


def test_the_validation_split_is_made_as_the_test_split(stores, monkeypatch):
    sp = split_store(stores[0], test_size=0.3, seed=0)
    seen = []

    def spy(groups, items, **kw):
        seen.append(kw["by"])
        fit, val = validation_split(groups, items, **kw)
        assert not {groups[i] for i in fit} & {groups[i] for i in val}  # whole groups
        return fit, val

    monkeypatch.setattr(rc, "validation_split", spy)
    choose_readouts(sp, seed=123)                       # a seed no other test memoised
    assert seen and set(seen) == {sp.split_used} == {"context"}


def _with_scores(monkeypatch, scores):
    monkeypatch.setattr(rc, "validation_scores",
                        lambda *a, **k: {k_: np.asarray(v, float) for k_, v in scores.items()})


def test_ties_go_to_the_first_maximum_and_nan_is_never_chosen(stores, monkeypatch):
    sp = split_store(stores[0], test_size=0.3, seed=0)
    _with_scores(monkeypatch, {"supervised": [0.5, 0.7, 0.7], "pca": [np.nan, 0.6, 0.9],
                               "mass_mean": [np.nan] * 3})
    got = choose_readouts(sp, PROBE_KINDS)
    assert got["supervised"].index == 1 and got["pca"].index == 2
    assert got["mass_mean"].index == 1 and got["mass_mean"].selected_by.startswith("fallback")


def test_one_fallback_when_no_validation_split_is_possible(stores, monkeypatch):
    sp = split_store(stores[0], test_size=0.3, seed=0)

    def impossible(*a, **k):
        raise ProbeError("too few groups")

    monkeypatch.setattr(rc, "validation_scores", impossible)
    with pytest.warns(UserWarning, match="no validation split"):
        c = choose_readout(sp, "supervised")
    assert (c.index, c.hook) == (1, "blocks.1.hook_resid_post") and not c.val_scores
    assert c.selected_by.startswith("fallback") and "too few groups" in c.selected_by
    assert fallback_index(HOOKS) == 1 and fallback_index(["a", "b"]) == 1
    # a training side of one group cannot be split: the fallback, with the reason
    one = training_split("one", sp.acts_train, sp.labels_train, ["g"] * len(sp.labels_train),
                         None, HOOKS)
    monkeypatch.undo()
    with pytest.warns(UserWarning):
        assert choose_readout(one, "supervised").selected_by.startswith("fallback")


def test_a_forced_readout_and_the_common_rule(stores):
    sp = split_store(stores[0], test_size=0.3, seed=0)
    c = choose_readout(sp, "pca", layer=-1)
    assert (c.index, c.selected_by) == (2, "given (layer=-1)")
    with pytest.raises(ProbeError, match="out of range"):
        choose_readout(sp, "pca", layer=3)
    a = {"k": ReadoutChoice(0, HOOKS[0], "k", "validation", (0.9, 0.5, 0.6))}
    b = {"k": ReadoutChoice(2, HOOKS[2], "k", "validation", (0.5, 0.8, 0.85))}
    common = common_readout([a, b], HOOKS)
    assert (common.index, common.hook) == (2, HOOKS[2])          # the best mean (0.725)
    assert common.val_scores == pytest.approx((0.7, 0.65, 0.725)) and common.kind == "k"
    fixed = {"k": ReadoutChoice(1, HOOKS[1], "k", "given (layer=1)")}
    assert common_readout([fixed, fixed], HOOKS, layer=1).index == 1


def test_best_layers_reads_the_marked_choice():
    rows = [{"dataset": "d", "kind": "supervised", "layer": li, "metric": "accuracy",
             "value": t, "chosen": li == 1, "selected_by": "validation"}
            for li, t in enumerate([0.6, 0.7, 0.95])]
    rows.append({"dataset": "d", "kind": "memorisation", "layer": -1, "metric": "accuracy",
                 "value": 0.99})
    (best,) = best_layers(rows)
    assert best["layer"] == 1 and best["value"] == 0.7        # not the test maximum (0.95)
    for r in rows:
        r.pop("chosen", None)
    with pytest.raises(ProbeError, match="chosen"):
        best_layers(rows)


def test_ccs_is_validated_when_asked_or_added_at_a_forced_readout(stores):
    """Asked for, CCS is fitted at every read-out on the validation split (the other kinds'
    choices unchanged by asking); ``add_kinds_at`` fits it at one read-out only instead, its
    choice the forced one."""
    from ppairs_lens.probes.sweep import fit_sweep

    sp = split_store(stores[0], test_size=0.3, seed=0)
    both = rc.choose_readouts(sp, ("pca", "ccs"))
    assert both["ccs"].selected_by == "validation" and both["ccs"].index == PLANTED
    assert both["pca"] == rc.choose_readouts(sp, ("pca",))["pca"]
    sweep = fit_sweep(sp.acts_train, sp.labels_train, PROBE_KINDS)
    added, choices = rc.add_kinds_at(sp, sweep, ["ccs"], PLANTED, why="test")
    assert added.kinds == (*PROBE_KINDS, "ccs")
    assert choices["ccs"].index == PLANTED and choices["ccs"].selected_by.endswith(": test")
    assert [bool(v) for v in added.degenerate["ccs"]] == [i != PLANTED
                                                         for i in range(sweep.n_layers)]
    acc = added.score(sp.acts_test, sp.labels_test)
    assert acc["ccs"][PLANTED] > 0.8 and np.isnan(acc["ccs"]).sum() == sweep.n_layers - 1
