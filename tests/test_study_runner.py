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
