"""The same float bits on any thread count and any x86-64 host with AVX2: the CPU kernels'
instruction set and MKL's reduction order pinned.

PyTorch's CPU builds multiply matrices with MKL, whose kernels split some products (a
one-row product against a tall matrix, as a judge's cached continuation makes) differently
at different thread counts: the last bits of a log-odds moved with ``torch`` threads (up to
2e-4 on a single product here). ``MKL_CBWR=AVX2,STRICT`` fixes MKL's code path to its AVX2
kernels and its reduction order whatever the thread count. PyTorch's own vectorised kernels
(softmax, layer norm, activations) pick their instruction set by the host: two hosts' demos,
one with AVX-512, differed by ~1e-5 in every judge threshold. ``ATEN_CPU_CAPABILITY=avx2``
makes them all run the AVX2 kernels, ``ONEDNN_MAX_CPU_ISA=AVX2`` oneDNN's too.

Each library reads its setting once, at its first use, so they take effect when set before
the process's first tensor operation: the command line sets them (:func:`pin_cpu_numerics`)
before any; a library user who wants the same bits sets them in the environment. A value
already set is left as it is.

The pin has a price on an Intel host with AVX-512 (``benchmarks/bench_cpu_numerics.py``):
MKL's AVX2 branch made the embedded model's forward x1.5 slower there, PyTorch's AVX2 kernels
~3%. ``MKL_CBWR=AUTO,STRICT`` in the environment keeps the same bits at any thread count on
one host at the host's own speed, and gives up the same bits across hosts of different
instruction sets.

MKL honours a named branch (``AVX2``) on Intel processors only: on another vendor's (an AMD
EPYC here) it runs its own choice, still strict about the thread count, so the pin costs
nothing there and does not give an Intel host's bits. Its one setting that holds across
vendors, ``MKL_CBWR=COMPATIBLE`` (SSE2), made the forward x2.3 slower on that host. A run
records its processor (``summary.json``'s ``environment``), and
``python -m analyses.replication.compare`` says when two runs' vendors differ.
"""

from __future__ import annotations

import os

__all__ = ["CPU_NUMERICS", "pin_cpu_numerics"]

#: The settings: AVX2 kernels everywhere (on any x86-64 host with AVX2, whatever newer
#: instructions it has), MKL's reductions independent of the thread count.
CPU_NUMERICS: dict[str, str] = {"MKL_CBWR": "AVX2,STRICT", "ATEN_CPU_CAPABILITY": "avx2",
                                "ONEDNN_MAX_CPU_ISA": "AVX2"}


def pin_cpu_numerics(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Set :data:`CPU_NUMERICS` in ``environ`` (default: this process's) where unset; returns
    the values in force."""
    env = os.environ if environ is None else environ
    for k, v in CPU_NUMERICS.items():
        env.setdefault(k, v)
    return {k: env[k] for k in CPU_NUMERICS}
