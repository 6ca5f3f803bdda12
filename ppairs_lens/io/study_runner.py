"""The runner of a study's steps: one output folder, timings, progress, reuse of finished steps.

Each step is remembered in the output folder (:class:`ppairs_lens.io.step_cache.StepCache`)
under a key of its inputs and the code, so an interrupted or repeated study redoes only what
changed. Each step prints its time and rate; :meth:`StudyRunner.close` prints every step's
share, so the log of a long run shows where its time went even when it is cut off.
"""

from __future__ import annotations

import time
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Union

from tqdm.auto import tqdm

from ppairs_lens.io.records import record_data, record_from_data
from ppairs_lens.io.step_cache import StepCache

__all__ = ["StudyRunner", "Units", "declared_result"]

#: What a step did, for its rate: ``(count, "pairs")``, or a function of its result giving that;
#: None or a count of 0 prints no rate.
Units = Union[tuple[float, str], Callable[[Any], Union[tuple[float, str], None]], None]


def declared_result(fn: Callable[[], Any]) -> Any:
    """The result type ``fn``'s return annotation declares, or None (a lambda)."""
    return typing.get_type_hints(fn).get("return") if callable(fn) else None


class StudyRunner:
    """Steps of one study writing into ``out``; ``reuse=False`` recomputes every step."""

    def __init__(self, out: str | Path, n_steps: int, *, reuse: bool = True,
                 code_packages: tuple[str, ...] = ("ppairs_lens", "analyses"), desc: str = "study"):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.cache = StepCache(self.out / ".ppairs-steps", enabled=reuse,
                               code_packages=code_packages)
        self.timings: dict[str, float] = {}
        self.rates: dict[str, str] = {}
        self.seconds: dict[str, float] = {}  # unrounded, for the shares
        self.reused: list[str] = []
        self.desc = desc  # kept: a disabled bar (TQDM_DISABLE) has no desc
        self.bar = tqdm(total=n_steps, desc=desc, unit="step")
        self.t_start = time.perf_counter()

    def _done(self, name: str, t0: float, reused: bool = False, units: Units = None,
              result: Any = None) -> None:
        seconds = time.perf_counter() - t0
        self.timings[name] = round(seconds, 1)
        self.seconds[name] = seconds
        if reused:
            self.reused.append(name)
        counted = units(result) if callable(units) else units
        if counted and counted[0] and not reused and seconds > 0:
            self.rates[name] = f"{counted[0] / seconds:,.1f} {counted[1]}/s ({counted[0]:,.0f})"
        share = seconds / max(time.perf_counter() - self.t_start, 1e-9)
        said = (f"{name} {self.timings[name]:.0f}s" + (" (reused)" if reused else "")
                + (f", {self.rates[name]}" if name in self.rates else "")
                + f", {100 * share:.0f}% of the run so far")
        self.bar.set_postfix_str(said)
        # A line per step too: the bar shows only the last.
        tqdm.write(f"[{self.desc}] {said}")
        self.bar.update(1)

    def timed(self, name: str, fn: Callable[[], Any], units: Units = None) -> Any:
        """Run ``fn`` (not remembered: a model load, a resumable harvest) and time it."""
        t0 = time.perf_counter()
        result = fn()
        self._done(name, t0, units=units, result=result)
        return result

    def step(self, name: str, fn: Callable[[], Any], outputs: tuple[str, ...] = (),
             units: Units = None, result_type: Any = None, **inputs: Any) -> Any:
        """``fn()``'s result, or the remembered one when ``inputs``, the code and every file
        of ``outputs`` (names inside ``out``) are as when it last finished. A declared result
        (``def fn() -> Record``, or ``result_type`` for a ``functools.partial``) is rebuilt as
        that type, fresh or reused alike; an undeclared one is its JSON data."""
        t0 = time.perf_counter()
        hint = result_type if result_type is not None else declared_result(fn)
        run = fn if hint is None else (lambda: record_data(fn()))
        result, was = self.cache.run(name, self.cache.key(name, **inputs), run,
                                     [self.out / o for o in outputs])
        if hint is not None:
            result = record_from_data(hint, result, where=f"step {name!r}")
        self._done(name, t0, was, units, result)
        return result

    def shares(self) -> list[str]:
        """One line per step: its seconds, its share of the steps' total, its rate."""
        total = sum(self.seconds.values()) or 1.0
        return [f"  {name:28s} {t:8.1f} s  {100 * t / total:5.1f}%"
                + (f"  {self.rates[name]}" if name in self.rates else "")
                + ("  (reused)" if name in self.reused else "")
                for name, t in self.seconds.items()]

    def close(self) -> None:
        self.bar.close()
        tqdm.write(f"[{self.desc}] steps' shares of {sum(self.seconds.values()):.0f} s:")
        for line in self.shares():
            tqdm.write(line)
