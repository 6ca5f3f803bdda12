"""Prompt templates that turn records into contrast pairs of token ids.

A contrast pair is two prompts identical except for their final token ("... is Choice 1" vs
"... is Choice 2"). That is checked on the tokens: a tokenizer that merges the final token with
what precedes it would silently give prompts differing in more than the choice.

A template file (``--template FILE``, :func:`load_template`) is one JSON object: ``"kind"``
(``"comparison"`` or ``"statement"``) and any fields to change, e.g. ``{"kind": "comparison",
"choices": ["1", "2"]}``: the ``"template"`` entry of a store's ``metadata.json`` as it is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
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
    """``prefix_ids + [final_ids[0]]`` (item 1, or "True") vs ``+ [final_ids[1]]``; ``label``
    1, 2 or 0 (tie); ``group`` marks pairs sharing a context, run once."""

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
    """:meth:`describe`: kind and fields (saved in a store's metadata, hashed)."""

    kind: ClassVar[str]

    def describe(self) -> dict:
        return {"kind": self.kind, **asdict(self)}


class ChatTemplate(Protocol):
    """What :func:`render_chat` fills: :class:`ComparisonTemplate`, or
    :class:`ppairs_lens.judges.scoring.ScoreTemplate`."""

    user: str
    context_block: str
    no_context_block: str
    assistant: str
    include_description: bool


@dataclass(frozen=True)
class ComparisonTemplate(TemplateBase):
    """The paper's comparison prompt: which item is more <aspect>, then an assistant prefix
    after which the final token is the choice."""

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
    """The chat prompt text of one user turn, ending where the assistant's answer starts."""
    return chat_turns_text(tokenizer, system, (), user)


def chat_turns_text(tokenizer, system: str | None, turns: Sequence[tuple[str, str]],
                    user: str) -> str:
    """Earlier ``(user, assistant)`` turns (few-shot demonstrations), then one user turn, ending
    where the assistant's answer starts; plain text without a chat template (a base model)."""
    messages = [{"role": "system", "content": system}] if system else []
    for u, a in turns:
        messages += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
    messages.append({"role": "user", "content": user})
    if getattr(tokenizer, "chat_template", None):
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return "".join(f"{u}\n{a}\n\n" for u, a in turns) + user + "\n"


def render_chat(template: ChatTemplate, dataset: Dataset, context: str | None,
                **items: str) -> tuple[str, str, str]:
    """The user turn, assistant prefix and context block (what the prompts of one context
    share) of one prompt. Braces are filled from ``dataset`` (``item``, ``Item``, ``aspect``,
    ``comparative``, ``context_name``, ``description``) and ``items``."""
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


def render_record(template: Template, dataset: Dataset, rec: Comparison | Statement
                  ) -> tuple[str, str]:
    """The user turn and the assistant prefix (without the choice) of any record."""
    if isinstance(template, StatementTemplate):
        return template.user.format(statement=rec.statement), template.assistant
    user, assistant, _ = render_chat(template, dataset, rec.context, item1=rec.item1,
                                     item2=rec.item2)
    return user, assistant


def prompt_prefix_text(tokenizer, template: Template, dataset: Dataset, rec) -> str:
    """The full prompt text up to (not including) the choice token."""
    user, assistant = render_record(template, dataset, rec)
    return chat_text(tokenizer, template.system, user) + assistant


#: Texts per batched tokenizer call: HF fast tokenizers encode a batch on every core, and the
#: batch's encodings are held at once (a 48,000-pair SummEval harvest tokenizes 144,000 texts).
TOKENIZE_CHUNK = 3072


def split_finals(tokenizer, prefix_texts: Sequence[str], choices: tuple[str, str],
                 name: str | Callable[[int], str]) -> list[tuple[list[int], tuple[int, int]]]:
    """``prefix_text + choice`` for both ``choices`` -> (shared prefix ids, the two final ids),
    refused (the error starting ``name``, or ``name(i)``) unless the prompts differ in their
    final token only and the prefix alone tokenizes as their shared part. Batched: one call per
    text kept an H100 idle ~250 s before a harvest of SummEval's 48,000 pairs."""
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


TEMPLATE_KINDS: dict[str, type] = {"comparison": ComparisonTemplate,
                                   "statement": StatementTemplate}


def _checked(kind: str, name: str, value, default, where: str):
    if name == "choices":
        if (isinstance(value, (list, tuple)) and len(value) == 2
                and all(isinstance(c, str) and c for c in value) and value[0] != value[1]):
            return tuple(value)
        raise TemplateError(f"{where}: \"choices\" must be two different non-empty strings, "
                            f"got {value!r}")
    ok = (value is None or isinstance(value, str)) if name == "system" else \
        isinstance(value, type(default))
    if not ok:
        want = "a string or null" if name == "system" else type(default).__name__
        raise TemplateError(f"{where}: field {name!r} of a {kind} template must be {want}, "
                            f"got {value!r}")
    return value


def template_from_dict(desc: dict, where: str = "template") -> Template:
    """A template from ``kind`` plus any fields to change; ``where`` starts every error."""
    if not isinstance(desc, dict):
        raise TemplateError(f"{where}: expected a JSON object of template fields, got "
                            f"{type(desc).__name__}")
    desc = dict(desc)
    kind = desc.pop("kind", None)
    cls = TEMPLATE_KINDS.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise TemplateError(f"{where}: \"kind\" must be one of {sorted(TEMPLATE_KINDS)}, got "
                            f"{kind!r}")
    fields = {f.name: f.default for f in dataclasses.fields(cls)}
    unknown = sorted(set(desc) - set(fields))
    if unknown:
        raise TemplateError(f"{where}: unknown field(s) {unknown} for a {kind} template; its "
                            f"fields are {sorted(fields)}")
    return cls(**{k: _checked(kind, k, v, fields[k], where) for k, v in desc.items()})


def load_template(path: str | Path) -> Template:
    path = Path(path)
    where = f"template file {path}"
    try:
        text = path.read_text("utf-8")
    except OSError as e:
        raise TemplateError(f"{where}: cannot read it ({e.strerror or e})") from None
    try:
        desc = json.loads(text)
    except json.JSONDecodeError as e:
        raise TemplateError(f"{where}: not valid JSON (line {e.lineno}, column {e.colno}: "
                            f"{e.msg})") from None
    return template_from_dict(desc, where)


def check_template_fits(template: Template, dataset: Dataset, tokenizer=None) -> None:
    """Refuse a template of the wrong kind, or naming placeholders the records do not fill
    (tried on the first); with a ``tokenizer``, also a contrast that is not one final token."""
    name = type(template).__name__
    if (dataset.kind == "statement") != isinstance(template, StatementTemplate):
        raise TemplateError(f"{name} does not fit the {dataset.kind} dataset {dataset.name}: "
                            f"use a template of kind {dataset.kind!r}")
    if not dataset.records:
        return
    rec = dataset.records[0]
    try:
        render_record(template, dataset, rec)
    except (KeyError, IndexError, ValueError) as e:
        raise TemplateError(f"{name}: cannot fill its fields for dataset {dataset.name} "
                            f"({type(e).__name__}: {e}); a placeholder in braces it does not "
                            "know, or a lone brace (write {{ }} for a literal one)?") from None
    if tokenizer is not None:
        build_contrast_pairs(tokenizer, dataclasses.replace(dataset, records=[rec]), template)
