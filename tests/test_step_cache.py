"""The step cache: a finished step is reused under the same key, recomputed under another,
and a plan can ask beforehand whether a step would be reused (``has``)."""

from ppairs_lens.io.step_cache import StepCache


def test_a_step_is_reused_only_under_its_key_and_has_says_so(tmp_path):
    cache = StepCache(tmp_path, code_packages=("ppairs_lens.io",))
    calls = []

    def step():
        calls.append(1)
        return {"x": 1.5}

    key = cache.key("judge", store="abc", max_pairs=10)
    assert not cache.has("judge", key)
    assert cache.run("judge", key, step) == ({"x": 1.5}, False)
    assert cache.has("judge", key)
    assert cache.run("judge", key, step) == ({"x": 1.5}, True) and len(calls) == 1
    other = cache.key("judge", store="abc", max_pairs=6)
    assert other != key and not cache.has("judge", other)
    (tmp_path / "judge.json").write_text("{broken")      # a damaged record: recomputed
    assert not cache.has("judge", key)
    assert cache.run("judge", key, step) == ({"x": 1.5}, False) and len(calls) == 2
    assert not StepCache(tmp_path, enabled=False).has("judge", key)
