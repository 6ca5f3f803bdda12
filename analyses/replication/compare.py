"""Two runs' ``summary.json`` side by side: do they give the same decisions and values?

``python -m analyses.replication.compare A/summary.json B/summary.json [--tol 1e-6]`` prints
every value that differs: a number by more than ``tol`` (absolute, or relative to the larger
magnitude), any other value at all; the host, the clock (:data:`HOST_KEYS`) and the outputs'
hashes (figures embed their renderer's bytes) are left out. Exit status 1 where anything
differs. It ends with the claims whose outcome differs and each run's processor and MKL
setting: MKL honours a named code branch (``MKL_CBWR=AVX2``) on Intel processors only, so two
hosts of different vendors differ in float32 noise whatever the setting
(:mod:`ppairs_lens.cpu_numerics`).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ppairs_lens.errors import PPairsError
from ppairs_lens.io.json_fields import read_json_object

__all__ = ["HOST_KEYS", "decisions", "differences", "hosts", "main"]

#: Keys whose values describe the host or the clock, not the results.
HOST_KEYS = frozenset({"environment", "timings_s", "reused_steps", "outputs_sha256",
                       "train_seconds", "train_cpu_seconds", "peak_mb", "memory_kind",
                       "examples_per_s", "cpu_seconds_per_example", "seconds", "wall_s",
                       "created"})


def _same_number(a: float, b: float, tol: float) -> bool:
    if a == b:                              # infinities of one sign too
        return True
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    if math.isinf(a) or math.isinf(b):
        return False
    return abs(a - b) <= tol * max(1.0, abs(a), abs(b))


def differences(a: Any, b: Any, tol: float = 1e-6, where: str = "") -> Iterator[str]:
    """One line per difference between ``a`` and ``b`` (JSON values), with its path."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k in HOST_KEYS:
                continue
            if k not in a or k not in b:
                yield f"{where}/{k}: only in {'the second' if k not in a else 'the first'}"
            else:
                yield from differences(a[k], b[k], tol, f"{where}/{k}")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield f"{where}: {len(a)} entries against {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            yield from differences(x, y, tol, f"{where}[{i}]")
    elif (isinstance(a, (int, float)) and isinstance(b, (int, float))
          and not isinstance(a, bool) and not isinstance(b, bool)):
        if not _same_number(float(a), float(b), tol):
            yield f"{where}: {a!r} against {b!r}"
    elif a != b:
        yield f"{where}: {a!r} against {b!r}"


def decisions(a: dict, b: dict) -> list[str]:
    """One line per claim whose outcome differs between two summaries (by claim id)."""
    out_a = {c.get("id"): c.get("outcome") for c in a.get("claims") or []}
    out_b = {c.get("id"): c.get("outcome") for c in b.get("claims") or []}
    return [f"{k}: {out_a.get(k)!r} against {out_b.get(k)!r}"
            for k in sorted(set(out_a) | set(out_b), key=str) if out_a.get(k) != out_b.get(k)]


def hosts(a: dict, b: dict) -> list[str]:
    """Each run's processor and MKL setting, and whether MKL can give both the same bits."""
    envs = [r.get("environment") or {} for r in (a, b)]
    lines = [f"{which}: {e.get('cpu_model') or 'processor not recorded'}, "
             f"MKL_CBWR={e.get('mkl_cbwr')}, {e.get('torch_threads')} threads"
             for which, e in zip(("first", "second"), envs)]
    models = {str(e["cpu_model"]) for e in envs if e.get("cpu_model")}
    vendors = {m.split(" ")[0] for m in models}
    if len(models) < 2:   # one processor, or a run that did not record its own
        if any(not e.get("cpu_model") for e in envs):
            lines.append("a run did not record its processor: whether MKL could give both "
                         "the same bits cannot be told")
        return lines
    # on another vendor's processor MKL picks its own branch, by the processor it finds
    if vendors != {"GenuineIntel"}:
        lines.append("MKL honours a named code branch on Intel processors only: between these "
                     "hosts its products may differ in the last bits (MKL_CBWR=COMPATIBLE is "
                     "the setting that holds across vendors)")
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m analyses.replication.compare",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("first", type=Path, help="a run's summary.json")
    p.add_argument("second", type=Path, help="another run's summary.json")
    p.add_argument("--tol", type=float, default=1e-6,
                   help="numbers closer than this (absolute, or relative above 1) are equal")
    args = p.parse_args(argv)
    try:
        runs = [read_json_object(path) for path in (args.first, args.second)]
    except PPairsError as e:
        p.error(str(e))
    found = list(differences(*runs, tol=args.tol))
    for line in found:
        print(line)
    print(f"{len(found)} difference(s) beyond {args.tol:g} between {args.first} and "
          f"{args.second}")
    changed = decisions(*runs)
    print(f"{len(changed)} claim(s) with another outcome" + "".join(f"\n  {c}" for c in changed))
    for line in hosts(*runs):
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
