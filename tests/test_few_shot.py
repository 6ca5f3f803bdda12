"""The few-shot prompted judge (ppairs_lens.judges.few_shot), on the tiny random model."""

from __future__ import annotations

import numpy as np
import pytest

from ppairs_lens.judges.calibration import TIE_LOGODDS
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.activations.prefix_sharing import plan
from ppairs_lens.activations.prompts import ComparisonTemplate, chat_turns_text
from ppairs_lens.data.records import Comparison, Dataset, Statement
from ppairs_lens.errors import DataError
from ppairs_lens.judges.few_shot import (
    DEMO_GROUP,
    build_few_shot_pairs,
    evaluate_few_shot,
    few_shot,
    record_group,
    select_demos,
)
from ppairs_lens.judges.zero_shot import swapped_dataset, zero_shot

NUMBERS = [str(n) for n in (3, 17, 28, 41, 56, 64, 72, 85, 90, 99, 105, 230, 318, 404, 517,
                            622, 731, 845, 958, 999)]


def numbers(idx: list[tuple[int, int]], prefix: str, groups: bool = True) -> Dataset:
    """Comparisons of NUMBERS[i] vs NUMBERS[j]; a pair's group is its first item."""
    recs = []
    for k, (i, j) in enumerate(idx):
        a, b = NUMBERS[i], NUMBERS[j]
        recs.append(Comparison(f"{prefix}{k}", a, b, 1 if int(a) > int(b) else 2,
                               item1_id=a, item2_id=b, group_id=f"g{i}" if groups else None))
    return Dataset(prefix, "comparison", recs, aspect="larger", item_name="number")


@pytest.fixture(scope="module")
def split():
    train = numbers([(i, j) for i in range(0, 12) for j in range(i + 1, 12)][:30], "tr")
    # Evaluated: items 10..19, so train pairs with items 10 or 11 must be left out.
    test = numbers([(10, 14), (15, 11), (12, 19), (18, 13), (16, 17), (19, 10)], "te")
    return train, test


def test_demos_never_touch_evaluated_records_groups_or_items(split):
    train, test = split
    test_items = {x for r in test.records for x in (r.item1, r.item2)}
    test_groups = {record_group(r) for r in test.records}
    for seed in range(5):
        demos = select_demos(train, test, k=6, seed=seed)
        assert len(demos) == 6
        assert sorted(d.answer for d in demos) == [0, 0, 0, 1, 1, 1]  # balanced answers
        for d in demos:
            r = d.record
            assert r.pair_id.startswith("tr")
            assert not {r.item1, r.item2} & test_items
            assert record_group(r) not in test_groups
            # the answer is the record's own answer as presented
            assert d.answer == (0 if r.label == 1 else 1)
    # seeded: same seed, same demos; another seed, others
    ids = [d.record.pair_id for d in select_demos(train, test, k=4, seed=1)]
    assert ids == [d.record.pair_id for d in select_demos(train, test, k=4, seed=1)]
    assert any(ids != [d.record.pair_id for d in select_demos(train, test, k=4, seed=s)]
               for s in range(2, 6))


def test_demos_refuse_a_group_shared_with_the_evaluated_records(split):
    train, _ = split
    # Evaluating train's own first record: nothing of group g0 may be a demo.
    own = Dataset("own", "comparison", train.records[:1], aspect="larger", item_name="number")
    for d in select_demos(train, own, k=6, seed=0):
        assert record_group(d.record) != "g0"
        assert d.record.pair_id != train.records[0].pair_id


def test_too_few_demos_is_a_clear_error(split):
    train, test = split
    with pytest.raises(DataError, match="few-shot needs 40"):
        select_demos(train, test, k=40)
    with pytest.raises(DataError, match="cannot serve"):
        select_demos(Dataset("s", "statement", []), test)


