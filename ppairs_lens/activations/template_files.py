"""Prompt templates from JSON (``ppairs-lens ... --template FILE``), checked against datasets.

A template file is one JSON object: ``"kind"`` (``"comparison"`` or ``"statement"``) and any
fields of :class:`ppairs_lens.activations.prompts.ComparisonTemplate` /
:class:`~ppairs_lens.activations.prompts.StatementTemplate` to change (the rest keep their
defaults), e.g. ``{"kind": "comparison", "assistant": "The {comparative} {item} is Choice ",
"choices": ["1", "2"]}``. It is the ``"template"`` entry of a store's ``metadata.json``, so a
store's template can be copied into a file as it is.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from ppairs_lens.activations.prompts import (
    ComparisonTemplate,
    StatementTemplate,
    Template,
    build_contrast_pairs,
    render_comparison,
    render_statement,
)
from ppairs_lens.data.records import Dataset
from ppairs_lens.errors import TemplateError

__all__ = ["TEMPLATE_KINDS", "check_template_fits", "load_template", "template_from_dict"]

TEMPLATE_KINDS: dict[str, type] = {"comparison": ComparisonTemplate,
                                   "statement": StatementTemplate}


def _checked(kind: str, name: str, value, default, where: str):
    """``value`` for field ``name``, refused unless it has the field's type."""
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
    """A template from its fields (``kind`` plus any fields to change); ``where`` starts every
    error (a file name, say)."""
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
    """The template in the JSON file ``path`` (format: see the module docstring)."""
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
    """Refuse a template of the wrong kind for ``dataset``, or one whose fields name
    placeholders that the dataset's records do not fill (tried on its first record); with a
    ``tokenizer``, also one whose two prompts do not differ in their final token only."""
    name = type(template).__name__
    if (dataset.kind == "statement") != isinstance(template, StatementTemplate):
        raise TemplateError(f"{name} does not fit the {dataset.kind} dataset {dataset.name}: "
                            f"use a template of kind {dataset.kind!r}")
    if not dataset.records:
        return
    rec = dataset.records[0]
    try:
        if isinstance(template, StatementTemplate):
            render_statement(template, rec)
        else:
            render_comparison(template, dataset, rec)
    except (KeyError, IndexError, ValueError) as e:
        raise TemplateError(f"{name}: cannot fill its fields for dataset {dataset.name} "
                            f"({type(e).__name__}: {e}); a placeholder in braces it does not "
                            "know, or a lone brace (write {{ }} for a literal one)?") from None
    if tokenizer is not None:
        build_contrast_pairs(tokenizer, dataclasses.replace(dataset, records=[rec]), template)
