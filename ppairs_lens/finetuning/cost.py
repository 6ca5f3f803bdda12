"""What a method costs: wall time and peak memory of one block of work.

Memory above the start, read the way the device allows:

* CUDA: torch's ``max_memory_allocated`` (``memory_kind="cuda_allocated"``);
* CPU: resident memory (``/proc/self/statm``) sampled every ``interval`` seconds by a thread
  (``"cpu_rss"``), after handing freed heap back to the OS (``malloc_trim``) so memory a
  previous method freed is not counted as headroom. Torch's CPU allocator keeps no statistics
  and ``tracemalloc`` does not see tensors, hence the sampling: a shorter peak can be missed;
* elsewhere: ``getrusage``'s lifetime peak (``"cpu_maxrss"``), which only grows, so a block
  under an earlier peak reads 0.
"""

from __future__ import annotations

import ctypes
import os
import resource
import sys
import threading
import time
from dataclasses import dataclass
from types import TracebackType

import torch

__all__ = ["Cost", "Measure", "measure"]

MB = 1024 ** 2


@dataclass(frozen=True)
class Cost:
    """Wall ``seconds``, ``peak_mb`` above the start, and ``cpu_seconds`` of this process (all
    threads), steadier than wall time on a shared machine."""

    seconds: float
    peak_mb: float
    memory_kind: str
    cpu_seconds: float = float("nan")

    def plus(self, other: Cost) -> Cost:
        """Two steps run one after the other: times add, the peak is the larger one."""
        kinds = [k for k in dict.fromkeys((self.memory_kind, other.memory_kind)) if k != "none"]
        kind = "+".join(kinds) or "none"
        return Cost(self.seconds + other.seconds, max(self.peak_mb, other.peak_mb), kind,
                    self.cpu_seconds + other.cpu_seconds)


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _trim_heap() -> None:
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libc.so.6").malloc_trim(0)
        except (OSError, AttributeError):
            pass


class Measure:
    """Context manager: ``with measure(device) as m: ...`` then ``m.cost``."""

    def __init__(self, device: str | torch.device = "cpu", interval: float = 0.01):
        self.device = torch.device(device)
        self.interval = interval
        self.cost: Cost | None = None
        self._stop = threading.Event()
        self._peak = 0
        self._thread: threading.Thread | None = None

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            rss = _rss_bytes()
            if rss is not None and rss > self._peak:
                self._peak = rss

    def __enter__(self) -> Measure:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self._start = torch.cuda.memory_allocated(self.device)
            self._kind = "cuda_allocated"
        else:
            _trim_heap()
            rss = _rss_bytes()
            if rss is None:
                self._start = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
                self._kind = "cpu_maxrss"
            else:
                self._start = self._peak = rss
                self._kind = "cpu_rss"
                self._thread = threading.Thread(target=self._sample, daemon=True)
                self._thread.start()
        self._t0 = time.perf_counter()
        self._c0 = time.process_time()
        return self

    def elapsed(self) -> Cost:
        """The cost so far, inside the ``with`` block (a label curve's point)."""
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            peak = torch.cuda.max_memory_allocated(self.device)
        elif self._kind == "cpu_rss":
            peak = max(self._peak, _rss_bytes() or 0)
        else:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        return Cost(time.perf_counter() - self._t0, max(peak - self._start, 0) / MB,
                    self._kind, time.process_time() - self._c0)

    def __exit__(self, exc_type: type | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._kind == "cpu_rss":
            self._stop.set()
            assert self._thread is not None
            self._thread.join()
        self.cost = self.elapsed()


def measure(device: str | torch.device = "cpu", interval: float = 0.01) -> Measure:
    """Time and peak memory of the ``with`` block on ``device`` (see the module)."""
    return Measure(device, interval)
