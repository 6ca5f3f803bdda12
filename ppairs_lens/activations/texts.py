"""Contrast pairs from the user's own prompt texts: ``prompt + choice`` for two choices, checked
to differ in their final token only (:func:`ppairs_lens.activations.prompts.split_finals`)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ppairs_lens.activations.harvest import harvest_pairs
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.activations.prompts import ContrastPair, split_finals
from ppairs_lens.errors import DataError, TemplateError

__all__ = ["LabelledTexts", "harvest_labelled_texts", "harvest_texts", "text_pairs"]

#: Every text pair is in one group: their common prefix (a shared instruction) runs once.
TEXT_GROUP = "__texts__"


def text_pairs(tokenizer, prompts: Sequence[str], choices: tuple[str, str] = ("1", "2")
               ) -> list[ContrastPair]:
    """One contrast pair per prompt, its pair id the prompt's index, its label 0 (none given)."""
    if isinstance(prompts, str):
        raise TemplateError("prompts must be a list of prompt texts, not one string")
    if len(choices) != 2 or not all(isinstance(c, str) and c for c in choices) \
            or choices[0] == choices[1]:
        raise TemplateError(f"choices must be two different non-empty strings, got {choices!r}")
    if not prompts:
        raise TemplateError("no prompts given")
    for i, text in enumerate(prompts):
        if not isinstance(text, str):
            raise TemplateError(f"prompt {i} is a {type(text).__name__}, not a string")

    def name(i: int) -> str:
        shown = prompts[i] if len(prompts[i]) <= 80 else "..." + prompts[i][-77:]
        return f"prompt {i} {shown!r}"
    try:
        split = split_finals(tokenizer, list(prompts), tuple(choices), name)
    except TemplateError as e:
        raise TemplateError(str(e).replace("after the assistant prefix", "after the prompt")
                            .replace("End the assistant prefix", "End the prompt")) from None
    return [ContrastPair(str(i), tuple(prefix), finals, TEXT_GROUP, 0)
            for i, (prefix, finals) in enumerate(split)]


def harvest_texts(
    model,
    prompts: Sequence[str],
    choices: tuple[str, str] = ("1", "2"),
    names: str | Sequence[str] | None = None,
    *,
    settings: HarvestSettings = HarvestSettings(),
    progress: Callable[[int], None] | None = None,
) -> Float[Tensor, "prompt side readout d_model"]:
    """Activations at the final token of ``prompt + choices[0]`` (side 0) and ``+ choices[1]``
    (``names`` as in :func:`~ppairs_lens.activations.harvest.harvest_pairs`). Prompts are used
    as given: apply a chat template first if the model expects one."""
    pairs = text_pairs(model.tokenizer, prompts, choices)
    return harvest_pairs(model, pairs, settings, progress, names=names)


@dataclass(frozen=True)
class LabelledTexts:
    """Labelled prompt texts' activations, for ``fit_sweep(acts, labels, groups=groups)``."""

    acts: Float[Tensor, "prompt side readout d_model"]
    labels: Int[Tensor, " prompt"]  # 1: choices[0] is right, 2: choices[1] is
    groups: tuple[str, ...]  # leak group of each prompt (its index when none given)


def _text_label(value, i: int) -> int:
    if isinstance(value, bool):
        return 1 if value else 2
    if isinstance(value, (int, str)) and str(value).strip() in ("1", "2"):
        return int(str(value).strip())
    raise DataError(f"label must be 1 / 2 (or True / False), got {value!r}", file="<labels>",
                    row=i + 1, field="label")


def harvest_labelled_texts(
    model, prompts: Sequence[str], labels: Sequence, groups: Sequence | None = None,
    choices: tuple[str, str] = ("1", "2"), names: str | Sequence[str] | None = None, *,
    settings: HarvestSettings = HarvestSettings(),
    progress: Callable[[int], None] | None = None,
) -> LabelledTexts:
    """:func:`harvest_texts` with a label (1 / True: ``choices[0]`` is right, 2 / False) and an
    optional leak group per prompt, checked before the model runs."""
    if len(labels) != len(prompts):
        raise DataError(f"{len(labels)} labels for {len(prompts)} prompts", file="<labels>")
    if groups is not None and len(groups) != len(prompts):
        raise DataError(f"{len(groups)} groups for {len(prompts)} prompts", file="<groups>")
    y = torch.tensor([_text_label(v, i) for i, v in enumerate(labels)], dtype=torch.long)
    g = tuple(str(i) for i in range(len(prompts))) if groups is None else tuple(map(str, groups))
    acts = harvest_texts(model, prompts, choices, names, settings=settings, progress=progress)
    return LabelledTexts(acts=acts, labels=y, groups=g)
