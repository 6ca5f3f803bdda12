"""The prompted judge's answer read by the harvest at each pair's last prompt token: equal to the
judge's own run, activations unchanged, kept in the store, taken from there by the judge study."""

import shutil
from dataclasses import replace

import numpy as np
import pytest
import torch

from ppairs_lens.activations.branch_layout import fused_inputs
from ppairs_lens.activations.harvest import harvest_pairs, harvest_with_judge
from ppairs_lens.activations.pipeline import ensure_stores, harvest_dataset
from ppairs_lens.activations.prefix_sharing import (
    PrefixState,
    end_in_tails,
    extend,
    plan,
    read_branches,
    run_rows,
)
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.activations.runner import HarvestSettings, model_steps, run_branches
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.evaluation.protocol import EvalSettings
from ppairs_lens.judges.study import JudgeStudySettings, judge_study
from ppairs_lens.judges.zero_shot import choice_logodds_of
from ppairs_lens.models.hook_points import READOUT_PRESET, hook_points
from ppairs_lens.data.records import Comparison, Dataset

from .conftest import small_comparisons

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _mixed(tokenizer, duplicates: bool = False):
    """A big group with shared first items (a prefix tree with middles), then pooled small
    groups (the flat plan), tails of many lengths; ``duplicates``: every prompt twice."""
    items = [f"Item {k} says " + "word " * (40 + 5 * k) for k in range(5)]
    ds = Dataset("all_pairs", "comparison",
                 [Comparison(f"{i}-{j}", items[i], items[j], 1 if i > j else 2,
                             context="A shared article about items. " * 4, context_id="art")
                  for i in range(5) for j in range(5) if i != j],
                 aspect="longer", item_name="item", context_name="article")
    if duplicates:
        ds.records = ds.records + [replace(r, pair_id=r.pair_id + "dup") for r in ds.records]
    return build_contrast_pairs(tokenizer, ds) + build_contrast_pairs(tokenizer,
                                                                      small_comparisons(8))


@pytest.mark.parametrize("settings", [HarvestSettings(token_budget=100_000),
                                      HarvestSettings(token_budget=300),
                                      HarvestSettings(token_budget=1),  # a row per pass
                                      HarvestSettings(share_prefixes=False)])
