"""SAE latents as read-outs: a SAELens ``HookedSAETransformer`` with an SAE attached is
harvested like any model, its latents named by their hook points.

Needs SAELens (``pip install ppairs-lens[sae]``, with transformer-lens>=3.9,<4 for
HookedTransformer); skipped, with the reason printed, where it is absent.
"""

from __future__ import annotations

import pytest
import torch

sae_lens = pytest.importorskip(
    "sae_lens", reason="sae_lens is not installed: SAE read-outs need ppairs-lens[sae] "
    "(SAELens, with transformer-lens>=3.9,<4)")

from ppairs_lens.activations.harvest import harvest_pairs, reference_activations  # noqa: E402
from ppairs_lens.activations.pipeline import ensure_store  # noqa: E402
from ppairs_lens.activations.prompts import build_contrast_pairs  # noqa: E402
from ppairs_lens.errors import HookError  # noqa: E402
from tests.conftest import small_comparisons  # noqa: E402

SAE_HOOK = "blocks.0.hook_resid_post"
LATENTS = f"{SAE_HOOK}.hook_sae_acts_post"


def sae_model(tokenizer, d_sae: int, seed: int = 0):
    """The tiny Llama as a HookedSAETransformer (raw weights, as ppairs_lens.models.hooked
    loads them) with a randomly initialised SAE of ``d_sae`` latents on ``SAE_HOOK``."""
    from sae_lens import HookedSAETransformer, StandardSAE, StandardSAEConfig
    from sae_lens.saes.sae import SAEMetadata

    from ppairs_lens.models.hooked import converter, hooked_config_from_hf
    from ppairs_lens.models.tiny import tiny_hf_model

    hf = tiny_hf_model(tokenizer, seed)
    cfg = hooked_config_from_hf(hf.config, architecture="LlamaForCausalLM",
                                model_name="tiny-sae")
    model = HookedSAETransformer(cfg, tokenizer=tokenizer)
    model.load_and_process_state_dict(converter(cfg.original_architecture)(hf, cfg),
                                      fold_ln=False, center_writing_weights=False,
                                      center_unembed=False, fold_value_biases=False)
    model.eval()
    model.ppairs_model_name = f"tiny-sae-{d_sae}"
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        sae = StandardSAE(StandardSAEConfig(d_in=cfg.d_model, d_sae=d_sae,
                                            metadata=SAEMetadata(hook_name=SAE_HOOK)))
    model.add_sae(sae)
    return model


def test_sae_latents_are_harvested_and_stored(tokenizer, tmp_path):
    model = sae_model(tokenizer, d_sae=64)  # as wide as the residual stream: storable
    dataset = small_comparisons(4)
    pairs = build_contrast_pairs(tokenizer, dataset)
    names = ["blocks.*.hook_resid_post.hook_sae_acts_post", "blocks.1.hook_resid_post"]
    acts = harvest_pairs(model, pairs, names=names)
    assert acts.shape == (4, 2, 2, 64)
    assert (acts[:, :, 0] >= 0).all() and (acts[:, :, 0] > 0).any()  # ReLU latents, not all 0
    for i, p in enumerate(pairs):
        for side in (0, 1):
            ref = reference_activations(model, list(p.prefix_ids) + [p.final_ids[side]],
                                        names=names)
            torch.testing.assert_close(acts[i, side], ref, atol=1e-4, rtol=1e-4)
    store = ensure_store(model, dataset, tmp_path, names=names, progress=False)
    assert store.hook_names == [LATENTS, "blocks.1.hook_resid_post"]
    torch.testing.assert_close(store.load(), acts)


def test_latents_of_any_width_are_harvested_stored_probed_and_attributed(tokenizer, tmp_path):
    """d_sae = 4 x d_model: the store records the width; sweeps and probes run on the
    latents; sae_attribution reads a residual-stream direction in the SAE's features."""
    from ppairs_lens.probes.estimators import make_probe
    from ppairs_lens.probes.sae_features import sae_attribution
    from ppairs_lens.probes.sweep import fit_sweep

    from ppairs_lens.data import builtin_dataset

    model = sae_model(tokenizer, d_sae=256)
    dataset = builtin_dataset("larger_number", n=8)
    store = ensure_store(model, dataset, tmp_path, names=[LATENTS], progress=False)
    assert store.d_model == 256 and store.meta.readout_widths == (256,)
    acts, labels = store.load(), store.labels()
    assert acts.shape == (8, 2, 1, 256)
    sweep = fit_sweep(acts, labels, kinds=("mass_mean",))
    assert sweep.d_model == 256
    resid = ensure_store(model, dataset, tmp_path, names=[f"{SAE_HOOK}.hook_sae_input"],
                         progress=False)  # the residual stream the SAE reads
    x = resid.load()[:, :, 0]
    probe = make_probe("mass_mean").fit(x, labels)
    sae = next(iter(model.acts_to_saes.values()))
    att = sae_attribution(probe.direction_, sae, k=5, acts=x, labels=labels)
    assert len(att.latents) == 5 == len(set(att.latents))
    assert all(abs(c) <= 1 for c in att.cosines)
    assert abs(att.cosines[0]) >= abs(att.cosines[-1])
    assert len(att.response_difference) == 5
    with pytest.raises(HookError, match="different widths"):
        harvest_pairs(model, build_contrast_pairs(tokenizer, small_comparisons(2)),
                      names=[LATENTS, "blocks.1.hook_resid_post"])
