"""``ppairs-lens sweep`` on the tiny model: bounded judges (``--judges``,
``--judge-max-pairs``), remembered beside the store so a cut run redoes none, an estimate
printed before the model runs, and one table per dataset with every baseline and judge."""

from __future__ import annotations

import json

import pytest

import ppairs_lens.judges.held_out as held_out
import ppairs_lens.models.loading
from analyses.cli import main

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def tiny_loads(tiny, monkeypatch):
    monkeypatch.setattr(ppairs_lens.models.loading, "load_model", lambda *a, **k: tiny)


def sweep(tmp_path, *extra: str) -> list[str]:
    return ["sweep", "--datasets", "larger_number", "--max-pairs", "60", "--n-boot", "50",
            "--stores", str(tmp_path / "stores"), "--out", str(tmp_path / "out"), *extra]


def test_a_cut_sweep_resumes_without_redoing_a_finished_judge(tiny_loads, tmp_path, capsys,
                                                              monkeypatch):
    real_few = held_out.evaluate_few_shot

    def cut(*a, **k):
        raise KeyboardInterrupt  # the user stops the run during the few-shot judge

    monkeypatch.setattr(held_out, "evaluate_few_shot", cut)
    with pytest.raises(KeyboardInterrupt):
        main(sweep(tmp_path, "--judge-max-pairs", "few_shot=10"))
    first = capsys.readouterr().out
    assert "plan:" in first and "estimated model time" in first
    # the finished zero-shot judge is already written, both beside the store and in --out
    written = json.loads((tmp_path / "out" / "layer_sweep_judges.json").read_text())
    (entry,) = written.values()
    assert entry["p_by_pair"] and "few_shot_p_by_pair" not in entry
    assert list((tmp_path / "stores").rglob("judges/zero_shot.json"))

    def never(*a, **k):
        raise AssertionError("a finished judge ran again")

    monkeypatch.setattr(held_out, "evaluate_zero_shot", never)
    monkeypatch.setattr(held_out, "evaluate_few_shot", real_few)
    assert main(sweep(tmp_path, "--judge-max-pairs", "few_shot=10")) == 0
    out = capsys.readouterr().out
    plan = out.split("estimated model time")[0]
    assert "zero_shot" in plan and "on disk, reused" in plan
    assert "judges reused" in out and "zero_shot" in out.split("judges reused")[1]
    table = out.split("estimated model time")[1]
    for name in ("probe supervised", "baseline length", "baseline lexical",
                 "baseline embedding", "judge zero_shot", "judge few_shot"):
        assert name in table, name
    # the few-shot judge ran on its limit only (whole contexts of the test pairs)
    few = next(line for line in table.splitlines() if "judge few_shot" in line)
    assert "on 10 of" in few
    # no held-out item recurs in training: memorisation is n/a with its reason, no constant
    memo = next(line for line in table.splitlines() if "baseline memorisation" in line)
    assert "n/a" in memo and "nothing to memorise" in memo
    assert "held out" in table and "split by context" in table
    # each model step's measured time is set beside its estimate
    compared = out.split("measured vs estimated:")[1]
    assert "zero_shot" in compared and "(estimated on disk)" in compared
    assert "few_shot" in compared and "(estimated ~" in compared

    # a third run: every model step on disk
    monkeypatch.setattr(held_out, "evaluate_few_shot", never)
    assert main(sweep(tmp_path, "--judge-max-pairs", "few_shot=10")) == 0
    assert "every model step on disk" in capsys.readouterr().out
    # another limit is another judge: it runs
    with pytest.raises(AssertionError, match="ran again"):
        main(sweep(tmp_path, "--judge-max-pairs", "few_shot=6"))


def test_judges_can_be_switched_off(tiny_loads, tmp_path, capsys, monkeypatch):
    def never(*a, **k):
        raise AssertionError("a judge ran")

    monkeypatch.setattr(held_out, "evaluate_zero_shot", never)
    monkeypatch.setattr(held_out, "evaluate_few_shot", never)
    assert main(sweep(tmp_path, "--judges", "none")) == 0
    out = capsys.readouterr().out
    assert "judge " not in out.split("estimated model time")[1]
    assert "baseline lexical" in out