def test_harvest_reads_the_judges_answer_and_the_same_activations(tiny, settings):
    pairs = _mixed(tiny.tokenizer, duplicates=settings.token_budget == 300)
    plans = plan([p.prefix_ids for p in pairs], [p.group for p in pairs])
    assert len(plans) == 2 and any(len(s.rows) > 1 for s in plans[0].subgroups)  # middles
    got = harvest_with_judge(tiny, pairs, settings)
    want = choice_logodds_of(tiny, pairs)
    assert got.judge_logodds.dtype == np.float64 and np.isfinite(got.judge_logodds).all()
    np.testing.assert_allclose(got.judge_logodds, want, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(got.acts, harvest_pairs(tiny, pairs, settings),
                               rtol=1e-5, atol=1e-5)


def test_each_rows_end_moves_into_its_tail_and_the_tokens_stay():
    ctx = [1, 2, 3]
    prefixes = [ctx + [10] * 9 + [5, 6], ctx + [10] * 9, ctx + [20, 21], ctx]
    for share in (True, False):
        plans = plan(prefixes, ["g"] * 4, share=share, min_saving=0.0)
        moved = end_in_tails(plans)
        for before, after in zip(plans, moved):
            rows = {r: list(after.context) + list(s.mid) + list(t)
                    for s in after.subgroups for r, t in zip(s.rows, s.tails)}
            assert {r: prefixes[r] for r in rows} == rows  # the same prompts
            assert all(all(s.tails) for s in after.subgroups)  # every end in a tail


def test_a_row_whose_prompt_ended_in_the_cache_gets_nan(tiny):
    """read_branches itself: left-padded tails of different lengths, one empty (NaN)."""
    ids = [5, 17]
    forward, read = model_steps(tiny, hook_points(READOUT_PRESET, tiny.cfg.n_layers), ids)
    ctx, tails, branches = [1, 40, 41, 42], [(50, 51, 52), (), (60,)], [(7, 8)] * 3
    with torch.inference_mode():
        state = extend(PrefixState.empty(torch.device("cpu")), [0], [ctx], forward)
        acts, end = read_branches(state, [0] * 3, branches, read, tails=tails,
                                  logits_at_end=True)
        plain, _ = read_branches(state, [0] * 3, branches, read, tails=tails)
        torch.testing.assert_close(acts, plain, rtol=1e-5, atol=1e-5)
        assert end.shape == (3, 2) and torch.isnan(end[1]).all()
        for r in (0, 2):
            want = tiny(torch.tensor([ctx + list(tails[r])]))[0, -1, ids]
            torch.testing.assert_close(end[r], want, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="fused"):
        run_rows(state, [], [], forward, read, lambda *a: None, token_budget=100,
                 fuse=False, logits_at_end=True)


def test_left_padding_hides_padding_and_keeps_positions():
    prev = torch.ones(2, 3, dtype=torch.bool)
    ids, mask, pos, lens = fused_inputs([(9, 9, 9), (7,)], [(1, 2)] * 2, prev,
                                        torch.tensor([3, 3]), logits_at_end=True)
    assert ids[1].tolist() == [0, 0, 7, 1, 2] and lens.tolist() == [3, 1]
    assert pos[1].tolist() == [3, 3, 3, 4, 4] and pos[0].tolist() == [3, 4, 5, 6, 6]
    m = mask[1, 0, :, 3:]  # row 1's queries over its new keys
    assert not m[2:, :2].any()  # padding is never a key of a real query
    assert m[0, 0] and m[1, 1] and m.any(-1).all()  # no query sees nothing


def test_the_store_keeps_them_and_old_stores_give_none(tiny, tmp_path):
    ds = small_comparisons(10)
    store = harvest_dataset(tiny, ds, tmp_path / "s", shard_size=3, progress=False)
    ld = store.judge_logodds()
    np.testing.assert_allclose(ld, choice_logodds_of(tiny, build_contrast_pairs(
        tiny.tokenizer, ds)), rtol=1e-4, atol=1e-4)
    old = _without_judge(store, tmp_path / "old")
    assert old.judge_logodds() is None
    torch.testing.assert_close(old.load(), store.load(), rtol=0, atol=0)
    assert old.fingerprint() != store.fingerprint()  # the sidecars carry its checksum


def _without_judge(store: ActivationStore, path) -> ActivationStore:
    """A copy of ``store`` as a harvest before the judge's log-odds wrote it."""
    shutil.copytree(store.path, path)
    old = ActivationStore.open(path)
    acts = old.load()
    for k in range(old.n_shards):
        old.write_shard(k, acts[slice(*old.shard_range(k))])
    return old


def test_judge_study_takes_the_harvested_order_and_runs_the_rest(tiny, tmp_path):
    d1 = small_comparisons(12)
    d2 = replace(d1, name="small2", aspect="smaller")
    stores = ensure_stores(tiny, [d1, d2], tmp_path / "new")
    olds = [_without_judge(s, tmp_path / f"old{k}") for k, s in enumerate(stores)]
    settings = JudgeStudySettings(EvalSettings(test_size=0.5, split_by="pair"), train_pairs=4,
                                  allure=None)
    got = judge_study(tiny, stores, [d1, d2], settings)
    want = judge_study(tiny, olds, [d1, d2], settings)
    for name in (d1.name, d2.name):
        g, w = got[name], want[name]
        assert g.test_ids == w.test_ids
        for form in ("paper", "threshold", "z"):
            np.testing.assert_allclose(getattr(g.forms, form), getattr(w.forms, form),
                                       rtol=1e-6, atol=1e-6)
        n = w.n_prompts["zero_shot"]
        assert w.n_prompts == {"zero_shot": n, "zero_shot_run": n, "zero_shot_from_harvest": 0}
        assert g.n_prompts == {"zero_shot": n, "zero_shot_run": n // 2,
                               "zero_shot_from_harvest": n // 2}


def test_the_held_out_judge_and_the_study_run_one_zero_shot_pass(tiny, tmp_path, monkeypatch):
    """``judge_held_out``'s zero-shot form and ``judge_study`` get their answers from the one
    pass (``zero_shot.sides_logodds``): the same calibrated log-odds on the same pairs."""
    from ppairs_lens.judges import study, zero_shot
    from ppairs_lens.judges.held_out import judge_held_out

    d = small_comparisons(12)
    store = ensure_stores(tiny, [d], tmp_path / "s")[0]
    protocol = EvalSettings(test_size=0.5, split_by="pair")
    calls = []
    real = zero_shot.sides_logodds

    def counted(*a, **k):
        calls.append(len(a[1]))
        return real(*a, **k)
    monkeypatch.setattr(zero_shot, "sides_logodds", counted)
    monkeypatch.setattr(study, "sides_logodds", counted)
    got = judge_study(tiny, [store], [d], JudgeStudySettings(protocol, train_pairs=4,
                                                             allure=None))[d.name]
    held = judge_held_out(tiny, store, d, forms=("zero_shot",), **protocol.split_kwargs())
    assert calls == [4, 2]          # the study's four sides, then the held-out two orders
    assert held.n_test == len(got.test_ids) and held.zero_shot["calibrated"]
    z = held.zero_shot["z_by_pair"]
    np.testing.assert_allclose([z[i] for i in got.test_ids], got.forms.z, rtol=1e-6, atol=1e-6)


@pytest.mark.integration
def test_embedded_model_harvest_gives_the_judges_answer(smol):
    from ppairs_lens.data import builtin_dataset

    pairs = []
    for name in ("larger_number", "capital_true"):
        ds = builtin_dataset(name, seed=0)
        ds.records = ds.records[:6]
        pairs += build_contrast_pairs(smol.tokenizer, ds)
    got = harvest_with_judge(smol, pairs, HarvestSettings(token_budget=400))
    np.testing.assert_allclose(got.judge_logodds, choice_logodds_of(smol, pairs),
                               rtol=1e-4, atol=1e-4)
    plain = harvest_pairs(smol, pairs, HarvestSettings(token_budget=400))
    # float error, per read-out vector: the two harvests batch and pad differently, and the
    # fused attention kernel blocks its sums by shape (late layers carry norms in the hundreds)
    rel = (got.acts - plain).norm(dim=-1) / plain.norm(dim=-1)
    assert rel.max() < 1e-5, float(rel.max())


def test_logits_at_the_end_need_logit_ids(tiny):
    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(2))
    with pytest.raises(ValueError, match="logits_at"):
        run_branches(tiny, [p.prefix_ids for p in pairs], [p.final_ids for p in pairs],
                     [p.group for p in pairs], logits_at="end")


def test_a_callers_hooks_on_the_model_keep_no_judge_answer(tiny):
    """Under an ablation context a caller put around the harvest, the answers read are not
    the plain judge's: none are given."""
    from ppairs_lens.interventions.ablation import ablate

    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(4))
    direction = torch.randn(tiny.cfg.d_model, generator=torch.Generator().manual_seed(0))
    with ablate(tiny, direction):
        got = harvest_with_judge(tiny, pairs)
    assert got.judge_logodds is None
    assert harvest_with_judge(tiny, pairs).judge_logodds is not None  # the context has left


