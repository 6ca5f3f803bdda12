"""The same float bits on any thread count and any x86-64 host with AVX2: the CPU kernels'
instruction set and MKL's reduction order pinned.

MKL splits some products (a one-row product against a tall matrix, as a judge's cached
continuation makes) differently at different thread counts: a log-odds' last bits moved with
``torch`` threads (up to 2e-4 on a single product here). ``MKL_CBWR=AVX2,STRICT`` fixes its AVX2
kernels and reduction order whatever the thread count. PyTorch's own vectorised kernels pick
their instruction set by the host: two hosts' demos, one with AVX-512, differed by ~1e-5 in
every judge threshold; ``ATEN_CPU_CAPABILITY=avx2`` and ``ONEDNN_MAX_CPU_ISA=AVX2`` pin them.

Each library reads its setting once, at first use, so they must be set before the process's
first tensor operation: the command line does (:func:`pin_cpu_numerics`); a library user sets
them in the environment. A value already set is left as it is.

The pin has a price on an Intel host with AVX-512 (``benchmarks/bench_cpu_numerics.py``): the
embedded model's forward x1.5 slower (MKL), ~3% (PyTorch). ``MKL_CBWR=AUTO,STRICT`` keeps the
same bits at any thread count on one host at its own speed, not across instruction sets.

MKL honours a named branch on Intel processors only: on an AMD EPYC it runs its own choice,
still strict about the thread count, so the pin costs nothing there and does not give an
Intel host's bits (``MKL_CBWR=COMPATIBLE``, which holds across vendors, was x2.3 slower). A run
records its processor, and ``python -m analyses.replication.compare`` says when vendors differ.
"""

from __future__ import annotations

import os

__all__ = ["CPU_NUMERICS", "pin_cpu_numerics"]

CPU_NUMERICS: dict[str, str] = {"MKL_CBWR": "AVX2,STRICT", "ATEN_CPU_CAPABILITY": "avx2",
                                "ONEDNN_MAX_CPU_ISA": "AVX2"}


def pin_cpu_numerics(environ: dict[str, str] | None = None) -> dict[str, str]:
    """Set :data:`CPU_NUMERICS` in ``environ`` where unset; returns the values in force."""
    env = os.environ if environ is None else environ
    for k, v in CPU_NUMERICS.items():
        env.setdefault(k, v)
    return {k: env[k] for k in CPU_NUMERICS}
