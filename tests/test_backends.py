"""The two backends (TransformerBridge, HookedTransformer) built from the same HF weights give
the same harvests, judges and ablations; anything else is refused with a clear error."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from ppairs_lens.activations.harvest import harvest_pairs, reference_activations
from ppairs_lens.activations.runner import HarvestSettings, run_branches
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.data.records import Comparison, Dataset
from ppairs_lens.errors import HookError, ModelLoadError
from ppairs_lens.interventions.ablation import (
    ablate,
    ablation_hook_sets,
    unembedding_direction,
)
from ppairs_lens.judges.comparators import ProbeComparator, ZeroShotComparator
from ppairs_lens.judges.zero_shot import zero_shot
from ppairs_lens.models.backend import FINAL_NORM_HOOK, backend_of
from ppairs_lens.models.hook_points import READOUT_PRESET, check_hook_names, hook_points
from ppairs_lens.models.loading import load_model
from ppairs_lens.probes.estimators import make_probe
from tests.conftest import small_comparisons
from tests.test_comparators import META, comparisons_of, scored_items
from tests.test_hooked_backend import HAS_HOOKED, needs_hooked, randomise_vectors


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest per-vector difference relative to the reference vector's norm."""
    return float(((a - b).norm(dim=-1) / b.norm(dim=-1).clamp_min(1e-12)).max())


@pytest.fixture(scope="module")
def both(tokenizer):
    """``(bridge, hooked)``: one random tiny Llama (norm gains and biases seeded away from 1
    and 0, so a dropped gain shows) as a TransformerBridge and as a HookedTransformer."""
    from transformer_lens.model_bridge import TransformerBridge

    from ppairs_lens.models.hooked import load_hooked
    from ppairs_lens.models.tiny import tiny_hf_model

    hf = randomise_vectors(tiny_hf_model(tokenizer, seed=3, n_layers=2))
    hooked = load_hooked(copy.deepcopy(hf), tokenizer, name="tiny-both")  # booting rewires hf
    bridge = TransformerBridge.boot_transformers("tiny-both", hf_model=hf, tokenizer=tokenizer,
                                                 device="cpu")
    bridge.eval()
    bridge.ppairs_model_name = "tiny-both"
    return bridge, hooked


def shared_dataset(n_items: int = 5, words: int = 40) -> Dataset:
    """Every ordered pair of items under one context: pairs share the context and their
    first item (a prefix tree with shared middles), items of many lengths (padded tails)."""
    items = [f"Item {k} says " + "word " * (words + 5 * k) for k in range(n_items)]
    recs = [Comparison(f"{i}-{j}", items[i], items[j], 1 if i > j else 2,
                       context="A shared article about items. " * 4, context_id="art")
            for i in range(n_items) for j in range(n_items) if i != j]
    return Dataset("shared", "comparison", recs, aspect="longer", item_name="item",
                   context_name="article")


def mixed_pairs(tokenizer):
    """Pairs of :func:`shared_dataset`, then short pairs of small pooled groups."""
    return (build_contrast_pairs(tokenizer, shared_dataset())
            + build_contrast_pairs(tokenizer, small_comparisons(8)))


def test_other_objects_are_refused_clearly(tiny, tokenizer):
    from ppairs_lens.models.tiny import tiny_hf_model

    assert backend_of(tiny) == "bridge"
    hf = tiny_hf_model(tokenizer)
    pairs = build_contrast_pairs(tokenizer, small_comparisons(2))
    with pytest.raises(ModelLoadError, match="LlamaForCausalLM: the model must be a "
                                             "TransformerLens TransformerBridge or a Hooked"):
        harvest_pairs(hf, pairs)
    with pytest.raises(ModelLoadError, match="load_model"):
        zero_shot(object(), small_comparisons(2))
    with pytest.raises(ModelLoadError, match="unknown backend 'nnsight'"):
        load_model(backend="nnsight")


@pytest.mark.skipif(HAS_HOOKED, reason="checks the message given where HookedTransformer is absent")
def test_hooked_backend_on_transformer_lens_4_says_which_version_has_it():
    with pytest.raises(ModelLoadError, match="transformer-lens<4"):
        load_model(backend="hooked")


