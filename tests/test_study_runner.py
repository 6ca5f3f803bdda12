from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from jaxtyping import Float

from ppairs_lens.errors import PPairsError
from ppairs_lens.io.records import record_from_data
from ppairs_lens.io.study_runner import StudyRunner


def test_a_finished_step_is_reused_until_its_inputs_change(tmp_path):
    calls = []

    def work():
        calls.append(1)
        return {"x": len(calls)}

    r = StudyRunner(tmp_path, 3)
    assert r.step("s", work, a=1) == {"x": 1}
    r2 = StudyRunner(tmp_path, 3)
    assert r2.step("s", work, a=1) == {"x": 1} and r2.reused == ["s"]
    assert r2.step("s", work, a=2) == {"x": 2}            # new inputs: recomputed
    assert StudyRunner(tmp_path, 1, reuse=False).step("s", work, a=2) == {"x": 3}
    assert set(r2.timings) == {"s"}


def test_each_step_prints_its_rate_and_close_prints_every_share(tmp_path, capsys):
    r = StudyRunner(tmp_path, 3)
    r.timed("harvest", lambda: sum(range(10**5)), units=(1000, "pairs"))
    r.step("judges", lambda: {"n": 50}, units=lambda res: (res["n"], "prompts"), a=1)
    r.step("no count", lambda: {}, a=1)
    r.close()
    out = capsys.readouterr().err + capsys.readouterr().out
    assert "pairs/s (1,000)" in r.rates["harvest"] and "prompts/s (50)" in r.rates["judges"]
    assert "no count" not in r.rates
    lines = r.shares()
    assert len(lines) == 3 and all("%" in ln for ln in lines)
    shares = [float(ln.split("%")[0].split()[-1]) for ln in lines]
    assert abs(sum(shares) - 100) < 0.5
    again = StudyRunner(tmp_path, 3)
    again.step("judges", lambda: {"n": 50}, units=lambda res: (res["n"], "prompts"), a=1)
    assert again.reused == ["judges"] and "judges" not in again.rates  # reused: no work, no rate


@dataclass(frozen=True)
class _Inner:
    p: Float[np.ndarray, " n"]
    ids: tuple[str, ...]


@dataclass(frozen=True)
class _Result:
    name: str
    inner: _Inner
    by_pair: dict[str, float]
    skipped: str | None = None
    arr: np.ndarray | None = None


def test_a_declared_record_comes_back_as_that_record_fresh_and_reused(tmp_path):
    made = _Result("d", _Inner(np.array([0.1, float("nan"), 1 / 3]), ("a", "b", "c")),
                   {"a": 0.25}, arr=np.array([2.0]))

    def work() -> dict[str, _Result]:
        return {"d": made}

    fresh = StudyRunner(tmp_path, 1).step("s", work, a=1)
    again = StudyRunner(tmp_path, 1)
    reused = again.step("s", work, a=1)
    assert again.reused == ["s"]
    for got in (fresh, reused):
        r = got["d"]
        assert isinstance(r, _Result) and isinstance(r.inner, _Inner)
        assert r.inner.ids == ("a", "b", "c") and r.by_pair == {"a": 0.25} and r.skipped is None
        np.testing.assert_array_equal(r.inner.p, made.inner.p)   # exact, NaN kept
        assert r.inner.p.dtype == np.float64 and list(r.arr) == [2.0]


def test_record_data_that_does_not_fit_is_refused_naming_the_field():
    with pytest.raises(PPairsError, match=r"result\.inner: extra fields found \(x\)"):
        record_from_data(_Result, {"name": "d", "inner": {"p": [], "ids": [], "x": 1},
                                   "by_pair": {}})
    assert record_from_data(tuple[int, ...], [1, 2]) == (1, 2)
    assert record_from_data(list[_Inner] | None, None) is None
