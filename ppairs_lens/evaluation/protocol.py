"""The evaluation protocol every experiment shares: one frozen record (:class:`EvalSettings`).

Each experiment's config holds one as its ``settings`` field (never copies of its fields), and
the main job builds ONE record and hands the same object to every sub-config, so that no step
can split or resample differently from another. Results are never written back into it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ppairs_lens.errors import PPairsError
from ppairs_lens.evaluation.bootstrap import N_BOOT
from ppairs_lens.evaluation.splits import BUILTIN_TEST_SIZE, SPLIT_MODES

__all__ = ["BUILTIN_TEST_SIZE", "EvalSettings", "PAPER_TEST_SIZE"]

#: Held-out share of the replication: the paper fits and tests on random halves.
PAPER_TEST_SIZE: float = 0.5


@dataclass(frozen=True)
class EvalSettings:
    """How every experiment splits, resamples and seeds: ``seed`` (splits, subsets, resamples),
    ``n_boot`` (resamples of every CI), ``test_size`` (held-out share of the leak groups),
    ``split_by`` (``SPLIT_MODES``) and ``quick`` (a preview preset's protocol, figures PNG only;
    :data:`ppairs_lens.presets.PREVIEWS`)."""

    seed: int = 0
    n_boot: int = N_BOOT
    test_size: float = BUILTIN_TEST_SIZE
    split_by: str = "auto"
    quick: bool = False

    def __post_init__(self) -> None:
        if self.split_by not in SPLIT_MODES:
            raise PPairsError(f"split_by must be one of {SPLIT_MODES}, got {self.split_by!r}")
        if not 0.0 < float(self.test_size) < 1.0:
            raise PPairsError(f"test_size is a share of the leak groups, strictly between 0 "
                              f"and 1; got {self.test_size}")
        if int(self.n_boot) < 1:
            raise PPairsError(f"n_boot must be at least 1, got {self.n_boot}")

    def split_kwargs(self) -> dict:
        """The keywords of a held-out split (``split_store``, ``judge_held_out``...)."""
        return {"test_size": self.test_size, "split_by": self.split_by, "seed": self.seed}

    def boot_kwargs(self) -> dict:
        """The keywords of a bootstrap interval (``mean_ci``, ``evaluate``...)."""
        return {"n_boot": self.n_boot, "seed": self.seed}

    def but(self, **changes) -> EvalSettings:
        """A copy with ``changes`` (the record is frozen)."""
        return replace(self, **changes)
