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