def test_prompts_share_the_demonstrations_as_one_prefix(tiny, split):
    train, test = split
    demos = select_demos(train, test, k=4, seed=0)
    pairs = build_few_shot_pairs(tiny.tokenizer, test, demos)
    assert {p.group for p in pairs} == {DEMO_GROUP}
    texts = [tiny.tokenizer.decode(p.prefix_ids) for p in pairs]
    demo_end = texts[0].rfind("Between Choice 1 and Choice 2, the larger number is Choice ")
    for t, rec in zip(texts, test.records):
        for d in demos:  # each demonstration and its answer, before the question
            assert f"Choice 1:\n{d.record.item1}\n" in t
        assert t.count("the larger number is Choice 1<|im_end|>") == 2
        assert t.count("the larger number is Choice 2<|im_end|>") == 2
        assert t.endswith(f"Choice 2:\n{rec.item2}\n\nWhich number is larger? Answers must be "
                          "a single choice.<|im_end|>\n<|im_start|>assistant\nBetween Choice 1 "
                          "and Choice 2, the larger number is Choice ")
        assert t.rfind("Between Choice 1") == demo_end  # same place: same prefix
    # The plan runs the demonstrations once: one group whose context holds all of them.
    prefixes = [p.prefix_ids[:-1] for p in pairs]
    (g,) = plan(prefixes, [p.group for p in pairs])
    assert len(tiny.tokenizer.decode(g.context)) > texts[0].rfind("<|im_start|>user")


def test_few_shot_result_shape_and_swap_antisymmetry(tiny, split):
    train, test = split
    demos = select_demos(train, test, k=4, seed=0)
    res = few_shot(tiny, test, train, demos=demos)
    n = len(test)
    assert res.p.shape == res.z.shape == res.ld_original.shape == res.ld_swapped.shape == (n,)
    assert res.n_rows == 2 * n
    z = (res.ld_original - res.ld_swapped) / 2
    np.testing.assert_allclose(res.z, np.where(np.abs(z) < TIE_LOGODDS, 0.0, z), atol=1e-12)
    # The test pair swapped (demonstrations unchanged) gives exactly the other sign.
    flipped = few_shot(tiny, swapped_dataset(test), train, demos=demos)
    np.testing.assert_allclose(flipped.z, -res.z, atol=1e-4)
    # Demonstrations change the answer: not the zero-shot numbers.
    assert not np.allclose(res.ld_original, zero_shot(tiny, test).ld_original, atol=1e-3)
    # Prefix sharing changes no number.
    plain = few_shot(tiny, test, train, demos=demos,
                     settings=HarvestSettings(share_prefixes=False))
    np.testing.assert_allclose(plain.ld_original, res.ld_original, atol=1e-4)


def test_zero_demonstrations_is_the_zero_shot_judge(tiny, split):
    train, test = split
    res = few_shot(tiny, test, train, k=0)
    np.testing.assert_allclose(res.z, zero_shot(tiny, test).z, atol=1e-4)
    assert chat_turns_text(tiny.tokenizer, None, [], "hi") == \
        tiny.tokenizer.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                           add_generation_prompt=True)


def test_statement_demos_are_half_true_and_the_report_lists_them(tiny):
    recs = [Statement(f"s{i}", f"The number {i} is even.", i % 2 == 0, group_id=f"n{i}")
            for i in range(12)]
    train = Dataset("st_train", "statement", recs[:8])
    test = Dataset("st_test", "statement", recs[8:])
    demos = select_demos(train, test, k=4, seed=3)
    assert sorted(d.answer for d in demos) == [0, 0, 1, 1]
    assert all(d.answer == (0 if d.record.label else 1) for d in demos)
    rep = evaluate_few_shot(tiny, test, train, k=4, seed=3)
    assert rep["few_shot"]["demo_pair_ids"] == [d.record.pair_id for d in demos]
    assert sorted(rep["few_shot"]["demo_answers"]) == [1, 1, 2, 2]
    assert set(rep["p_by_pair"]) == {r.pair_id for r in test.records}
    assert rep["n_rows"] == 4 and not rep["calibrated"]
    assert rep["diagnostics"]["same_raw_answer_share"] is None


def test_a_custom_template_answers_in_its_own_format(tiny, split):
    train, test = split
    tpl = ComparisonTemplate(assistant="My answer: Choice ")
    demos = select_demos(train, test, k=2, seed=0)
    (p, *_) = build_few_shot_pairs(tiny.tokenizer, test, demos, tpl)
    text = tiny.tokenizer.decode(p.prefix_ids)
    assert text.count("My answer: Choice 1<|im_end|>") + \
        text.count("My answer: Choice 2<|im_end|>") == 2
