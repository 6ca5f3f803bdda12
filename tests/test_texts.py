"""harvest_texts: the user's own prompt texts and two continuations, harvested as contrast pairs."""

from __future__ import annotations

import pytest
import torch

import ppairs_lens as pl
from ppairs_lens.activations.harvest import harvest_pairs
from ppairs_lens.activations.prompts import (
    ComparisonTemplate,
    build_contrast_pairs,
    prompt_prefix_text,
)
from ppairs_lens.errors import HookError, TemplateError
from tests.conftest import small_comparisons


def test_texts_equal_the_standard_harvest(tiny):
    dataset = small_comparisons(6)
    template = ComparisonTemplate()
    pairs = build_contrast_pairs(tiny.tokenizer, dataset, template)
    texts = [prompt_prefix_text(tiny.tokenizer, template, dataset, r) for r in dataset.records]

    mine = pl.text_pairs(tiny.tokenizer, texts, template.choices)
    assert [(p.prefix_ids, p.final_ids) for p in mine] == [(p.prefix_ids, p.final_ids)
                                                           for p in pairs]
    got = pl.harvest_texts(tiny, texts, choices=template.choices)
    want = harvest_pairs(tiny, pairs)
    assert got.shape == want.shape == (6, 2, tiny.cfg.n_layers + 1, tiny.cfg.d_model)
    # Grouped differently (one group here, by context there): other batches, same values.
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    assert not torch.equal(got[:, 0], got[:, 1])  # the two sides really differ


def test_texts_take_read_out_names(tiny):
    texts = ["Is 7 larger than 3? Answer:", "Is 2 larger than 9? Answer:"]
    got = pl.harvest_texts(tiny, texts, (" yes", " no"), names="blocks.*.hook_resid_pre")
    assert got.shape == (2, 2, tiny.cfg.n_layers, tiny.cfg.d_model)
    full = pl.harvest_texts(tiny, texts, (" yes", " no"))
    # resid_pre of block 1 is resid_post of block 0
    torch.testing.assert_close(got[:, :, 1], full[:, :, 0])
    with pytest.raises(HookError, match="matches no hook point"):
        pl.harvest_texts(tiny, texts, (" yes", " no"), names="blocks.*.hook_resid_prex")


def test_a_prompt_whose_choices_are_several_tokens_is_refused_by_index(tokenizer):
    with pytest.raises(TemplateError, match=r"prompt 0 'Answer:'.*'Ġapple', 'Ġpie'"):
        pl.text_pairs(tokenizer, ["Answer:"], (" apple pie", " banana"))
    # Only the second prompt merges the choice into its last word ("Thi" + "s" = "This").
    with pytest.raises(TemplateError, match=r"^prompt 1 'Thi':"):
        pl.text_pairs(tokenizer, ["x =", "Thi"], ("s", "d"))


@pytest.mark.parametrize("prompts, choices, match", [
    ("one string", ("1", "2"), "not one string"),
    ([], ("1", "2"), "no prompts"),
    (["a"], ("1", "1"), "two different"),
    (["a", 3], ("1", "2"), "prompt 1 is a int"),
])
def test_bad_arguments_are_refused(tokenizer, prompts, choices, match):
    with pytest.raises(TemplateError, match=match):
        pl.text_pairs(tokenizer, prompts, choices)
