"""Any hook point as a read-out: names, presets and patterns resolved, checked, stored."""

from __future__ import annotations

import pytest
import torch

from ppairs_lens.activations.harvest import harvest_pairs, reference_activations, resolve_readouts
from ppairs_lens.activations.pipeline import ensure_store, harvest_dataset
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.errors import HookError, StoreError
from ppairs_lens.models.hook_points import hook_points
from tests.conftest import small_comparisons

CPU = torch.device("cpu")


def test_patterns_and_presets_expand_in_forward_order(tiny):
    r = resolve_readouts(tiny, ["ln_final.hook_out", "blocks.*.hook_resid_pre",
                                "blocks.0.hook_mlp_out"], CPU)
    assert r.names == ["blocks.0.hook_resid_pre", "blocks.0.hook_mlp_out",
                       "blocks.1.hook_resid_pre", "ln_final.hook_out"]
    assert r.width == tiny.cfg.d_model
    assert resolve_readouts(tiny, "paper", CPU).names == hook_points("paper", 2)
    assert resolve_readouts(tiny, "full", CPU).names == hook_points("full", 2)


@pytest.mark.parametrize("names, match", [
    ("blocks.0.hook_resid_pots", r"unknown hook point 'blocks\.0\.hook_resid_pots'.*"
                                 r"blocks\.0\.hook_resid_post"),
    ("blocks.*.hook_resid_pots", r"matches no hook point.*blocks\.0\.hook_resid_post"),
    ("blocks.0.attn.hook_pattern", r"shape \[1, 4, 5, 5\].*not one vector per token"),
    ("blocks.0.attn.hook_z", r"shape \[1, 5, 4, 16\]"),
    (["blocks.0.hook_resid_post", "blocks.0.mlp.hook_post"], "different widths"),
    ([], "must be hook names"),
])
def test_bad_read_outs_are_refused_clearly(tiny, names, match):
    with pytest.raises(HookError, match=match):
        resolve_readouts(tiny, names, CPU)


def test_a_width_other_than_d_model_is_harvested(tiny):
    """Read-outs of one width other than d_model (an MLP's hidden units here, an SAE's
    latents in practice) are harvested at that width; mixed widths stay refused."""
    from ppairs_lens.activations.harvest import readout_width

    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(2))
    acts = harvest_pairs(tiny, pairs, names="blocks.*.mlp.hook_post")
    assert acts.shape == (2, 2, tiny.cfg.n_layers, 128)
    assert readout_width(tiny, "blocks.*.mlp.hook_post") == 128
    assert readout_width(tiny, None) == tiny.cfg.d_model


def test_harvest_reads_the_named_hooks(tiny):
    pairs = build_contrast_pairs(tiny.tokenizer, small_comparisons(3))
    names = ["hook_embed", "blocks.1.hook_attn_out"]
    acts = harvest_pairs(tiny, pairs, names=names)
    assert acts.shape == (3, 2, 2, tiny.cfg.d_model)
    for i, p in enumerate(pairs):
        ref = reference_activations(tiny, list(p.prefix_ids) + [p.final_ids[1]], names=names)
        torch.testing.assert_close(acts[i, 1], ref, atol=1e-5, rtol=1e-4)


def test_stores_record_their_read_outs_and_are_not_reused_for_others(tiny, tmp_path):
    ds = small_comparisons(4)
    default = ensure_store(tiny, ds, tmp_path, progress=False)
    pre = ensure_store(tiny, ds, tmp_path, names="blocks.*.hook_resid_pre", progress=False)
    assert default.hook_names == hook_points("paper", 2)
    assert pre.hook_names == ["blocks.0.hook_resid_pre", "blocks.1.hook_resid_pre"]
    assert pre.path != default.path and pre.path.parent == default.path.parent
    assert pre.load().shape == (4, 2, 2, tiny.cfg.d_model)
    torch.testing.assert_close(pre.load(1), default.load(0))  # resid_pre 1 = resid_post 0
    # the same names again: the same store, reused
    assert ensure_store(tiny, ds, tmp_path, names=["blocks.0.hook_resid_pre",
                                                   "blocks.1.hook_resid_pre"],
                        progress=False).path == pre.path
    # writing other read-outs into an existing store is refused, naming the field
    with pytest.raises(StoreError, match="hook_names"):
        harvest_dataset(tiny, ds, default.path, names="blocks.*.hook_mlp_out", progress=False)
