"""Prompt templates that turn records into contrast pairs of token ids.

A contrast pair is two prompts that are identical except for their final token ("... is Choice
1" vs "... is Choice 2", or "... is True" vs "... is False"). We check that at the token level,
because a tokenizer that merges the final token with what precedes it would silently give two
prompts that differ in more than the choice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import ClassVar, Protocol

from ppairs_lens.errors import TemplateError
from ppairs_lens.data.records import Comparison, Dataset, Statement

#: Aspect descriptions in the spirit of the paper's appendix (SummEval / HANNA aspects).
ASPECT_DESCRIPTIONS: dict[str, str] = {
    "coherent": "Coherence: the collective quality of all sentences; a well-structured, "
                "well-organised text that builds from sentence to sentence.",
    "consistent": "Consistency: the factual alignment between the text and its source; no "
                  "hallucinated facts.",
    "fluent": "Fluency: the quality of individual sentences: grammar, spelling, word choice.",
    "relevant": "Relevance: selection of the important content from the source.",
    "empathetic": "Empathy: how well the reader understands the characters' emotions.",
    "surprising": "Surprise: how surprising the end of the story is.",
    "engaging": "Engagement: how much the reader engages with the story.",
    "complex": "Complexity: how elaborate the story is.",
}


@dataclass(frozen=True)
class ContrastPair:
    """Token ids of one contrast pair: ``prefix_ids + [final_ids[0]]`` vs ``+ [final_ids[1]]``.

    Side 0 is the prompt that names item 1 (or "True"); ``label`` is 1, 2 or 0 (tie).
    ``group`` marks pairs that share a context, so the harvester can run it once.
    """

    pair_id: str
    prefix_ids: tuple[int, ...]
    final_ids: tuple[int, int]
    group: str
    label: int


def comparative(aspect: str) -> str:
    """'coherent' -> 'more coherent'; already comparative phrases ('larger', 'more X') as is."""
    first = aspect.split()[0].lower() if aspect.strip() else ""
    if first in {"more", "less", "better", "worse"} or (first.endswith("er") and len(first) > 4):
        return aspect
    return f"more {aspect}"


class TemplateBase:
    """What every prompt template shares: :meth:`describe`, its kind and fields as a dict (saved
    in a store's metadata and hashed by :func:`template_hash`)."""

    kind: ClassVar[str]

    def describe(self) -> dict:
        return {"kind": self.kind, **asdict(self)}


class ChatTemplate(Protocol):
    """A question as a chat user turn plus an assistant prefix, as :func:`render_chat` fills it:
    :class:`ComparisonTemplate`, or :class:`ppairs_lens.judges.scoring.ScoreTemplate`."""

    user: str
    context_block: str
    no_context_block: str
    assistant: str
    include_description: bool


@dataclass(frozen=True)
class ComparisonTemplate(TemplateBase):
    """The paper's comparison prompt as a chat user turn plus an assistant prefix.

    The user turn asks which item is more <aspect>; the assistant turn is pre-filled with
    "Between Choice 1 and Choice 2, the more <aspect> <item> is Choice " and the final token
    is the choice. Fields in braces are filled from the dataset and record.
    """

    user: str = ("{context_block}{Item} Choice 1:\n{item1}\n\n{Item} Choice 2:\n{item2}\n\n"
                 "Which {item} is {comparative}?{description} Answers must be a single choice.")
    context_block: str = "Consider the following {context_name}:\n{context}\n\n"
    no_context_block: str = "Consider the following two {item}s.\n\n"
    assistant: str = "Between Choice 1 and Choice 2, the {comparative} {item} is Choice "
    choices: tuple[str, str] = ("1", "2")
    system: str | None = None
    include_description: bool = True
    kind: ClassVar[str] = "comparison"


@dataclass(frozen=True)
class StatementTemplate(TemplateBase):
    """A single statement followed by a true/false completion (the thesis's formulation)."""

    user: str = "Is the following statement true or false?\n{statement}"
    assistant: str = "The statement is"
    choices: tuple[str, str] = (" True", " False")
    system: str | None = None
    kind: ClassVar[str] = "statement"


Template = ComparisonTemplate | StatementTemplate


def template_hash(template: Template) -> str:
    return hashlib.sha256(json.dumps(template.describe(), sort_keys=True).encode()).hexdigest()[:12]


def default_template(dataset: Dataset) -> Template:
    return StatementTemplate() if dataset.kind == "statement" else ComparisonTemplate()


def chat_text(tokenizer, system: str | None, user: str) -> str:
    """The chat prompt text of one user turn (after an optional system turn), ending where the
    assistant's answer starts; the user text itself for a tokenizer without a chat template."""
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": user}]
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return user + "\n"  # a base model without a chat template gets the plain text


def chat_turns_text(tokenizer, system: str | None, turns: Sequence[tuple[str, str]],
                    user: str) -> str:
    """The chat prompt text of earlier ``(user, assistant)`` turns and then one user turn,
    ending where the assistant's answer starts: few-shot demonstrations as a conversation.

    Without earlier turns it is :func:`chat_text`. A tokenizer without a chat template gets
    the plain text: each earlier question and its answer, then the question.
    """
    if not turns:
        return chat_text(tokenizer, system, user)
    messages = [{"role": "system", "content": system}] if system else []
    for u, a in turns:
        messages += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
    messages.append({"role": "user", "content": user})
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return "".join(f"{u}\n{a}\n\n" for u, a in turns) + user + "\n"


def render_chat(template: ChatTemplate, dataset: Dataset, context: str | None,
                **items: str) -> tuple[str, str, str]:
    """The user turn, the assistant prefix and the context block of one prompt.

    Fields in braces come from ``dataset``'s question (``item``, ``Item``, ``aspect``,
    ``comparative``, ``context_name``, ``description``) and from ``items`` (``item1`` /
    ``item2`` of a comparison, ``item_text`` of a rated item). The block is the part that every
    prompt of one context shares: the context, else the instruction header.
    """
    item = dataset.item_name
    desc = ""
    if template.include_description:
        d = dataset.aspect_description or ASPECT_DESCRIPTIONS.get(dataset.aspect)
        desc = f" ({d})" if d else ""
    fields = dict(item=item, Item=item[:1].upper() + item[1:], aspect=dataset.aspect,
                  comparative=comparative(dataset.aspect), context_name=dataset.context_name,
                  description=desc, **items)
    block = (template.context_block.format(context_name=dataset.context_name, context=context)
             if context else template.no_context_block.format(**fields))
    return template.user.format(context_block=block, **fields), \
        template.assistant.format(**fields), block


def render_comparison(template: ComparisonTemplate, dataset: Dataset, rec: Comparison) -> tuple[str, str]:
    """The user turn and the assistant prefix (without the choice) for one comparison."""
    user, assistant, _ = render_chat(template, dataset, rec.context, item1=rec.item1,
                                     item2=rec.item2)
    return user, assistant


def render_statement(template: StatementTemplate, rec: Statement) -> tuple[str, str]:
    return template.user.format(statement=rec.statement), template.assistant


def render_record(template: Template, dataset: Dataset, rec: Comparison | Statement
                  ) -> tuple[str, str]:
    """The user turn and the assistant prefix (without the choice) of any record."""
    if isinstance(template, StatementTemplate):
        return render_statement(template, rec)
    return render_comparison(template, dataset, rec)


def prompt_prefix_text(tokenizer, template: Template, dataset: Dataset, rec) -> str:
    """The full prompt text up to (not including) the choice token."""
    if isinstance(template, StatementTemplate):
        user, assistant = render_statement(template, rec)
    else:
        user, assistant = render_comparison(template, dataset, rec)
    return chat_text(tokenizer, template.system, user) + assistant


#: Texts per batched tokenizer call: HF fast tokenizers encode a batch on every core, and the
#: batch's encodings are held at once (a 48,000-pair SummEval harvest tokenizes 144,000 texts).
TOKENIZE_CHUNK = 3072


def split_finals(tokenizer, prefix_texts: Sequence[str], choices: tuple[str, str],
                 name: str | Callable[[int], str]) -> list[tuple[list[int], tuple[int, int]]]:
    """``prefix_text + choice`` for both ``choices``, for every text -> (shared prefix ids, the
    two final ids), refused (:class:`TemplateError`, starting with ``name``, or ``name(i)`` for
    text ``i``) unless the two prompts differ in their final token only and the prefix alone
    tokenizes as the prompts' shared part.

    Every text's three tokenizations go in batched calls (the tokenizer spreads a batch over
    the cores): at full sizes, one call per text kept the GPU idle for minutes before a
    harvest (measured on an H100 machine: ~250 s for SummEval's 48,000 pairs)."""
    out: list[tuple[list[int], tuple[int, int]]] = []
    for at in range(0, len(prefix_texts), TOKENIZE_CHUNK):
        chunk = list(prefix_texts[at:at + TOKENIZE_CHUNK])
        n = len(chunk)
        ids = tokenizer([t + c for c in choices for t in chunk] + chunk,
                        add_special_tokens=False).input_ids
        for k, (a, b, pre) in enumerate(zip(ids[:n], ids[n:2 * n], ids[2 * n:])):
            label = name(at + k) if callable(name) else name
            _check_final(tokenizer, label, choices, a, b, pre)
            out.append((a[:-1], (a[-1], b[-1])))
    return out


def _check_final(tokenizer, name: str, choices: tuple[str, str], a: list[int], b: list[int],
                 pre: list[int]) -> None:
    if len(a) != len(b) or a[:-1] != b[:-1] or a[-1] == b[-1]:
        raise TemplateError(
            f"{name}: the two prompts of a contrast pair must be identical except for their "
            f"final token, but choices {tuple(choices)!r} tokenize to "
            f"{[tokenizer.convert_ids_to_tokens(x[-4:]) for x in (a, b)]} (last 4 tokens each)."
            " Choose choice strings that are single tokens after the assistant prefix.")
    if pre != a[:-1]:
        raise TemplateError(
            f"{name}: the tokenizer merges the choice {choices[0]!r} with the text before "
            f"it (prefix ends {tokenizer.convert_ids_to_tokens(pre[-3:])}, full prompt ends "
            f"{tokenizer.convert_ids_to_tokens(a[-3:])}); the prefix would not be a prompt the "
            "model sees. End the assistant prefix where the choice starts a new token.")


def build_contrast_pairs(tokenizer, dataset: Dataset, template: Template | None = None) -> list[ContrastPair]:
    """Contrast pairs for every record of ``dataset`` (ties included, labelled 0)."""
    template = template or default_template(dataset)
    if (dataset.kind == "statement") != isinstance(template, StatementTemplate):
        raise TemplateError(f"{type(template).__name__} does not fit a {dataset.kind} dataset "
                            f"({dataset.name})")
    texts = [prompt_prefix_text(tokenizer, template, dataset, rec) for rec in dataset.records]
    split = split_finals(tokenizer, texts, template.choices, type(template).__name__)
    pairs = []
    for rec, label, (prefix, finals) in zip(dataset.records, dataset.labels(), split):
        # Comparisons with a context share it; everything else shares the instruction text.
        group = rec.context_id if (isinstance(rec, Comparison) and rec.context) else "__all__"
        pairs.append(ContrastPair(rec.pair_id, tuple(prefix), finals, str(group), label))
    return pairs
