"""The runner of a study's steps: one output folder, timings, progress, reuse of finished steps.

A study (``analyses.run_all``, ``analyses.replication``) is a list of steps. Each step's result
is remembered in the output folder (:class:`ppairs_lens.io.step_cache.StepCache`) under a key
of its inputs (config, store fingerprints) and the code, so an interrupted or repeated study
redoes only what changed; the runner times every step and shows one progress bar for all.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ppairs_lens.io.step_cache import StepCache

__all__ = ["StudyRunner"]


class StudyRunner:
    """Steps of one study writing into ``out``; ``reuse=False`` recomputes every step."""

    def __init__(self, out: str | Path, n_steps: int, *, reuse: bool = True,
                 code_packages: tuple[str, ...] = ("ppairs_lens", "analyses"), desc: str = "study"):
        self.out = Path(out)
        self.out.mkdir(parents=True, exist_ok=True)
        self.cache = StepCache(self.out / ".ppairs-steps", enabled=reuse,
                               code_packages=code_packages)
        self.timings: dict[str, float] = {}
        self.reused: list[str] = []
        self.bar = tqdm(total=n_steps, desc=desc, unit="step")

    def _done(self, name: str, t0: float, reused: bool = False) -> None:
        self.timings[name] = round(time.perf_counter() - t0, 1)
        if reused:
            self.reused.append(name)
        said = f"{name} {self.timings[name]:.0f}s" + (" (reused)" if reused else "")
        self.bar.set_postfix_str(said)
        # A line per step too: the bar shows only the last, and a log (a long run on a
        # lent machine, CI) keeps every step's time even when the run is cut off.
        tqdm.write(f"[{self.bar.desc}] {said}")
        self.bar.update(1)

    def timed(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn`` (not remembered: a model load, a resumable harvest) and time it."""
        t0 = time.perf_counter()
        result = fn()
        self._done(name, t0)
        return result

    def step(self, name: str, fn: Callable[[], Any], outputs: tuple[str, ...] = (),
             **inputs: Any) -> Any:
        """``fn()``'s JSON-able result, or the remembered one when ``inputs``, the code and
        every file of ``outputs`` (names inside ``out``) are as when it last finished."""
        t0 = time.perf_counter()
        result, was = self.cache.run(name, self.cache.key(name, **inputs), fn,
                                     [self.out / o for o in outputs])
        self._done(name, t0, was)
        return result

    def close(self) -> None:
        self.bar.close()
