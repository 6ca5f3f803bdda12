import pytest

from ppairs_lens.errors import TemplateError
from ppairs_lens.activations.prompts import (
    ComparisonTemplate,
    StatementTemplate,
    build_contrast_pairs,
    comparative,
    prompt_prefix_text,
)
from ppairs_lens.data.records import Dataset, Statement

from .conftest import small_comparisons


def test_contrast_pairs_differ_only_in_final_token(tokenizer):
    ds = small_comparisons()
    for pair, rec in zip(build_contrast_pairs(tokenizer, ds), ds.records):
        a = tokenizer(prompt_prefix_text(tokenizer, ComparisonTemplate(), ds, rec) + "1",
                      add_special_tokens=False).input_ids
        b = tokenizer(prompt_prefix_text(tokenizer, ComparisonTemplate(), ds, rec) + "2",
                      add_special_tokens=False).input_ids
        assert list(pair.prefix_ids) + [pair.final_ids[0]] == a
        assert list(pair.prefix_ids) + [pair.final_ids[1]] == b
        assert a[:-1] == b[:-1] and a[-1] != b[-1]
        assert pair.label == rec.label


def test_prompt_reads_like_the_paper(tokenizer):
    ds = small_comparisons()
    text = prompt_prefix_text(tokenizer, ComparisonTemplate(), ds, ds.records[0])
    assert "Choice 1:" in text and "Choice 2:" in text
    assert "Answers must be a single choice." in text
    assert text.endswith("Between Choice 1 and Choice 2, the larger number is Choice ")
    assert text.startswith("<|im_start|>")  # rendered through the chat template
    assert text.count("<|im_start|>") == 3  # system (default), user, assistant: no double BOS


def test_breaking_template_is_named(tokenizer):
    bad = ComparisonTemplate(choices=("1 and more", "2"))
    with pytest.raises(TemplateError, match="ComparisonTemplate"):
        build_contrast_pairs(tokenizer, small_comparisons(), bad)
    merged = StatementTemplate(assistant="The statement is ", choices=("True", "False"))
    ds = Dataset("s", "statement", [Statement("s0", "Paris is in France.", True)])
    with pytest.raises(TemplateError, match="StatementTemplate"):
        build_contrast_pairs(tokenizer, ds, merged)


def test_statement_pairs(tokenizer):
    ds = Dataset("s", "statement", [Statement("s0", "Paris is in France.", True),
                                    Statement("s1", "Paris is in Peru.", False)])
    pairs = build_contrast_pairs(tokenizer, ds)
    assert [p.label for p in pairs] == [1, 2]
    assert tokenizer.convert_ids_to_tokens(list(pairs[0].final_ids)) == ["ĠTrue", "ĠFalse"]


@pytest.mark.parametrize("aspect,expected", [("coherent", "more coherent"), ("larger", "larger"),
                                             ("more fluent", "more fluent"),
                                             ("earlier in alphabetical order",
                                              "earlier in alphabetical order")])
def test_comparative(aspect, expected):
    assert comparative(aspect) == expected
