"""Training examples of a finetuned judge: each comparison's prompt prefix and its correct
choice token, in both item orders, and their batches.

A comparison gives two examples: the prompt with the items as given and the prompt with the
items swapped (:func:`ppairs_lens.judges.zero_shot.swapped_dataset`), each the prompted
judge's own prefix (:func:`ppairs_lens.activations.prompts.build_contrast_pairs`, so the
same template, chat rendering and tokens) with the choice token that names the preferred item
as the target. Training on both orders keeps the judge from learning a position. Ties are left
out (they have no correct choice).

Batches are left-padded with the tokenizer's attention mask and explicit position ids, so the
last column is every row's last prompt token and padding changes nothing (the pad token is the
end-of-turn token in SmolLM2's tokenizer: the mask is built from the lengths, never from ids).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Int
from torch import Tensor

from ppairs_lens.activations.prompts import Template, build_contrast_pairs
from ppairs_lens.data.records import ITEM1, ITEM2, Dataset
from ppairs_lens.errors import DataError
from ppairs_lens.judges.zero_shot import swapped_dataset

__all__ = ["ChoiceExample", "ChoiceBatch", "choice_examples", "collate"]


@dataclass(frozen=True)
class ChoiceExample:
    """One training prompt: ``input_ids`` up to the choice, the correct choice token
    ``target``, and where it came from (``pair_id``, ``order``: "original" / "swapped")."""

    pair_id: str
    order: str
    input_ids: tuple[int, ...]
    target: int
    wrong: int  # the other choice token (for accuracy and log-odds on training data)


@dataclass(frozen=True)
class ChoiceBatch:
    """Left-padded prompts; column -1 is each row's last prompt token."""

    input_ids: Int[Tensor, "batch seq"]
    attention_mask: Int[Tensor, "batch seq"]
    position_ids: Int[Tensor, "batch seq"]
    targets: Int[Tensor, " batch"]
    wrong: Int[Tensor, " batch"]


def choice_examples(tokenizer, dataset: Dataset, template: Template | None = None
                    ) -> list[ChoiceExample]:
    """Both orders of every non-tied comparison of ``dataset`` as training examples (the
    original order first, then the swapped one, record by record)."""
    if dataset.kind != "comparison":
        raise DataError(f"{dataset.name}: a finetuned judge is trained on comparisons, not "
                        f"{dataset.kind}s")
    orders = {"original": build_contrast_pairs(tokenizer, dataset, template),
              "swapped": build_contrast_pairs(tokenizer, swapped_dataset(dataset), template)}
    out = []
    for i in range(len(dataset.records)):
        for order, pairs in orders.items():
            p = pairs[i]
            if p.label not in (ITEM1, ITEM2):
                continue
            right, wrong = p.final_ids if p.label == ITEM1 else p.final_ids[::-1]
            out.append(ChoiceExample(p.pair_id, order, p.prefix_ids, int(right), int(wrong)))
    if not out:
        raise DataError(f"{dataset.name}: no untied comparisons to train on")
    return out


def collate(examples: Sequence[ChoiceExample], pad_id: int,
            device: str | torch.device = "cpu") -> ChoiceBatch:
    """Left-pad ``examples`` into one batch (mask and position ids from the lengths)."""
    width = max(len(e.input_ids) for e in examples)
    ids = torch.full((len(examples), width), int(pad_id), dtype=torch.long)
    mask = torch.zeros((len(examples), width), dtype=torch.long)
    for r, e in enumerate(examples):
        n = len(e.input_ids)
        ids[r, width - n:] = torch.tensor(e.input_ids, dtype=torch.long)
        mask[r, width - n:] = 1
    pos = (mask.cumsum(dim=1) - 1).clamp(min=0)
    tgt = torch.tensor([e.target for e in examples], dtype=torch.long)
    wrong = torch.tensor([e.wrong for e in examples], dtype=torch.long)
    return ChoiceBatch(ids.to(device), mask.to(device), pos.to(device), tgt.to(device),
                       wrong.to(device))
