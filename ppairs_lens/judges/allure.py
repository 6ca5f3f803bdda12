"""An ALLURE-style judge: in-context demonstrations chosen from the judge's own mistakes.

ALLURE (Hasanbeig et al., 2023) audits an LLM judge in a closed loop: score the training
comparisons, add the ones the judge gets most wrong (with their labels) as demonstrations,
score again, repeat for a few rounds. Demonstrations come from the training split only (the
labels a supervised probe sees); the judge is then asked the held-out comparisons after them,
in both item orders, read as the few-shot judge is (:mod:`ppairs_lens.judges.few_shot`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ppairs_lens.activations.prompts import Template
from ppairs_lens.data.records import ITEM1, TIE, Dataset
from ppairs_lens.judges.few_shot import Demo, few_shot
from ppairs_lens.judges.zero_shot import ZeroShotResult

__all__ = ["AllureConfig", "allure", "allure_demos", "most_wrong"]


@dataclass(frozen=True)
class AllureConfig:
    rounds: int = 1  # the first round reads the zero-shot answers: no extra pass
    per_round: int = 2  # demonstrations added per round
    pool: int = 6  # training comparisons scored each round (whole contexts, seeded)
    test_pairs: int | None = 8  # held-out comparisons the final judge answers


def most_wrong(z: np.ndarray, labels: list[int], exclude: set[int], k: int) -> list[int]:
    """Positions of the ``k`` comparisons whose calibrated log-odds lie furthest on the wrong
    side (ties and ``exclude`` never chosen), alternating the right answer so that the
    demonstrations do not all answer one position."""
    margin = np.asarray(z, float) * np.array([1.0 if y == ITEM1 else -1.0 for y in labels])
    order = [int(i) for i in np.argsort(margin, kind="stable")
             if labels[i] != TIE and int(i) not in exclude]
    by_answer = {True: [i for i in order if labels[i] == ITEM1],
                 False: [i for i in order if labels[i] != ITEM1]}
    picks: list[int] = []
    want = True
    while len(picks) < k and (by_answer[True] or by_answer[False]):
        picks.append((by_answer[want] or by_answer[not want]).pop(0))
        want = not want
    return picks


def allure_demos(bridge, pool: Dataset, z_pool: np.ndarray, template: Template | None,
                 cfg: AllureConfig = AllureConfig()) -> list[Demo]:
    """Demonstrations after ``cfg.rounds`` rounds, starting from the judge's calibrated
    log-odds ``z_pool`` on ``pool`` (the zero-shot judge's: no extra pass for round one)."""
    labels = pool.labels()
    chosen: list[int] = []
    z = np.asarray(z_pool, float)
    for r in range(cfg.rounds):
        chosen += most_wrong(z, labels, set(chosen), cfg.per_round)
        if r + 1 < cfg.rounds:
            demos = [Demo(pool.records[i], 0 if labels[i] == ITEM1 else 1) for i in chosen]
            z = few_shot(bridge, pool, pool, template, demos=demos).z
    return [Demo(pool.records[i], 0 if labels[i] == ITEM1 else 1) for i in chosen]


def allure(bridge, train_pool: Dataset, z_pool: np.ndarray, test: Dataset,
           template: Template | None, cfg: AllureConfig = AllureConfig()
           ) -> tuple[ZeroShotResult, list[Demo]]:
    """The ALLURE judge on ``test`` (both orders, calibrated) and its demonstrations."""
    demos = allure_demos(bridge, train_pool, z_pool, template, cfg)
    return few_shot(bridge, test, replace(train_pool, records=[]), template, demos=demos), demos
