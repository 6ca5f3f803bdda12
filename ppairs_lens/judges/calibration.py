"""From a judge's two choice logits to P(item 1 preferred): the choice softmax and swap calibration.

A prompted judge answers "... is Choice " with a next-token distribution; P(choice 1) is the
softmax over the two choice tokens' logits alone (:func:`choice_probability`, with
:func:`choice_columns` saying where each prompt's choices sit in the logits read). LLM judges
favour one position, so a comparison is also asked with its items swapped and the two answers
are averaged (:func:`swap_calibrate`, the paper's Section 4.3; :func:`swap_calibrated` wraps a
comparator the same way). Every judge and comparator calibrates through :func:`swap_calibrate`,
so how both orders are combined is decided here only.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from ppairs_lens.ranking.merge_sort import Comparator

__all__ = ["swap_calibrate", "swap_calibrated", "choice_columns", "choice_probability"]

P = TypeVar("P", float, np.ndarray)


def swap_calibrate(p_original: P, p_swapped: P) -> P:
    """P(item 1 preferred) from both presentation orders: ``0.5 * (p + (1 - p_swapped))``.

    ``p_original`` is P(first position preferred) with the items as given, ``p_swapped`` the
    same with the items swapped (floats or arrays). Why: a judge that favours whichever item
    comes first (or second) by a constant amount gives ``p(a, b) + p(b, a) != 1``; averaging both
    orders makes the result antisymmetric (``p'(a, b) + p'(b, a) = 1``, ``p'(a, a) = 0.5``),
    cancelling such a position bias, at the price of two prompts per comparison.
    """
    return 0.5 * (p_original + (1.0 - p_swapped))


def swap_calibrated(fn: Comparator) -> Comparator:
    """The comparator ``p'(a, b) = swap_calibrate(fn(a, b), fn(b, a))`` (PAIRS position-swap
    calibration of any comparator; asks ``fn(a, b)`` first)."""

    def calibrated(a: Hashable, b: Hashable) -> float:
        return float(swap_calibrate(float(fn(a, b)), float(fn(b, a))))

    return calibrated


def choice_columns(final_ids: Sequence[tuple[int, int]]) -> tuple[list[int], Int[Tensor, "pair 2"]]:
    """The token ids to read logits of, and where each prompt's two choices sit among them.

    A batch reads one list of logit ids for every row, so it is the union of all prompts'
    choices (sorted); ``columns[i]`` indexes prompt ``i``'s first and second choice in it.
    """
    ids = sorted({t for pair in final_ids for t in pair})
    col = {t: i for i, t in enumerate(ids)}
    return ids, torch.tensor([[col[a], col[b]] for a, b in final_ids], dtype=torch.long)


def choice_probability(logits: Float[Tensor, "pair n_ids"], columns: Int[Tensor, "pair 2"]
                       ) -> Float[np.ndarray, "pair"]:
    """P(first choice) per prompt: softmax (in float64) over its two choice logits only."""
    two = logits.gather(1, columns.to(logits.device)).double()
    return torch.softmax(two, -1)[:, 0].cpu().numpy()