def test_a_shard_without_them_is_nan_and_the_rest_stays(tiny, tmp_path):
    """A store resumed across versions: its older shards give NaN (those prompts run), the
    newer keep their answers."""
    store = harvest_dataset(tiny, small_comparisons(10), tmp_path / "s", shard_size=3,
                            progress=False)
    full = store.judge_logodds()
    start, stop = store.shard_range(1)
    store.write_shard(1, store.load()[start:stop])  # as an older harvest wrote it
    mixed = store.judge_logodds()
    assert np.isnan(mixed[start:stop]).all()
    keep = np.ones(len(full), bool)
    keep[start:stop] = False
    np.testing.assert_array_equal(mixed[keep], full[keep])


def test_answers_of_a_model_loaded_in_another_dtype_are_not_paired(tiny, tmp_path):
    """The swapped order runs now; the stored order is used only if the harvest ran the
    model in the same dtype (else both orders run)."""
    from ppairs_lens.judges.study import harvested_logodds

    store = harvest_dataset(tiny, small_comparisons(6), tmp_path / "s", progress=False)
    assert store.meta.model_dtype == "float32" and harvested_logodds(store, tiny)
    meta = store.path / "metadata.json"
    meta.write_text(meta.read_text("utf-8").replace('"model_dtype": "float32"',
                                                    '"model_dtype": "bfloat16"'), "utf-8")
    assert harvested_logodds(ActivationStore.open(store.path), tiny) == {}
