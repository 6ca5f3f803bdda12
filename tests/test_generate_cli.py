"""``ppairs-lens generate``: steered continuations side by side, on the tiny model."""

from __future__ import annotations

import textwrap

import pytest
import torch

from analyses.generate import continuations, side_by_side, steering_source
from ppairs_lens.models.loading import model_name
from ppairs_lens.probes.estimators import make_probe
from ppairs_lens.probes.persistence import save_direction, save_probe, save_sweep
from ppairs_lens.probes.sweep import fit_sweep
from tests.test_probes import planted

HOOK = "blocks.0.hook_resid_post"


@pytest.fixture
def patched(tiny, monkeypatch):
    import ppairs_lens.models.loading

    monkeypatch.setattr(ppairs_lens.models.loading, "load_model", lambda *a, **k: tiny)
    return tiny


def _saved_probe(tiny, path, model=None):
    acts, labels, _ = planted(n=80, d=tiny.cfg.d_model)
    probe = make_probe("mass_mean").fit(acts, labels, layer=0, model_name=model or
                                        model_name(tiny))
    return probe, save_probe(probe, path, hook=HOOK)


def test_generate_prints_each_alpha_beside_a_random_direction(patched, tmp_path, capsys):
    from analyses.cli import main

    probe, path = _saved_probe(patched, tmp_path / "p")
    code = main(["generate", "--probe", str(path), "--alpha", "-20", "20", "--prompt",
                 "The capital of France is", "--max-new-tokens", "6", "--seed", "1"])
    out = capsys.readouterr().out
    assert code == 0
    assert "mass_mean probe at blocks.0.hook_resid_post" in out and "random direction" in out
    rows = [ln for ln in out.splitlines() if ln.split("|")[0].strip() in ("+0", "-20", "+20")]
    assert [r.split("|")[0].strip() for r in rows] == ["+0", "-20", "+20"]
    # Row alpha 0 is the unsteered model in both columns; the steered rows are what steer gives.
    tokens = patched.to_tokens("The capital of France is")
    plain = continuations(patched, tokens, None, [0.0], HOOK, scale=1.0, max_new_tokens=6)[0]
    cells = [c.strip() for c in rows[0].split("|")[1:]]
    assert cells == [(textwrap.wrap(" ".join(plain.split()), 48) or ["(nothing)"])[0]] * 2


def test_the_probe_column_is_the_probe_steered_and_differs_from_random(patched, tmp_path):
    probe, path = _saved_probe(patched, tmp_path / "p")
    src = steering_source(patched, str(path))
    assert src.hook == HOOK
    torch.testing.assert_close(src.direction, torch.as_tensor(probe.direction_).float())
    tokens = patched.to_tokens("The capital of France is")
    texts = continuations(patched, tokens, src.direction, [0.0, 40.0], HOOK, scale=1.0,
                          max_new_tokens=6)
    assert texts[0] != texts[1]
    table = side_by_side([0.0, 40.0], {"a": texts, "b": ["x", "y"]}, width=20)
    assert table.splitlines()[0].startswith("alpha") and "+40" in table


def test_a_sweep_steers_at_the_read_out_named_and_a_direction_at_its_hook(patched, tmp_path):
    acts, labels, _ = planted(n=80, d=patched.cfg.d_model)
    hooks = ["blocks.0.hook_resid_post", "blocks.1.hook_resid_post"]
    sweep = fit_sweep(torch.stack([acts, 2 * acts], 2), labels, model_name=model_name(patched))
    path = save_sweep(sweep, tmp_path / "s", hook_names=hooks)
    src = steering_source(patched, str(path), kind="pca", hook=hooks[1])
    torch.testing.assert_close(src.direction, sweep.directions["pca"][1].float())
    with pytest.raises(Exception, match="--hook, one of"):
        steering_source(patched, str(path))  # no card metrics name a read-out
    d = save_direction(torch.randn(patched.cfg.d_model), tmp_path / "d", hook=HOOK,
                       model=model_name(patched))
    assert steering_source(patched, str(d)).hook == HOOK


def test_generate_refuses_a_probe_of_another_model_in_one_line(patched, tmp_path, capsys):
    from analyses.cli import main

    _, path = _saved_probe(patched, tmp_path / "p", model="another-model")
    code = main(["generate", "--probe", str(path), "--alpha", "1", "--prompt", "Hi there"])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and "model (saved 'another-model'" in err
    with pytest.raises(SystemExit):
        main(["generate", "--probe", str(path), "--alpha", "1", "--prompt", "x",
              "--positions", "-3"])


def test_positions_new_steers_from_the_last_prompt_token_and_chat_prompts(patched):
    from analyses.generate import prompt_tokens
    from ppairs_lens.interventions.steering import steer

    tokens = patched.to_tokens("The capital of France is")
    r = torch.randn(patched.cfg.d_model, generator=torch.Generator().manual_seed(2))
    n = tokens.shape[1]
    got = continuations(patched, tokens, r, [30.0], HOOK, scale=1.0, max_new_tokens=6,
                        positions="new")[0]
    with steer(patched, r, 30.0, [HOOK], positions=n - 1):
        out = patched.generate(tokens, max_new_tokens=6, do_sample=False, verbose=False)
    assert got == patched.tokenizer.decode(out[0, n:], skip_special_tokens=True)
    (chat,) = prompt_tokens(patched, ["Hello"], chat=True)
    text = patched.tokenizer.decode(chat[0])
    assert "Hello" in text and text.rstrip().endswith("assistant")