@needs_hooked
@pytest.mark.parametrize("budget", [100_000, 300])  # one pass per step; many small parts
def test_harvests_agree(both, tokenizer, budget):
    bridge, hooked = both
    assert backend_of(hooked) == "hooked"
    pairs = mixed_pairs(tokenizer)
    settings = HarvestSettings(token_budget=budget)
    a, b = harvest_pairs(bridge, pairs, settings), harvest_pairs(hooked, pairs, settings)
    assert a.shape == b.shape == (len(pairs), 2, bridge.cfg.n_layers + 1, bridge.cfg.d_model)
    assert rel_err(b, a) < 1e-4
    # The two sides differ (the read-out sees its own final token), as on the bridge.
    assert rel_err(b[:, 0], b[:, 1]) > 1e-2
    # The final norm's read-out is after the gain on both: HF's last hidden state.
    ids = list(pairs[3].prefix_ids) + [pairs[3].final_ids[1]]
    with torch.inference_mode():
        hs = bridge.original_model(torch.tensor([ids]), output_hidden_states=True).hidden_states
    assert rel_err(b[3, 1, -1], hs[-1][0, -1]) < 1e-4
    # A HookedTransformer harvest does not depend on how it is batched or shared.
    alone = harvest_pairs(hooked, pairs, HarvestSettings(share_prefixes=False))
    assert rel_err(b, alone) < 1e-4


@needs_hooked
def test_a_hooked_harvest_reads_no_judge_answer_rather_than_a_wrong_one(both, tokenizer):
    """Its fused read hides the last columns from each other as branches, so it cannot read
    the last prompt token in that pass: no end logits (the judge then runs those prompts)."""
    from ppairs_lens.activations.harvest import harvest_with_judge

    bridge, hooked = both
    pairs = mixed_pairs(tokenizer)
    args = ([p.prefix_ids for p in pairs], [p.final_ids for p in pairs], [p.group for p in pairs])
    out = run_branches(hooked, *args, logit_ids=[5, 17], logits_at="end")
    assert out.end_logits is None and out.logits is None
    got = harvest_with_judge(hooked, pairs)
    assert got.judge_logodds is None
    assert rel_err(got.acts, harvest_pairs(hooked, pairs)) < 1e-6
    assert harvest_with_judge(bridge, pairs).judge_logodds is not None


@needs_hooked
def test_reference_activations_read_the_final_norm_on_both(both, tokenizer):
    """The one-prompt reference reads every default read-out, ``ln_final.hook_out`` (after
    the gain) included, on both backends, and equals the harvest."""
    bridge, hooked = both
    pairs = mixed_pairs(tokenizer)[:3]
    harvested = harvest_pairs(hooked, pairs)
    for i, p in enumerate(pairs):
        ids = list(p.prefix_ids) + [p.final_ids[0]]
        ref_h, ref_b = reference_activations(hooked, ids), reference_activations(bridge, ids)
        assert rel_err(ref_h, ref_b) < 1e-4
        assert rel_err(harvested[i, 0], ref_h) < 1e-4


@needs_hooked
def test_branch_logits_and_final_hooks_agree(both, tokenizer):
    bridge, hooked = both
    pairs = mixed_pairs(tokenizer)
    args = ([p.prefix_ids for p in pairs], [p.final_ids for p in pairs], [p.group for p in pairs])
    names = ["blocks.0.hook_resid_mid", "blocks.1.hook_mlp_out", FINAL_NORM_HOOK]
    kw = dict(names=names, logit_ids=[5, 17, 33], settings=HarvestSettings(token_budget=400))
    want = run_branches(bridge, *args, **kw)
    # final_hooks put the branch tokens in passes of their own on both backends
    for extra in ({}, {"final_hooks": [("hook_embed", lambda x, hook: x)]}):
        got = run_branches(hooked, *args, **extra, **kw)
        assert rel_err(got.acts, want.acts) < 1e-4
        torch.testing.assert_close(got.logits, want.logits, rtol=1e-4, atol=1e-5)


@needs_hooked
def test_final_norm_is_a_hook_name_of_both(both):
    bridge, hooked = both
    check_hook_names(hooked, hook_points("full", hooked.cfg.n_layers))
    assert FINAL_NORM_HOOK not in hooked.hook_dict  # served by hook_normalized
    with pytest.raises(HookError, match="ln_final.hook_normalized"):
        check_hook_names(hooked, ["ln_final.hook_normalised"])


