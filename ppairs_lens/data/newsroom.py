"""NEWSROOM's human evaluation (thesis Tables 4.1 / 4.2): its aspects and its articles' HTML.

``newsroom/newsroom.jsonl`` (60 articles x 7 summaries) is a scored-items file like SummEval's,
except that:

* its aspects are NEWSROOM's own (Grusky et al. 2018); relevance asks whether the summary's
  details agree with the article (not SummEval's "selects the important content"), and the
  thesis's "CON" column is informativeness, as in the PPairS authors' code;
* the articles keep the scraped HTML. :func:`clean_html` drops tags before decoding entities,
  so an escaped ``&lt;b&gt;`` stays the text ``<b>``: the prompt holds what a reader saw.
"""

from __future__ import annotations

import html
import re
from dataclasses import replace

from ppairs_lens.data.records import Comparison, Dataset

__all__ = ["NEWSROOM_ASPECTS", "clean_html", "newsroom_dataset"]

#: NEWSROOM aspect -> (adjective, definition), from its annotation questions.
NEWSROOM_ASPECTS: dict[str, tuple[str, str]] = {
    "coherence": ("coherent", "its phrases and sentences fit together and make sense "
                  "collectively"),
    "fluency": ("fluent", "its individual sentences are well-written and grammatical"),
    "informativeness": ("informative", "it captures the key points of the article"),
    "relevance": ("relevant", "the details it gives are consistent with the details in the "
                  "article"),
}

_BREAK = re.compile(r"\s*(?:</p>\s*<p[^>]*>|<br\s*/?>)\s*", re.IGNORECASE)
_TAG = re.compile(r"<[^>]+>")
_SPACES = re.compile(r"[ \t\u00a0]+")
_BLANKS = re.compile(r"\s*\n\s*\n\s*")


def clean_html(text: str) -> str:
    """``text`` without HTML: paragraph breaks as blank lines, other tags dropped, entities
    decoded (after the tags), spaces collapsed."""
    out = _TAG.sub("", _BREAK.sub("\n\n", text))
    out = _SPACES.sub(" ", html.unescape(out))
    return _BLANKS.sub("\n\n", out).strip()


def _clean(r: Comparison) -> Comparison:
    return replace(r, item1=clean_html(r.item1), item2=clean_html(r.item2),
                   context=None if r.context is None else clean_html(r.context))


def newsroom_dataset(dataset: Dataset, aspect: str) -> Dataset:
    """``dataset`` (loaded for ``aspect``) with its texts cleaned and NEWSROOM's own adjective
    and definition for the aspect."""
    adjective, definition = NEWSROOM_ASPECTS.get(aspect, (dataset.aspect, None))
    return replace(dataset, records=[_clean(r) for r in dataset.records], aspect=adjective,
                   aspect_description=definition or dataset.aspect_description,
                   extra={**dataset.extra, "html": "cleaned (ppairs_lens.data.newsroom)"})
