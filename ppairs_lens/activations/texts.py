"""Contrast pairs from the user's own prompt texts: ``prompt + choice`` for two choices.

The built-in path renders records through a template (:mod:`ppairs_lens.activations.prompts`);
here the prompt text is given as is (chat formatting included, if wanted) and the two
continuations are appended. The two sides must differ in their final token only: the same
token-level check as the built-in prompts (:func:`ppairs_lens.activations.prompts.split_final`),
with the failing prompt named.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jaxtyping import Float
from torch import Tensor

from ppairs_lens.activations.harvest import HarvestSettings, harvest_pairs
from ppairs_lens.activations.prompts import ContrastPair, split_final
from ppairs_lens.errors import TemplateError

__all__ = ["harvest_texts", "text_pairs"]

#: Every text pair is in one group: their common prefix (a shared instruction) runs once.
TEXT_GROUP = "__texts__"


def text_pairs(tokenizer, prompts: Sequence[str], choices: tuple[str, str] = ("1", "2")
               ) -> list[ContrastPair]:
    """One contrast pair per prompt: ``prompt + choices[0]`` (side 0) vs ``prompt + choices[1]``.

    Pair ids are the prompts' indices (``"0"``, ``"1"``, ...); labels are 0 (none given). A
    prompt whose two continuations do not differ in exactly their final token is refused with
    its index and text.
    """
    if isinstance(prompts, str):
        raise TemplateError("prompts must be a list of prompt texts, not one string")
    if len(choices) != 2 or not all(isinstance(c, str) and c for c in choices) \
            or choices[0] == choices[1]:
        raise TemplateError(f"choices must be two different non-empty strings, got {choices!r}")
    if not prompts:
        raise TemplateError("no prompts given")
    pairs = []
    for i, text in enumerate(prompts):
        if not isinstance(text, str):
            raise TemplateError(f"prompt {i} is a {type(text).__name__}, not a string")
        shown = text if len(text) <= 80 else "..." + text[-77:]
        try:
            prefix, finals = split_final(tokenizer, text, tuple(choices), f"prompt {i} {shown!r}")
        except TemplateError as e:
            raise TemplateError(str(e).replace("after the assistant prefix", "after the prompt")
                                .replace("End the assistant prefix", "End the prompt")) from None
        pairs.append(ContrastPair(str(i), tuple(prefix), finals, TEXT_GROUP, 0))
    return pairs


def harvest_texts(
    model,
    prompts: Sequence[str],
    choices: tuple[str, str] = ("1", "2"),
    names: str | Sequence[str] | None = None,
    *,
    settings: HarvestSettings = HarvestSettings(),
    progress: Callable[[int], None] | None = None,
) -> Float[Tensor, "prompt side readout d_model"]:
    """Activations ``[len(prompts), 2, n_readouts, d_model]`` at the final token of
    ``prompt + choices[0]`` (side 0) and ``prompt + choices[1]`` (side 1).

    ``names`` picks the read-outs as in :func:`ppairs_lens.activations.harvest.harvest_pairs`
    (default: every block's resid_post and the final norm). Prompts are used as given: apply a
    chat template first if the model expects one.
    """
    pairs = text_pairs(model.tokenizer, prompts, choices)
    return harvest_pairs(model, pairs, settings, progress, names=names)
