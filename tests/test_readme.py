"""The README's Python snippets run as written, then those of docs/guide.md, which continue
them (one namespace, in order, like a notebook).

A block whose first line is ``# needs: ...`` names what it needs that no test machine has
(a model hub, GPUs) and is skipped with that reason; every other block runs on the embedded
model.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
#: Executed in this order, in one namespace: the guide continues the README's example.
DOCS = (README, REPO / "docs" / "guide.md")
NEEDS = "# needs:"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.M | re.S)


def doc_blocks() -> list[tuple[str, str]]:
    """``(file name, block)`` for every Python block of :data:`DOCS`, in order."""
    return [(p.name, b) for p in DOCS for b in python_blocks(p.read_text("utf-8"))]


def test_the_readme_opens_with_runnable_python():
    text = README.read_text("utf-8")
    lines = text.splitlines()
    assert len(lines) < 250, f"README.md has {len(lines)} lines: keep it under 250"
    first = next(i for i, line in enumerate(lines) if line.startswith("```python"))
    assert first < 60, f"the README's first Python block starts at line {first + 1}"
    assert not python_blocks(text)[0].startswith(NEEDS), "the first example must run here"
    blocks = doc_blocks()
    runnable = [b for _, b in blocks if not b.startswith(NEEDS)]
    assert len(runnable) >= 3, "the README and the guide lost their Python examples"
    for name, b in blocks:
        compile(b, name, "exec")  # every block is at least valid Python


@pytest.mark.integration
def test_readme_snippets_run_as_written(smol, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the snippets write their stores under ./stores
    namespace: dict = {"__name__": "__readme__"}
    skipped = []
    for name, block in doc_blocks():
        if block.startswith(NEEDS):
            skipped.append(block.splitlines()[0])
            continue
        exec(compile(block, name, "exec"), namespace)
    out = capsys.readouterr().out
    assert "answers flipped:" in out
    assert len(namespace["after"].p) == len(namespace["before"].p) == len(namespace["dataset"])
    ranking = namespace["pl"].merge_sort(list(namespace["numbers"]), namespace["compare"])
    assert sorted(ranking) == sorted(namespace["numbers"])
    print("skipped:", skipped)


def _hooked_block() -> str:
    blocks = [b for _, b in doc_blocks() if 'backend="hooked"' in b]
    assert len(blocks) == 1, "the README and the guide should hold one HookedTransformer example"
    return blocks[0]


@pytest.mark.integration
@pytest.mark.parametrize("backend", ["hooked", "bridge"])
def test_the_hooked_example_runs_on_either_backend(backend, smol):
    """The guide's HookedTransformer example harvests, fits a sweep and ablates; the same
    lines with ``backend="bridge"`` run on a TransformerBridge."""
    if backend == "hooked":
        try:
            from transformer_lens import HookedTransformer  # noqa: F401
        except ImportError:
            pytest.skip("HookedTransformer is absent (transformer-lens>=4); make test runs "
                        "this case in .venv-tl3")
    block = _hooked_block().replace('backend="hooked"', f'backend="{backend}"')
    ns: dict = {"__name__": "__readme__"}
    exec(compile(block, "docs/guide.md", "exec"), ns)
    acts, ablated = ns["acts"], ns["ablated"]
    assert acts.shape == ablated.shape and acts.shape[0] == len(ns["pairs"])
    r = ns["probes"].to_probe("supervised", 20).direction_
    r = torch.as_tensor(r, dtype=acts.dtype)
    before = (acts[:, :, 20] @ r).abs().max()
    after = (ablated[:, :, 20] @ r).abs().max()
    assert after < 1e-3 * before, (before, after)  # the direction is gone where it was read
