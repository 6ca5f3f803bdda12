"""Decisions that the last bits of a float could flip are ties by a stated rule: a calibrated
answer within TIE_LOGODDS of its tie is a tie. The same judge's decisions are identical with
two batch sizes and two thread counts, including on pairs whose answer is a tie by symmetry
(an item compared with itself, where float noise alone would give it a side)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import torch

from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.data import builtin_dataset
from ppairs_lens.judges.calibration import TIE_LOGODDS, swap_calibrated_logodds
from ppairs_lens.judges.study import paper_probability
from ppairs_lens.judges.zero_shot import zero_shot


def test_answers_within_the_tie_band_are_ties_in_every_form():
    ld_o = np.array([2.0, 2.0 + 0.4 * TIE_LOGODDS, 1.0, -3.0])
    ld_s = np.array([2.0, 2.0, -1.0, -3.0 - 4 * TIE_LOGODDS])
    z = swap_calibrated_logodds(ld_o, ld_s)
    assert list(z[:2]) == [0.0, 0.0] and z[2] == 1.0 and z[3] > 0
    p = paper_probability(ld_o, ld_s)
    assert list(p[:2]) == [0.5, 0.5] and p[2] > 0.5 and p[3] > 0.5


def _decisions(tiny, dataset, budget: int, threads: int) -> np.ndarray:
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        res = zero_shot(tiny, dataset, settings=HarvestSettings(token_budget=budget))
    finally:
        torch.set_num_threads(before)
    z = np.asarray(res.z)
    return np.where(z == 0, 0, np.sign(z))


def test_decisions_do_not_depend_on_batch_size_or_threads(tiny):
    ds = builtin_dataset("larger_number", n=24)
    recs = list(ds.records)
    same = [replace(r, pair_id=f"{r.pair_id}=", item2=r.item1, item2_id=r.item1_id, label=0)
            for r in recs[:6]]
    ds = replace(ds, records=recs + same)
    runs = [_decisions(tiny, ds, budget, threads)
            for budget in (64, 4096) for threads in (1, 2)]
    for other in runs[1:]:
        assert np.array_equal(runs[0], other)
    assert np.all(runs[0][-6:] == 0)           # an item against itself: a tie, on every run


_PRODUCTS = """
import sys, numpy as np, torch
torch.set_num_threads(int(sys.argv[1]))
g = torch.Generator().manual_seed(0)
out = [(torch.randn(m, k, generator=g) @ torch.randn(k, n, generator=g)).flatten()
       for m, k, n in [(1, 1536, 576), (1, 576, 1536), (7, 1536, 576), (300, 576, 1536)]]
sys.stdout.write(torch.cat(out).numpy().tobytes().hex())
"""


def _products(threads: int, env: dict[str, str]) -> str:
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", _PRODUCTS, str(threads)], env=env,
                          capture_output=True, text=True, check=True).stdout


def test_pinned_cpu_numerics_give_the_same_bits_at_one_and_two_threads():
    """A fresh process each (MKL reads its mode at its first call): with the command line's
    setting, matrix products of a judge's shapes are bit-identical at 1 and 2 threads."""
    import os

    from ppairs_lens.cpu_numerics import CPU_NUMERICS, pin_cpu_numerics

    env = {k: v for k, v in os.environ.items() if k not in CPU_NUMERICS}
    pinned = {**env, **pin_cpu_numerics({})}
    assert _products(1, pinned) == _products(2, pinned)
    assert pin_cpu_numerics({"MKL_CBWR": "AVX512"})["MKL_CBWR"] == "AVX512"  # a user's wins


_CAPABILITY = """
import analyses.cli, torch
from ppairs_lens.cpu_numerics import pin_cpu_numerics
pin_cpu_numerics()          # where the command line's main() does: after its imports
x = torch.randn(257, 33)
x.softmax(-1), torch.nn.functional.layer_norm(x, (33,))
print(torch.backends.cpu.get_cpu_capability())
"""


def test_the_command_line_pins_the_kernels_before_its_first_tensor_operation():
    """A host with AVX-512 runs PyTorch's AVX2 kernels once the command line has pinned them,
    so its bits are those of an AVX2 host: nothing the CLI imports runs a kernel first."""
    import os
    import subprocess
    import sys

    from ppairs_lens.cpu_numerics import CPU_NUMERICS

    env = {k: v for k, v in os.environ.items() if k not in CPU_NUMERICS}
    host = subprocess.run([sys.executable, "-c", "import torch; "
                           "print(torch.backends.cpu.get_cpu_capability())"], env=env,
                          capture_output=True, text=True, check=True).stdout.strip()
    if host not in ("AVX2", "AVX512"):
        pytest.skip(f"this host's kernels are {host}: no AVX2 to pin")
    pinned = subprocess.run([sys.executable, "-c", _CAPABILITY], env=env, capture_output=True,
                            text=True, check=True).stdout.strip().splitlines()[-1]
    assert pinned == "AVX2"


def test_raw_log_odds_do_not_depend_on_threads(tiny):
    """Beyond the decisions: the judge's calibrated log-odds themselves, bit for bit."""
    ds = builtin_dataset("larger_number", n=16)
    z = []
    for threads in (1, 2):
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            z.append(np.asarray(zero_shot(tiny, ds, settings=HarvestSettings()).z))
        finally:
            torch.set_num_threads(before)
    assert np.array_equal(z[0], z[1])
