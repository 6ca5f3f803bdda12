"""``ablate``, ``steer``, ``finetune``, ``rank`` and ``run`` print their plan of model passes
and an estimated model time before the first one, as ``sweep`` does; ``--no-calibration``
times nothing (the kinds with no remembered rate are left out and named), and a pass whose
rate cannot be measured on a few prompts is planned by its size and named."""

from __future__ import annotations

import pytest
import torch

import ppairs_lens.judges.run_estimate as run_estimate
import ppairs_lens.models.loading
from analyses.cli import main

pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture
def tiny_loads(tiny, monkeypatch):
    monkeypatch.setattr(ppairs_lens.models.loading, "load_model", lambda *a, **k: tiny)


@pytest.fixture
def no_rates(tmp_path, monkeypatch):
    """A rates file of this test's own, empty: every kind is measured or left out here."""
    path = tmp_path / "rates.json"
    monkeypatch.setattr(run_estimate, "remembered_rates", lambda: path)
    return path


@pytest.fixture
def nothing_timed(monkeypatch):
    """Fails a test whose run times a prompt for its estimate."""
    def never(*a, **k):
        raise AssertionError("timed a prompt with --no-calibration")

    monkeypatch.setattr(run_estimate, "_run", never)


def where(tmp_path) -> list[str]:
    return ["--stores", str(tmp_path / "stores"), "--out", str(tmp_path / "out")]


def plan_of(out: str) -> str:
    """The plan, up to and with its estimate line."""
    assert "plan:" in out, out
    start = out.index("plan:")
    end = out.index("\n", out.index("estimated model time", start))
    return out[start:end]


ABLATE = ["ablate", "--datasets", "larger_number", "--max-pairs", "24", "--quick",
          "--n-random", "3", "--n-matched", "2", "--n-boot", "30"]
STEER = ["steer", "--datasets", "larger_number", "--max-pairs", "24", "--quick",
         "--n-random", "2", "--n-matched", "2", "--alphas", "-1", "1", "--n-boot", "30"]


@pytest.mark.parametrize("argv, kind, reads, work", [
    # baseline, 3 kinds, control, 5 nulls; the read-out control rides the first preset
    (ABLATE, "ablated_judge", 2 + 3 + 3 + 2 + 1, "directions at read-out"),
    (STEER, "steered_judge", 1 + 2 * (3 + 2 + 2), "directions x 2 alphas"),  # unsteered + A x D
])
def test_an_intervention_command_plans_and_estimates_its_judge(argv, kind, reads, work,
                                                               tiny_loads, no_rates, tmp_path,
                                                               capsys):
    assert main([*argv, *where(tmp_path)]) == 0
    out = capsys.readouterr().out
    plan = plan_of(out)
    assert "harvest" in plan and kind in plan and f"x {reads} read-outs" in plan
    assert f"{kind} measured on" in plan and "counted in the total" in plan
    assert out.index("estimated model time") < out.index(work)   # before the work
    assert kind in no_rates.read_text()       # the measured rate is remembered


@pytest.mark.parametrize("argv, kind", [(ABLATE, "ablated_judge"), (STEER, "steered_judge")])
def test_without_calibration_nothing_is_timed(argv, kind, tiny_loads, no_rates, nothing_timed,
                                              tmp_path, capsys):
    assert main([*argv, *where(tmp_path), "--no-calibration"]) == 0
    plan = plan_of(capsys.readouterr().out)
    assert "not measured (--no-calibration" in plan and kind in plan.splitlines()[-1]
    assert "~0 s" in plan.splitlines()[-1] and not no_rates.exists()