@needs_hooked
def test_zero_shot_probabilities_agree(both):
    bridge, hooked = both
    ds = small_comparisons(10)
    want, got = zero_shot(bridge, ds), zero_shot(hooked, ds)
    np.testing.assert_allclose(got.p_original, want.p_original, atol=1e-5)
    np.testing.assert_allclose(got.p, want.p, atol=1e-5)
    assert np.ptp(got.p_original) > 1e-3  # not a constant: the numbers say something


@needs_hooked
@pytest.mark.parametrize("preset,positions", [("paper", "all"), ("full", "last")])
def test_ablated_runs_agree(both, tokenizer, preset, positions):
    bridge, hooked = both
    pairs = mixed_pairs(tokenizer)[:14]
    r = torch.randn(bridge.cfg.d_model, generator=torch.Generator().manual_seed(0))
    runs = []
    for model in (bridge, hooked):
        hooks, final = ablation_hook_sets(model, r, preset, positions)
        runs.append(harvest_pairs(model, pairs, hooks=hooks, final_hooks=final))
    want, got = runs
    assert rel_err(got, want) < 1e-4
    # The read-outs ablated at the read-out token are free of r, the final norm included.
    unit = r / r.norm()
    final = got[:, :, -1]
    assert float((final @ unit).abs().max()) < 1e-4 * float(final.norm(dim=-1).max())
    assert rel_err(got, harvest_pairs(hooked, pairs)) > 1e-3  # the ablation did something


@needs_hooked
def test_positive_control_equalises_the_two_logits_on_hooked(both, tokenizer):
    """Rejecting W_U[:, a] - W_U[:, b] after the final norm (in after-gain space, mapped back
    through hook_normalized) makes the two logits equal, as on the bridge."""
    _, hooked = both
    pairs = build_contrast_pairs(tokenizer, small_comparisons(6))
    d = unembedding_direction(hooked, 33, 34)
    ids = [list(p.prefix_ids) for p in pairs]
    before = run_branches(hooked, [i[:-1] for i in ids], [(i[-1],) for i in ids],
                          [p.group for p in pairs], logit_ids=[33, 34]).logits[:, 0]
    with ablate(hooked, d, [FINAL_NORM_HOOK]):
        after = run_branches(hooked, [i[:-1] for i in ids], [(i[-1],) for i in ids],
                             [p.group for p in pairs], logit_ids=[33, 34]).logits[:, 0]
    assert float((before[:, 0] - before[:, 1]).abs().max()) > 1e-3
    torch.testing.assert_close(after[:, 0], after[:, 1], rtol=0, atol=1e-5)


@needs_hooked
def test_comparators_agree(both, tokenizer):
    bridge, hooked = both
    items = scored_items(n_ctx=2, per=6)
    ids = list(items)
    train = [(ids[i], ids[j]) for i in range(6) for j in range(i + 1, 6)]
    acts = harvest_pairs(bridge, build_contrast_pairs(tokenizer, comparisons_of(items, train)))
    probe = make_probe("mass_mean").fit(acts[:, :, 1], np.array(
        comparisons_of(items, train).labels()), layer=1)
    asked = [("c1/s0", "c1/s3"), ("c1/s5", "c1/s2"), ("c0/s1", "c0/s4")]
    for cls, args in ((ZeroShotComparator, ()), (ProbeComparator, (probe, 1))):
        want = [cls(bridge, *args, items, META)(a, b) for a, b in asked]
        comp = cls(hooked, *args, items, META)
        got = [comp(a, b) for a, b in asked]
        np.testing.assert_allclose(got, want, atol=1e-5)
        assert comp.runner.n_fallback_rows == 0  # the kept context caches served every row


@needs_hooked
@pytest.mark.integration
def test_embedded_model_harvests_agree(smol, tokenizer):
    hooked = load_model(backend="hooked")
    assert backend_of(hooked) == "hooked"
    assert hooked.ppairs_model_name == smol.ppairs_model_name
    pairs = (build_contrast_pairs(tokenizer, shared_dataset(4, words=60))
             + build_contrast_pairs(tokenizer, small_comparisons(6)))
    settings = HarvestSettings(token_budget=2048)
    want, got = harvest_pairs(smol, pairs, settings), harvest_pairs(hooked, pairs, settings)
    assert got.shape == want.shape
    assert rel_err(got, want) < 1e-4
    assert hook_points(READOUT_PRESET, hooked.cfg.n_layers)[-1] == FINAL_NORM_HOOK
