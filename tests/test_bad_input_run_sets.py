"""Bad input on the run's sets and strengths, refused in one line before any model work: a
shifted set that shares pairs with the training set, two datasets under one display name, a
steering strength the activations cannot carry."""

from __future__ import annotations

import re

import pytest

import ppairs_lens.models.loading
from analyses.cli import main
from ppairs_lens.errors import SettingError
from ppairs_lens.interventions.steering import MAX_ALPHA, check_alpha


def _refused(argv, tmp_path, capsys, monkeypatch) -> str:
    def no_model(*a, **k):
        raise AssertionError("a model was loaded before the input was checked")
    monkeypatch.setattr(ppairs_lens.models.loading, "load_model", no_model)
    argv = [*argv, "--stores", str(tmp_path / "s"), "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "s").exists()
    return err


def test_a_shifted_set_that_shares_pairs_with_training_is_refused(tmp_path, capsys,
                                                                  monkeypatch):
    err = _refused(["shift", "--train", "larger_number", "--test", "larger_number@Again",
                    "--max-pairs", "20"], tmp_path, capsys, monkeypatch)
    assert "larger_number@Again" in err and "shares" in err and "training" in err


def test_two_datasets_under_one_name_are_refused(tmp_path, capsys, monkeypatch):
    err = _refused(["sweep", "--datasets", "larger_number@Same", "story_sentiment@Same",
                    "--max-pairs", "20"], tmp_path, capsys, monkeypatch)
    assert "'Same'" in err and "larger_number@Same" in err and "story_sentiment@Same" in err


def test_a_strength_beyond_what_activations_carry_is_refused(tmp_path, capsys, monkeypatch):
    err = capsys.readouterr
    monkeypatch.setattr(ppairs_lens.models.loading, "load_model",
                        lambda *a, **k: pytest.fail("a model was loaded"))
    with pytest.raises(SystemExit) as e:
        main(["steer", "--datasets", "larger_number", "--alphas", "1", "1e39",
              "--out", str(tmp_path / "o")])
    assert e.value.code == 2
    msg = err().err
    assert "1e39" in msg and "beyond" in msg and "Traceback" not in msg
    with pytest.raises(SettingError, match="beyond"):
        check_alpha(2 * MAX_ALPHA)
    assert check_alpha(-MAX_ALPHA) == -MAX_ALPHA


def test_a_cache_location_that_is_a_file_is_refused_before_any_work(tmp_path, monkeypatch):
    from ppairs_lens.cache import CACHE_ENV
    from ppairs_lens.errors import PPairsError
    from ppairs_lens.models.embedded import embedded_model_dir

    blocker = tmp_path / "cache"
    blocker.write_text("not a folder")
    monkeypatch.setenv(CACHE_ENV, str(blocker / "inner"))
    with pytest.raises(PPairsError, match=f"{blocker} is a file"):
        embedded_model_dir()


@pytest.mark.parametrize("front, field", [
    ("ppairs_lens: [1, 2]\n", "'ppairs_lens'"),
    ("ppairs_lens:\n  metrics: 3\n", "'ppairs_lens.metrics'"),
    ("ppairs_lens:\n  metrics:\n  - kind: [a]\n", "'ppairs_lens.metrics[0].kind'"),
    ("license: 7\n", "'license'"),
])
def test_a_model_card_edited_by_hand_is_refused_by_field(tmp_path, front, field):
    from ppairs_lens.errors import ProbeError
    from ppairs_lens.probes.hub import read_model_card

    (tmp_path / "README.md").write_text(f"---\n{front}---\n# card\n")
    with pytest.raises(ProbeError, match=re.escape(f"README.md: field {field}")):
        read_model_card(tmp_path)


@pytest.mark.parametrize("raised, words", [
    (ConnectionError("Failed to establish a new connection"), "cannot be reached"),
    (type("Denied", (Exception,), {"response": type("R", (), {"status_code": 401})()})("no"),
     "refused the token"),
    (type("Missing", (Exception,), {"response": type("R", (), {"status_code": 404})()})("x"),
     "no such repository"),
])
def test_the_hubs_errors_are_one_line_each(tmp_path, raised, words):
    from ppairs_lens.errors import ProbeError
    from ppairs_lens.probes.hub import push_folder

    class Api:
        def create_repo(self, *a, **k):
            raise raised

    (tmp_path / "probe.safetensors").write_bytes(b"x")
    with pytest.raises(ProbeError, match=words) as e:
        push_folder(tmp_path, "me/probe", operations=[], api=Api())
    assert "me/probe" in str(e.value) and "\n" not in str(e.value)


def test_a_strength_that_overflows_the_model_is_refused_not_returned_empty(tiny):
    """Through the library (no command's bound in front), a strength float32 cannot carry is
    caught where the activations become non-finite, for generation and the batched judge."""
    import torch

    from ppairs_lens.interventions.steering import batched_steering_hooks, steer

    hook = "blocks.0.hook_resid_post"
    r = torch.randn(tiny.cfg.d_model, generator=torch.Generator().manual_seed(1))
    tokens = tiny.to_tokens("Two and two make")
    with pytest.raises(SettingError, match="inf or NaN.*smaller alpha"), \
            steer(tiny, r, 1e39, [hook]):
        tiny.generate(tokens, max_new_tokens=2, do_sample=False, verbose=False)
    with steer(tiny, r, 1e3, [hook]):  # large but finite: runs
        tiny.generate(tokens, max_new_tokens=2, do_sample=False, verbose=False)
    with pytest.raises(SettingError, match="inf or NaN"), steer(tiny, r, 3e38, [hook]):
        tiny.generate(tokens, max_new_tokens=2, do_sample=False, verbose=False)
    huge = torch.full((2, tiny.cfg.d_model), 3.3e38)
    with pytest.raises(SettingError, match="inf or NaN"), \
            tiny.hooks(fwd_hooks=batched_steering_hooks(tiny, huge, [hook, "blocks.1.hook_resid_pre"])):
        tiny(torch.zeros((1, 2), dtype=torch.long), return_type=None)


def test_a_raw_strength_is_bounded_relative_to_the_activations(tiny, monkeypatch, capsys):
    from types import SimpleNamespace

    import torch

    from analyses import generate

    src = generate.SteeringSource(torch.ones(tiny.cfg.d_model) / tiny.cfg.d_model ** 0.5,
                                  "blocks.0.hook_resid_post", "test direction")
    monkeypatch.setattr(generate, "steering_source", lambda *a, **k: src)
    args = SimpleNamespace(probe="p", kind=None, hook=None, prompt=["Two and two make"],
                           chat=False, raw_alpha=True, alpha=[1e30], seed=0,
                           max_new_tokens=1, positions="all", width=20)
    with pytest.raises(SettingError, match=r"--alpha 1e\+30 \(raw; median norm"):
        generate.cli(args, tiny)


def test_warnings_print_one_line_without_a_source_line(capsys, monkeypatch):
    import warnings

    from analyses import cli

    def warn_and_fail(self):
        warnings.warn("three pairs of Numbers have no text: skipped", stacklevel=1)
        raise SettingError("stop here")

    monkeypatch.setattr(cli.Datasets, "run", warn_and_fail)
    assert cli.main(["datasets"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0] == "ppairs-lens: warning: three pairs of Numbers have no text: skipped"
    assert not any("warnings.warn(" in line for line in err)


def test_generate_bounds_a_strength_in_its_own_unit(tmp_path, capsys, monkeypatch):
    """In units of the median norm, 1e39 is refused before a model loads; a raw strength
    above the absolute bound parses, to be bounded against the norm it is added to."""
    from analyses.cli import build_parser

    monkeypatch.setattr(ppairs_lens.models.loading, "load_model",
                        lambda *a, **k: pytest.fail("a model was loaded"))
    assert main(["generate", "--probe", str(tmp_path), "--alpha", "1e39",
                 "--prompt", "Hi"]) == 2
    assert "--alpha 1e+39" in capsys.readouterr().err
    args = build_parser().parse_args(["generate", "--probe", "p", "--alpha", "2e4",
                                      "--raw-alpha", "--prompt", "Hi"])
    assert args.alpha == [2e4]
