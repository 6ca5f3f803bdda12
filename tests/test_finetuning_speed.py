"""The fast paths of finetuning compute what the plain ones do: a comparison's shared prefix
run once gives the padded batch's logits and gradients, the Hugging Face reader answers like
the prompted judge on a bridge, and a curve's point after ``n`` labels is the judge a run on
those ``n`` alone gives (dropout draws included)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from analyses.finetuning import nested_order
from ppairs_lens.finetuning.cost import measure
from ppairs_lens.finetuning.data import choice_examples, collate, collate_shared
from ppairs_lens.finetuning.judge import finetune_curve, finetune_judge, pad_token_id, read_choices
from ppairs_lens.finetuning.train import (
    TrainingConfig,
    choice_logits,
    choice_loss,
    hf_model_copy,
    prepare_model,
    train_model,
)
from ppairs_lens.judges.zero_shot import zero_shot
from tests.conftest import small_comparisons

pytest.importorskip("peft")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_a_shared_prefix_gives_the_padded_logits_and_gradients(tiny, tokenizer):
    ex = choice_examples(tokenizer, small_comparisons(6))[:8]
    pad = pad_token_id(tokenizer)
    shared = collate_shared(ex, pad)
    assert shared.prefix_ids.shape[0] == 4 and shared.suffix_ids.shape[0] == 8
    assert shared.prefix_mask.sum() + shared.suffix_mask.sum() < sum(len(e.input_ids) for e in ex)
    grads = []
    for batch in (collate(ex, pad), shared):
        model = prepare_model(hf_model_copy(tiny), TrainingConfig(dropout=0.0, rank=4, alpha=4))
        model.train()
        loss, margin = choice_loss(model, batch)
        loss.backward()
        grads.append((loss.detach(), margin, [p.grad.clone() for p in model.parameters()
                                              if p.requires_grad]))
    (l0, m0, g0), (l1, m1, g1) = grads
    torch.testing.assert_close(l1, l0, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(m1, m0, atol=1e-4, rtol=1e-4)
    for a, b in zip(g0, g1):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-4)


def test_the_reader_answers_like_the_prompted_judge_on_the_bridge(tiny):
    ds = small_comparisons(7)
    ref = zero_shot(tiny, ds)
    res = read_choices(hf_model_copy(tiny), tiny.tokenizer, ds, batch_size=3)
    np.testing.assert_allclose(res.ld_original, ref.ld_original, atol=1e-4)
    np.testing.assert_allclose(res.ld_swapped, ref.ld_swapped, atol=1e-4)
    np.testing.assert_allclose(res.p, ref.p, atol=1e-5)
    assert res.n_rows == ref.n_rows


@pytest.mark.parametrize("method", ["lora", "full"])
def test_a_one_point_curve_is_the_finetuned_judge(tiny, method):
    ds = small_comparisons(8)
    cfg = TrainingConfig(method=method, lr=1e-3, batch_size=4, rank=8, alpha=8)
    judge = finetune_judge(tiny, ds, cfg=cfg, progress=False)
    (pt,) = finetune_curve(tiny, ds, ds, [len(ds)], cfg=cfg, progress=False)
    assert pt.n_train == len(ds) and pt.log.losses == judge.log.losses
    np.testing.assert_allclose(pt.result.z, judge.zero_shot(ds).z, atol=1e-4)
    assert pt.cost.seconds > 0 and pt.trainable_params == judge.trainable_params


def test_a_curve_point_is_the_run_on_its_labels_alone(tiny):
    ds = small_comparisons(12)
    test = small_comparisons(6)
    cfg = TrainingConfig(lr=1e-3, batch_size=4, rank=8, alpha=8)  # dropout on: same draws
    pts = finetune_curve(tiny, ds, test, [4, 8], cfg=cfg, progress=False)
    assert [p.n_train for p in pts] == [4, 8, 12]
    head = dataclasses.replace(ds, records=ds.records[:8])
    alone = finetune_curve(tiny, head, test, [4], cfg=cfg, progress=False)
    assert [p.n_train for p in alone] == [4, 8]
    for a, b in zip(alone, pts):
        assert a.log.losses == b.log.losses
        np.testing.assert_allclose(a.result.z, b.result.z, atol=1e-5)
    assert pts[0].cost.seconds <= pts[1].cost.seconds <= pts[2].cost.seconds
    with pytest.raises(Exception):
        m = prepare_model(hf_model_copy(tiny), cfg)
        train_model(m, choice_examples(tiny.tokenizer, ds), TrainingConfig(epochs=2), 0,
                    progress=False, blocks=[4])


def test_nested_orders_are_stratified_prefixes():
    y = np.array([1] * 30 + [2] * 10)
    order = nested_order(y, [4, 8, 16, 40], seed=3)
    assert sorted(order) == list(range(40))
    for n in (4, 8, 16):
        head = y[order[:n]]
        assert (head == 2).sum() >= 2 and (head == 1).sum() >= 2
        assert abs((head == 1).sum() - round(n * 0.75)) <= 1
    assert not np.array_equal(order, nested_order(y, [4, 8, 16, 40], seed=4))


def test_measure_reports_the_cost_so_far():
    with measure() as m:
        torch.ones(1024, 1024).sum()
        mid = m.elapsed()
    assert m.cost is not None and 0 < mid.seconds <= m.cost.seconds


def test_the_judges_steps_zero_shot_answers_are_the_ones_finetuning_reads(tiny, tmp_path):
    """The main job hands the finetuning step the judges step's calibrated log-odds
    (``HeldOutJudges.zero_shot_z``): on the same test pairs they are what asking the
    zero-shot judge there gives, so the comparison's zero-shot row is unchanged."""
    from analyses.finetuning import FinetuningConfig, answers, prepare_comparison
    from ppairs_lens.activations.pipeline import ensure_store
    from ppairs_lens.data import BUILTIN
    from ppairs_lens.judges.study import JudgeStudySettings, judge_study

    ds = BUILTIN["larger_number"](n=40, seed=0)
    store = ensure_store(tiny, ds, tmp_path / "stores", progress=False)
    cfg = FinetuningConfig(max_test=None)
    known = judge_study(tiny, [store], [ds], JudgeStudySettings(
        cfg.settings, train_pairs=4, allure=None))[ds.name].zero_shot_z()
    template, sp, _, test = prepare_comparison(tiny, store, ds, cfg)
    assert [r.pair_id for r in test.records if r.label != 0] == \
        [i for i in known if i in {r.pair_id for r in test.records}]
    asked = answers(sp, tiny, test, "zero_shot", cfg, 0, template)
    reused = answers(sp, tiny, test, "zero_shot", cfg, 0, template, known_z=known)
    assert reused.extra == {"zero_shot": "reused"}
    np.testing.assert_allclose(reused.p, asked.p, rtol=0, atol=1e-5)
    partial = answers(sp, tiny, test, "zero_shot", cfg, 0, template,
                      known_z=dict(list(known.items())[:1]))  # not every pair: asked
    assert partial.extra == {} and np.array_equal(partial.p, asked.p)
