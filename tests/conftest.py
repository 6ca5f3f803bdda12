"""Shared fixtures: a tiny random model (fast unit tests) and the embedded SmolLM2 (integration)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ppairs_lens.cpu_numerics import pin_cpu_numerics

pin_cpu_numerics()  # as the command line does, before any test's first matrix product

REPO = Path(__file__).resolve().parents[1]
SHARED_DATASETS = REPO.parent / "shared" / "datasets"


def child_env(**extra: str) -> dict[str, str]:
    """Environment of a child Python process: the repository first on its path, then
    whatever path the parent had (packages installed there must stay importable)."""
    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}


@pytest.fixture(scope="module")
def one_torch_thread():
    """Tiny problems: one torch thread is ~30x faster than several on a shared CPU. Use with
    ``pytestmark = pytest.mark.usefixtures("one_torch_thread")``."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


@pytest.fixture(scope="session")
def tokenizer():
    from ppairs_lens.models.tokenizer import load_tokenizer

    return load_tokenizer()


@pytest.fixture(scope="session")
def tiny(tokenizer):
    """A 2-layer, d_model 64 random Llama with the real tokenizer and chat template."""
    from ppairs_lens.models.tiny import tiny_model

    return tiny_model(seed=0, tokenizer=tokenizer)


@pytest.fixture(scope="session")
def smol():
    """The embedded SmolLM2-135M-Instruct (dequantized once into the user cache)."""
    from ppairs_lens.models.loading import load_model

    return load_model()


@pytest.fixture
def shared_datasets() -> Path:
    if not SHARED_DATASETS.is_dir():
        pytest.skip("../shared/datasets is not present beside the repository: real-data test skipped")
    return SHARED_DATASETS


def small_comparisons(n: int = 10, with_context: bool = True):
    """A handful of comparisons, half sharing two contexts, with varied item lengths."""
    from ppairs_lens.data.records import Comparison, Dataset

    recs = []
    for i in range(n):
        a, b = (i * 37) % 101, (i * 53 + 7) % 97 * (10 ** (i % 3))
        ctx = f"A note on numbers, part {i % 2}. " * (1 + i % 2) if with_context and i < n // 2 else None
        recs.append(Comparison(f"p{i}", str(a), str(b), 1 if a > b else (2 if b > a else 0),
                               context=ctx, context_id=f"c{i % 2}" if ctx else None))
    return Dataset("small", "comparison", recs, aspect="larger", item_name="number",
                   context_name="note")


@pytest.fixture(scope="session", autouse=True)
def rates_in_a_temporary_file(tmp_path_factory):
    """The commands remember measured rates in the user cache; the suite keeps its own (so a
    test's plan never depends on what another run on this machine measured)."""
    import ppairs_lens.judges.run_estimate as run_estimate

    mp = pytest.MonkeyPatch()
    path = tmp_path_factory.mktemp("rates") / "rates.json"
    mp.setattr(run_estimate, "remembered_rates", lambda: path)
    yield path
    mp.undo()
