"""Training examples of a finetuned judge and their batches.

A comparison gives two examples, the items as given and swapped, each the prompted judge's own
prefix (same template, chat rendering and tokens) with the choice token naming the preferred
item as target: training on both orders keeps the judge from learning a position. Ties have
no correct choice and are left out.

Batches are left-padded with explicit position ids, so the last column is every row's last
prompt token; the mask is built from the lengths, never from ids (SmolLM2's pad token is its
end-of-turn token). :func:`collate_shared` puts a comparison's common prompt prefix (about
half of a Story Cloze or MC-TACO prompt) in one row of a prefix pass and each order's rest in
a suffix pass attending to it: the logits equal the padded batch's up to float rounding, with
fewer tokens (in training, LoRA's dropout then draws one mask for the shared prefix, not two).
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

__all__ = ["ChoiceExample", "ChoiceBatch", "SharedBatch", "choice_examples", "collate",
           "collate_shared", "comparison_groups", "prompt_examples"]


@dataclass(frozen=True)
class ChoiceExample:
    """A prompt up to the choice, its correct choice token, its ``order`` ("original" /
    "swapped")."""

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
    """Both orders (original first) of every untied comparison, record by record."""
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


def prompt_examples(tokenizer, dataset: Dataset, template: Template | None = None
                    ) -> list[ChoiceExample]:
    """Both orders of every comparison of ``dataset`` (ties too) as prompts to read, original
    then swapped per record; ``target`` is the first choice token and ``wrong`` the second, so
    logit(target) - logit(wrong) is the prompted judge's log-odds of choice 1."""
    orders = {"original": build_contrast_pairs(tokenizer, dataset, template),
              "swapped": build_contrast_pairs(tokenizer, swapped_dataset(dataset), template)}
    return [ChoiceExample(pairs[i].pair_id, order, pairs[i].prefix_ids,
                          int(pairs[i].final_ids[0]), int(pairs[i].final_ids[1]))
            for i in range(len(dataset.records)) for order, pairs in orders.items()]


def comparison_groups(examples: Sequence[ChoiceExample]) -> list[list[int]]:
    """Positions of ``examples`` grouped by runs of one ``pair_id`` (a comparison's orders)."""
    groups: list[list[int]] = []
    for i, e in enumerate(examples):
        if groups and examples[groups[-1][0]].pair_id == e.pair_id:
            groups[-1].append(i)
        else:
            groups.append([i])
    return groups


@dataclass(frozen=True)
class SharedBatch:
    """``prefix_*``: one left-padded row per group; ``suffix_*``: one per example, attending
    to its prefix row ``group``."""

    prefix_ids: Int[Tensor, "group p"]
    prefix_mask: Int[Tensor, "group p"]
    prefix_pos: Int[Tensor, "group p"]
    suffix_ids: Int[Tensor, "batch s"]
    suffix_mask: Int[Tensor, "batch s"]
    suffix_pos: Int[Tensor, "batch s"]
    group: Int[Tensor, " batch"]
    targets: Int[Tensor, " batch"]
    wrong: Int[Tensor, " batch"]


def _common(seqs: Sequence[tuple[int, ...]]) -> int:
    n = min(len(s) for s in seqs)
    for i in range(n):
        if any(s[i] != seqs[0][i] for s in seqs[1:]):
            return i
    return n


def _left_pad(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[Tensor, Tensor]:
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), int(pad_id), dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r):] = torch.tensor(list(r), dtype=torch.long)
            mask[i, width - len(r):] = 1
    return ids, mask


def collate_shared(examples: Sequence[ChoiceExample], pad_id: int,
                   device: str | torch.device = "cpu") -> SharedBatch:
    """``examples`` batched with each comparison's common prefix once; every suffix keeps at
    least its last token."""
    groups = comparison_groups(examples)
    prefixes, suffixes, group = [], [], []
    for g, idx in enumerate(groups):
        seqs = [examples[i].input_ids for i in idx]
        if min(len(s) for s in seqs) < 2:
            raise DataError(f"pair {examples[idx[0]].pair_id}: a prompt shorter than 2 tokens")
        c = min(_common(seqs), min(len(s) for s in seqs) - 1)
        prefixes.append(seqs[0][:c])
        suffixes += [s[c:] for s in seqs]
        group += [g] * len(idx)
    p_ids, p_mask = _left_pad(prefixes, pad_id)
    s_ids, s_mask = _left_pad(suffixes, pad_id)
    lengths = p_mask.sum(dim=1)
    g = torch.tensor(group, dtype=torch.long)
    p_pos = (p_mask.cumsum(dim=1) - 1).clamp(min=0)
    s_pos = lengths[g, None] + (s_mask.cumsum(dim=1) - 1).clamp(min=0)
    order = [i for idx in groups for i in idx]
    tgt = torch.tensor([examples[i].target for i in order], dtype=torch.long)
    wrong = torch.tensor([examples[i].wrong for i in order], dtype=torch.long)
    return SharedBatch(*(t.to(device) for t in (p_ids, p_mask, p_pos, s_ids, s_mask, s_pos, g,
                                                 tgt, wrong)))


def collate(examples: Sequence[ChoiceExample], pad_id: int,
            device: str | torch.device = "cpu") -> ChoiceBatch:
    """Left-pad ``examples`` into one batch (mask and position ids from the lengths)."""
    ids, mask = _left_pad([e.input_ids for e in examples], pad_id)
    pos = (mask.cumsum(dim=1) - 1).clamp(min=0)
    tgt = torch.tensor([e.target for e in examples], dtype=torch.long)
    wrong = torch.tensor([e.wrong for e in examples], dtype=torch.long)
    return ChoiceBatch(ids.to(device), mask.to(device), pos.to(device), tgt.to(device),
                       wrong.to(device))