def test_an_intervened_judges_estimate_counts_its_read_outs(tiny):
    """Each read-out branch is a token the runner computes: more branches, more tokens; the
    timing runs the step's own kind of hooks at its points."""
    from ppairs_lens.activations.prompts import build_contrast_pairs
    from ppairs_lens.data.builtin import builtin_dataset
    from ppairs_lens.judges.run_estimate import PlannedStep, estimate_run, planned_tokens

    pairs = tuple(build_contrast_pairs(tiny.tokenizer, builtin_dataset("larger_number", n=12)))
    one, many = (planned_tokens(pairs, branches=b) for b in (1, 9))
    assert many - one == 8 * len(pairs)
    from ppairs_lens.interventions.batched import batched_rejection_hooks

    made = []

    def hooks(model):
        made.append(model)
        return batched_rejection_hooks(model, torch.zeros(9, model.cfg.d_model), "paper")

    steps = [PlannedStep("d", "ablated_judge", pairs, branches=9, final_hooks=hooks),
             PlannedStep("d", "steered_judge", pairs, branches=9),
             PlannedStep.untimed("d", "training", 40, "steps")]
    est = estimate_run(tiny, steps)
    assert made == [tiny, tiny]          # the warm-up pass and the timed one
    assert set(est.seconds_per_token) == {"ablated_judge", "steered_judge"}
    assert est.step_seconds(steps[0]) == pytest.approx(many * est.seconds_per_token[
        "ablated_judge"])
    assert est.step_seconds(steps[2]) == 0.0
    lines = est.lines()
    assert "40 steps  not estimated" in lines[2]
    assert "training: no rate of their kind: left out" in lines[-1]


class Stop(Exception):
    """Raised where the command's first model work starts: the plan is what is checked."""


def stop(*a, **k):
    raise Stop


FINETUNE = ["finetune", "--quick", "--datasets", "alphabetical", "--max-pairs", "30",
            "--max-train", "8", "--curve-sizes", "4", "8"]
RANK = ["rank", "--quick", "--datasets", "story_sentiment"]
RUN = ["run", "--builtins", "--quick", "--max-pairs", "24"]


@pytest.fixture
def stopped_before_the_work(monkeypatch):
    import analyses.ranking
    import analyses.replication.run
    import ppairs_lens.activations.pipeline

    monkeypatch.setattr(ppairs_lens.activations.pipeline, "ensure_store", stop)   # finetune
    monkeypatch.setattr(analyses.ranking, "run_ranking", stop)
    monkeypatch.setattr(analyses.replication.run, "ensure_stores", stop)


@pytest.mark.parametrize("argv, timed, untimed", [
    # the probes' training harvest is timed; a finetuned copy's steps and reads are not
    (FINETUNE, ["harvest", "zero_shot"], ["lora training", "lora reads", "full training",
                                          "full reads"]),
    # the sorts' comparisons depend on the answers; direct scoring has prompts of its own
    (RANK, ["harvest"], ["probe sorts", "zero_shot sorts", "direct scoring"]),
    # the harvests and the judge study; the later model steps by name
    (RUN, ["harvest", "zero_shot"], ["ablation", "steering", "finetuning", "controls"]),
])
def test_every_other_model_command_plans_before_its_work(argv, timed, untimed, tiny_loads,
                                                         no_rates, stopped_before_the_work,
                                                         tmp_path, capsys):
    with pytest.raises(Stop):
        main([*argv, *where(tmp_path)])
    captured = capsys.readouterr()
    plan = plan_of(captured.out + captured.err)     # run logs through tqdm.write
    total = plan.splitlines()[-1]
    assert "counted in the total" in total
    for kind in timed:
        assert kind in total and f" {kind} " in plan, kind
    for kind in untimed:
        assert f"{kind}" in plan and "not estimated" in plan, kind
    assert "no rate of their kind: left out" in total and untimed[0] in total
    assert no_rates.exists()


@pytest.mark.parametrize("argv", [FINETUNE, RANK, RUN])
def test_without_calibration_no_other_command_times_a_prompt(argv, tiny_loads, no_rates,
                                                             nothing_timed,
                                                             stopped_before_the_work, tmp_path,
                                                             capsys):
    with pytest.raises(Stop):
        main([*argv, *where(tmp_path), "--no-calibration"])
    captured = capsys.readouterr()
    total = plan_of(captured.out + captured.err).splitlines()[-1]
    assert "not measured (--no-calibration" in total and "harvest" in total
    assert not no_rates.exists()


def test_a_judge_bar_counts_read_out_branches_as_work():
    """14 prompts alone are too few for a bar; 14 prompts of 115 read-outs each are not."""
    from ppairs_lens.judges.progress import MIN_ROWS, judge_bar

    assert 14 < MIN_ROWS
    with judge_bar(14, "plain") as update:
        assert update.__self__.disable
    with judge_bar(14, "steered", branches=115) as update:
        assert not update.__self__.disable