def test_bad_judge_options_fail_in_one_line(tiny_loads, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(sweep(tmp_path, "--judge-max-pairs", "five_shot=3"))
    assert "FORM=N" in capsys.readouterr().err
    assert main(sweep(tmp_path, "--judges", "none", "zero_shot")) == 2
    err = capsys.readouterr().err
    assert "--judges none" in err and len(err.strip().splitlines()) == 1


def test_the_estimate_counts_the_tokens_the_runner_plans(tiny):
    """The planned tokens are the plan's, and a harvest's estimate grows with its prompts."""
    from ppairs_lens.activations.prompts import build_contrast_pairs
    from ppairs_lens.data.builtin import builtin_dataset
    from ppairs_lens.judges.run_estimate import (PlannedStep, RunEstimate, estimate_run,
                                                 planned_tokens)

    pairs = build_contrast_pairs(tiny.tokenizer, builtin_dataset("larger_number", n=40))
    unshared = sum(len(p.prefix_ids) + 2 for p in pairs)
    assert 0 < planned_tokens(pairs, harvest=True) < unshared  # contexts shared
    steps = [PlannedStep("d", "harvest", tuple(pairs)),
             PlannedStep("d", "zero_shot", tuple(pairs[:10]), done=True)]
    est = estimate_run(tiny, steps)
    assert set(est.seconds_per_token) == {"harvest"} and est.seconds_per_token["harvest"] > 0
    assert est.timing_seconds > 0
    # a zero-shot prompt is a harvest's prompt: timed once for both
    both = estimate_run(tiny, [steps[0], PlannedStep("d", "zero_shot", tuple(pairs[:10]))])
    assert both.seconds_per_token["zero_shot"] == both.seconds_per_token["harvest"]
    assert est.step_seconds(steps[1]) == 0.0
    # after a step took twice its estimate, what is left is scaled alike
    more = RunEstimate(est.steps + (PlannedStep("e", "harvest", tuple(pairs)),),
                       est.seconds_per_token)
    left = more.remaining({("d", "harvest"): 2 * est.seconds})
    assert "x2.00" in left and f"~{2 * est.seconds:.0f} s" in left
    assert est.seconds == pytest.approx(planned_tokens(pairs, harvest=True)
                                        * est.seconds_per_token["harvest"])


def test_measured_rates_are_remembered_and_a_run_may_skip_measuring(tiny, tmp_path):
    """A rate measured once for this model, device, kind and thread count is reused (nothing
    timed, said so); without measuring, a kind with no remembered rate is left out, said so;
    the time spent measuring counts in the printed total."""
    from ppairs_lens.activations.prompts import build_contrast_pairs
    from ppairs_lens.data.builtin import builtin_dataset
    from ppairs_lens.judges.run_estimate import PlannedStep, estimate_run, rate_key

    pairs = build_contrast_pairs(tiny.tokenizer, builtin_dataset("larger_number", n=20))
    steps = [PlannedStep("d", "harvest", tuple(pairs))]
    rates = tmp_path / "rates.json"
    skipped = estimate_run(tiny, steps, remembered=rates, measure=False)
    assert skipped.unmeasured == ("harvest",) and skipped.seconds == 0.0
    assert "not measured (--no-calibration" in skipped.lines()[-1] and not rates.exists()
    first = estimate_run(tiny, steps, remembered=rates)
    assert first.timing_seconds > 0 and rate_key(tiny, "harvest") in rates.read_text()
    assert f"~{first.seconds + first.timing_seconds:.0f} s" in first.lines()[-1]
    again = estimate_run(tiny, steps, remembered=rates, measure=False)
    assert again.remembered == ("harvest",) and again.unmeasured == ()
    assert again.seconds_per_token == first.seconds_per_token
    assert "as an earlier run on this model measured" in again.lines()[-1]
    rates.write_text('{"%s": "fast"}' % rate_key(tiny, "harvest"))   # not a rate: measured
    assert estimate_run(tiny, steps, remembered=rates).remembered == ()


def test_limits_per_dataset_and_a_smaller_limit_reuses_the_harvest(tiny_loads, tmp_path, capsys,
                                                                    monkeypatch):
    import ppairs_lens.activations.pipeline as pipeline
    from ppairs_lens.activations.store import ActivationStore

    argv = ["sweep", "--datasets", "larger_number", "alphabetical@Alpha", "--n-boot", "30",
            "--judges", "none", "--stores", str(tmp_path / "stores"), "--out",
            str(tmp_path / "out")]
    assert main([*argv, "--max-pairs", "40", "Alpha=50"]) == 0
    first = capsys.readouterr().out
    assert "larger_number-n40s0" in first and "Alpha" in first
    stores = sorted(p.parent for p in (tmp_path / "stores").rglob("metadata.json"))
    assert [ActivationStore.open(p).n_pairs for p in stores] == [50, 40]  # alphabetical first

    def never(*a, **k):
        raise AssertionError("harvested again")

    monkeypatch.setattr(pipeline, "harvest_with_judge", never)
    assert main([*argv, "--max-pairs", "larger_number=30", "Alpha=44"]) == 0
    second = capsys.readouterr().out
    assert "larger_number-n30s0" in second
    plan = second.split("estimated model time")[0]
    assert "harvest" in plan and "on disk, reused" in plan
    assert sorted(p.parent for p in (tmp_path / "stores").rglob("metadata.json")) == stores
    with pytest.raises(AssertionError, match="harvested again"):  # a larger limit adds pairs
        main([*argv, "--max-pairs", "Alpha=60"])
