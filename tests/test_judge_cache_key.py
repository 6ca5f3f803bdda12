"""A remembered judge is keyed by what the model is asked (model, prompts from the template
and demonstrations, form, pair ids, settings), not by the package's code: an unrelated code
change reuses it, a changed template or form wording recomputes it."""

from __future__ import annotations

from dataclasses import replace

import pytest

import ppairs_lens.io.step_cache
import ppairs_lens.judges.held_out as held_out
from ppairs_lens.activations.pipeline import ensure_store
from ppairs_lens.activations.prompts import ComparisonTemplate
from ppairs_lens.data.builtin import builtin_dataset
from ppairs_lens.judges.held_out import judge_every_pair, judge_held_out

pytestmark = pytest.mark.usefixtures("one_torch_thread")

KW = {"test_size": 0.3, "split_by": "auto", "seed": 0, "few_shot_k": 2,
      "forms": ("zero_shot", "few_shot"), "max_pairs": {"few_shot": 6}}


@pytest.fixture(scope="module")
def numbers(tiny, tmp_path_factory):
    ds = builtin_dataset("larger_number", n=60)
    return ds, ensure_store(tiny, ds, tmp_path_factory.mktemp("stores"), progress=False)


def test_an_unrelated_code_change_reuses_finished_judges(tiny, numbers, tmp_path,
                                                         monkeypatch):
    ds, store = numbers
    first = judge_held_out(tiny, store, ds, cache_dir=tmp_path, **KW)
    assert first.reused == ()
    # any edit of the package's source changes every code digest
    monkeypatch.setattr(ppairs_lens.io.step_cache, "code_digest", lambda *p: "edited source")
    again = judge_held_out(tiny, store, ds, cache_dir=tmp_path, **KW)
    assert again.reused == ("zero_shot", "few_shot")
    assert again.zero_shot["p_by_pair"] == first.zero_shot["p_by_pair"]
    # the check can fail: a step cache keyed on code redoes the step under the same edit
    coded = ppairs_lens.io.step_cache.StepCache(tmp_path / "coded", code_packages=("x",))
    k1 = coded.key("zero_shot", a=1)
    monkeypatch.setattr(ppairs_lens.io.step_cache, "code_digest", lambda *p: "again edited")
    assert coded.key("zero_shot", a=1) != k1


def test_a_changed_template_recomputes(tiny, numbers, tmp_path):
    ds, store = numbers
    judge_held_out(tiny, store, ds, cache_dir=tmp_path, **KW)
    other = ensure_store(tiny, ds, tmp_path / "other",
                         template=replace(ComparisonTemplate(),
                                          assistant="My verdict: the {comparative} {item} is "
                                                    "Choice"), progress=False)
    res = judge_held_out(tiny, other, ds, cache_dir=tmp_path, **KW)   # same cache folder
    assert res.reused == ()
    assert judge_held_out(tiny, other, ds, cache_dir=tmp_path, **KW).reused == (
        "zero_shot", "few_shot")


def test_a_changed_form_wording_or_setting_recomputes_that_form_only(tiny, numbers, tmp_path,
                                                                     monkeypatch):
    ds, store = numbers
    judge_held_out(tiny, store, ds, cache_dir=tmp_path, **KW)
    assert judge_held_out(tiny, store, ds, cache_dir=tmp_path,
                          **{**KW, "few_shot_k": 4}).reused == ("zero_shot",)
    original = held_out.few_shot_prompts

    def reworded(tokenizer, part, demos, template):   # the few-shot preamble edited
        return [replace(p, prefix_ids=(p.prefix_ids[0], *p.prefix_ids))
                for p in original(tokenizer, part, demos, template)]
    monkeypatch.setattr(held_out, "few_shot_prompts", reworded)
    assert judge_held_out(tiny, store, ds, cache_dir=tmp_path,
                          **{**KW, "few_shot_k": 4}).reused == ("zero_shot",)


def test_every_pair_judges_are_remembered_per_form(tiny, numbers, tmp_path):
    ds, store = numbers
    train = builtin_dataset("larger_number", n=40, seed=7)
    args = {"forms": ("zero_shot", "few_shot"), "train": train, "k": 2,
            "max_pairs": {"few_shot": 6}, "cache_dir": tmp_path}
    res = judge_every_pair(tiny, store, ds, **args)
    assert len(res["zero_shot"]["p_by_pair"]) == store.n_pairs
    assert 0 < len(res["few_shot"]["p_by_pair"]) <= 6
    assert {f.name for f in tmp_path.iterdir()} == {"zero_shot_every_pair.json",
                                                    "few_shot_every_pair.json"}
    stamp = {f: f.stat().st_mtime_ns for f in tmp_path.iterdir()}
    assert judge_every_pair(tiny, store, ds, **args) == res
    assert {f: f.stat().st_mtime_ns for f in tmp_path.iterdir()} == stamp
