"""The finetuned judge on the tiny random model: training lowers the loss (LoRA and full), the
judge reads both item orders like the prompted judge, and the user's model is never changed."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from ppairs_lens.errors import ModelLoadError, PPairsError
from ppairs_lens.finetuning import judge as judge_module
from ppairs_lens.finetuning.cost import measure
from ppairs_lens.finetuning.data import choice_examples, collate
from ppairs_lens.finetuning.judge import finetune_judge, pad_token_id
from ppairs_lens.finetuning.train import (
    TrainingConfig,
    hf_model_copy,
    mean_choice_loss,
    prepare_model,
    train_model,
    trainable_parameters,
)
from ppairs_lens.judges.zero_shot import swapped_dataset, zero_shot
from tests.conftest import small_comparisons

pytest.importorskip("peft")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _state(bridge) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in bridge.original_model.state_dict().items()}


def _same(bridge, before: dict[str, torch.Tensor]) -> bool:
    now = bridge.original_model.state_dict()
    return set(now) == set(before) and all(torch.equal(now[k], before[k]) for k in before)


def test_examples_cover_both_orders_with_the_right_choice(tokenizer):
    ds = small_comparisons(6)
    ex = choice_examples(tokenizer, ds)
    untied = [r for r in ds.records if r.label != 0]
    assert len(ex) == 2 * len(untied)
    one, two = tokenizer("Choice 1", add_special_tokens=False).input_ids[-1], \
        tokenizer("Choice 2", add_special_tokens=False).input_ids[-1]
    for rec, (a, b) in zip(untied, zip(ex[::2], ex[1::2])):
        assert (a.order, b.order) == ("original", "swapped")
        assert a.target == (one if rec.label == 1 else two)   # swapped: the other position
        assert b.target == (two if rec.label == 1 else one)
        assert {a.target, a.wrong} == {one, two}


def test_the_copy_answers_like_the_bridge_and_padding_changes_nothing(tiny, tokenizer):
    ex = choice_examples(tokenizer, small_comparisons(4))[:4]
    model = hf_model_copy(tiny)
    batch = collate(ex, pad_token_id(tokenizer))
    with torch.no_grad():
        padded = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                       position_ids=batch.position_ids, logits_to_keep=1).logits[:, -1]
        for r, e in enumerate(ex):
            alone = tiny(torch.tensor([e.input_ids]), return_type="logits")[0, -1]
            torch.testing.assert_close(padded[r], alone, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("method,lr", [("lora", 1e-3), ("full", 1e-4)])
def test_a_training_step_lowers_the_loss(tiny, tokenizer, method, lr):
    ex = choice_examples(tokenizer, small_comparisons(4))
    cfg = TrainingConfig(method=method, lr=lr, batch_size=len(ex), dropout=0.0)
    model = prepare_model(hf_model_copy(tiny), cfg)
    pad = pad_token_id(tokenizer)
    before = mean_choice_loss(model, ex, pad)
    log = train_model(model, ex, cfg, pad, progress=False)
    assert log.n_steps == 1 and log.n_examples == len(ex)
    assert mean_choice_loss(model, ex, pad) < before
    n_all = sum(p.numel() for p in model.parameters())
    if method == "lora":
        assert 0 < trainable_parameters(model) < n_all / 2
    else:
        assert trainable_parameters(model) == n_all


def test_training_is_seeded(tiny, tokenizer):
    ex = choice_examples(tokenizer, small_comparisons(6))
    cfg = TrainingConfig(method="lora", lr=1e-3, batch_size=4)
    runs = []
    for _ in range(2):
        m = prepare_model(hf_model_copy(tiny), cfg)
        runs.append(train_model(m, ex, cfg, pad_token_id(tokenizer), progress=False).losses)
    assert runs[0] == runs[1]


def test_the_finetuned_judge_reads_both_orders_and_leaves_the_model_alone(tiny):
    ds = small_comparisons(8)
    before = _state(tiny)
    ref = zero_shot(tiny, ds)
    judge = finetune_judge(tiny, ds, cfg=TrainingConfig(method="lora", lr=1e-3, batch_size=4),
                           progress=False)
    assert _same(tiny, before)                                   # weights untouched
    np.testing.assert_array_equal(zero_shot(tiny, ds).z, ref.z)  # answers untouched
    assert judge.bridge is not tiny and judge.n_train == len(ds)
    res = judge.zero_shot(ds)
    assert res.n_rows == 2 * len(ds) and res.ld_swapped is not None
    flipped = judge.zero_shot(swapped_dataset(ds))            # calibrated: antisymmetric
    np.testing.assert_allclose(flipped.z, -res.z, atol=1e-5)
    assert not np.allclose(res.z, ref.z)                        # training changed the judge
    s = judge.summary()
    assert s["trainable_params"] == judge.trainable_params > 0 and s["seconds"] > 0
    assert judge.evaluate(ds)["n_scored"] == sum(r.label != 0 for r in ds.records)


def test_an_interrupted_run_returns_nothing_and_changes_nothing(tiny, monkeypatch):
    before = _state(tiny)
    real = judge_module.train_model

    def interrupted(*a, **kw):
        def stop(step, loss):
            raise KeyboardInterrupt
        return real(*a, **kw, on_step=stop)

    monkeypatch.setattr(judge_module, "train_model", interrupted)
    with pytest.raises(KeyboardInterrupt):
        finetune_judge(tiny, small_comparisons(4), cfg=TrainingConfig(lr=1e-2), progress=False)
    assert _same(tiny, before)


def test_full_finetuning_judge_and_bad_settings(tiny):
    ds = small_comparisons(4)
    judge = finetune_judge(tiny, ds, cfg=TrainingConfig(method="full", batch_size=8),
                           progress=False)
    assert judge.trainable_params == judge.total_params
    with pytest.raises(PPairsError):
        TrainingConfig(method="adapter")
    with pytest.raises(ModelLoadError):
        hf_model_copy(object())


def test_measure_reports_time_and_memory():
    with measure() as m:
        x = torch.ones(4096, 4096)           # 64 MB
        x += 1
    assert m.cost is not None and m.cost.seconds > 0 and m.cost.peak_mb >= 0
    assert dataclasses.asdict(m.cost)["memory_kind"] in ("cpu_rss", "cpu_maxrss")


def test_the_analysis_writes_its_tables_and_figures(tiny, tmp_path):
    from analyses.finetuning import PRESETS, FinetuningConfig, run_finetuning
    from ppairs_lens.presets import at_preset
    from ppairs_lens.activations.pipeline import ensure_store
    from ppairs_lens.data import BUILTIN

    ds = BUILTIN["larger_number"](n=40, seed=0)
    store = ensure_store(tiny, ds, tmp_path / "stores", progress=False)
    before = _state(tiny)
    cfg = dataclasses.replace(at_preset(FinetuningConfig(
        lora=TrainingConfig(batch_size=8), full=TrainingConfig(method="full", batch_size=8)),
        PRESETS, "quick"), max_train=8, curve_sizes=(4, 8))
    rows = run_finetuning(tiny, [(store, ds)], tmp_path / "out", cfg).data()
    assert _same(tiny, before)
    assert [r["method"] for r in rows] == list(cfg.methods)
    for name in ("finetuning.csv", "finetuning_curve.csv", "finetuning.png",
                 "finetuning_curve.png", "finetuning.config.json", "finetuning_summary.json"):
        assert (tmp_path / "out" / name).is_file(), name
    sup = next(r for r in rows if r["method"] == "supervised")
    assert sup["minus_supervised"] == 0 and sup["train_seconds"] > 0
    assert all(r["n_test"] == rows[0]["n_test"] for r in rows)


def test_the_command_line_runs_the_comparison(tiny, tmp_path, capsys):
    from analyses import finetuning
    from analyses.cli import build_parser
    from analyses.cli_args import check_args

    args = build_parser().parse_args(
        ["finetune", "--quick", "--datasets", "alphabetical", "--max-pairs", "30",
         "--max-train", "8", "--curve-sizes", "4", "8", "--stores", str(tmp_path / "s"),
         "--out", str(tmp_path / "o")])
    check_args(args)
    finetuning.cli(args, bridge=tiny)
    assert "lora" in capsys.readouterr().out
    assert (tmp_path / "o" / "finetuning_curve.csv").is_file()
