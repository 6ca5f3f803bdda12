"""Scoring baselines on the same model and prompts: direct scoring and G-Eval.

Both rate one item at a time on a 1-5 scale: the assistant turn is pre-filled up to "... I
would rate it ", and the next-token logits of "1" .. "5" are read (each checked to be one token
starting right where the prompt ends, so they are the probabilities of the whole answer):

* **direct scoring** - the answer is the most likely score (``argmax``), as a model answering
  greedily would; many items tie, which is what makes it a weak ranker.
* **G-Eval** (Liu et al. 2023) - the probability-weighted mean score ``sum_k k p(k)`` with
  ``p`` the softmax over the five score logits only.

Both are read with a tie rule (:data:`SCORE_TIE`; G-Eval's :func:`chained_ties`), so that the
last bits of a float32 logit decide neither: two copies of one summary in an article (SummEval
has them) then tie on every host. Items of one context share its prefix, across several sets
of items too (:func:`score_item_sets`), or across calls through a
:class:`~ppairs_lens.judges.context_cache.ContextKV`.
"""

from __future__ import annotations

import itertools
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import torch
from jaxtyping import Float

from ppairs_lens.activations.harvest import check_context_length
from ppairs_lens.activations.runner import HarvestSettings, run_branches
from ppairs_lens.activations.prefix_sharing import plan, tokens_computed
from ppairs_lens.activations.prompts import TemplateBase, chat_text, render_chat
from ppairs_lens.data.records import Dataset, ScoredItem
from ppairs_lens.errors import TemplateError
from ppairs_lens.judges.calibration import TIE_LOGODDS
from ppairs_lens.judges.comparators import dataset_meta
from ppairs_lens.judges.context_cache import ContextKV, context_anchor
from ppairs_lens.judges.progress import judge_bar

__all__ = ["SCORE_TIE", "ScoreTemplate", "ScorePrompt", "ItemScores", "score_prompt",
           "score_items", "score_item_sets", "chained_ties"]

#: Score logits, and G-Eval scores (on the 1-5 scale), closer than this are ties: the prompted
#: judges' band (:data:`~ppairs_lens.judges.calibration.TIE_LOGODDS`, 2e-4). The same prompt's
#: logits move by about 1e-6 between batch make-ups and hosts (float32 logits of magnitude
#: ~20), a G-Eval score by no more than that: the band is a hundred times it.
SCORE_TIE: float = TIE_LOGODDS


def chained_ties(values: Float[np.ndarray, "n"], groups: Sequence[Hashable],
                 band: float = SCORE_TIE) -> Float[np.ndarray, "n"]:
    """``values`` with each group's chains tied: sorted within its group, a value within
    ``band`` of the one before joins its chain, and all take the chain's smallest. Exact ties
    stay ties whatever noise below ``band`` moved them; a chain has no width of its own, which
    near-equal scores of distinct items make rare. NaN joins no chain."""
    v = np.asarray(values, dtype=np.float64)
    out = v.copy()
    by_group: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        if np.isfinite(v[i]):
            by_group.setdefault(g, []).append(i)
    for idx in by_group.values():
        # ties in the sort broken by position, so the chain's members never depend on order
        order = sorted(idx, key=lambda i: (v[i], i))
        start = v[order[0]]
        for prev, cur in zip(order, order[1:]):
            if v[cur] - v[prev] >= band:
                start = v[cur]
            out[cur] = start
    return out


@dataclass(frozen=True)
class ScoreTemplate(TemplateBase):
    """The single-item rating prompt: a chat user turn plus an assistant prefix, which must end
    where the score token starts (checked with the tokenizer)."""

    user: str = ("{context_block}{Item}:\n{item_text}\n\n"
                 "How {aspect} is this {item}?{description} Rate it on a scale from 1 (not "
                 "{aspect} at all) to 5 (very {aspect}). Answer with a single number.")
    context_block: str = "Consider the following {context_name}:\n{context}\n\n"
    no_context_block: str = "Consider the following {item}.\n\n"
    assistant: str = ("On a scale from 1 (not {aspect} at all) to 5 (very {aspect}), "
                      "I would rate it ")
    scores: tuple[str, ...] = ("1", "2", "3", "4", "5")
    system: str | None = None
    include_description: bool = True
    kind: ClassVar[str] = "score"


@dataclass(frozen=True)
class ScorePrompt:
    """Token ids of one rating prompt (ending right before the score) and its score tokens."""

    item_id: str
    prefix_ids: tuple[int, ...]
    score_ids: tuple[int, ...]
    group: str
    text: str
    block: str | None


def score_prompt(tokenizer, meta: Dataset | Mapping[str, Any], item_id: Hashable,
                 item: ScoredItem | str, template: ScoreTemplate | None = None) -> ScorePrompt:
    """The rating prompt of one item; :class:`TemplateError` unless every score string is one
    token kept separate from the prompt before it."""
    template = template or ScoreTemplate()
    meta = dataset_meta(meta)
    text, context, ctx_id = ((item.text, item.context, item.context_id)
                             if isinstance(item, ScoredItem) else (str(item), None, None))
    user, assistant, block = render_chat(template, meta, context, item_text=text)
    prompt = chat_text(tokenizer, template.system, user) + assistant
    pre = tokenizer(prompt, add_special_tokens=False).input_ids
    ids = []
    for s in template.scores:
        full = tokenizer(prompt + s, add_special_tokens=False).input_ids
        if len(full) != len(pre) + 1 or full[:-1] != pre:
            raise TemplateError(
                f"score {s!r} is not one token after the assistant prefix (prompt ends "
                f"{tokenizer.convert_ids_to_tokens(pre[-3:])}, with the score "
                f"{tokenizer.convert_ids_to_tokens(full[-3:])}); end the prefix where the score "
                "starts a new token")
        ids.append(full[-1])
    if len(set(ids)) != len(ids):
        raise TemplateError(f"score strings {template.scores} share tokens {ids}")
    group = str(ctx_id) if context else "__all__"
    return ScorePrompt(str(item_id), tuple(pre), tuple(ids), group, prompt, block)


@dataclass(frozen=True)
class ItemScores:
    """Scores of items read from one forward per item: ``logits[i]``, the score tokens'
    next-token logits; ``probs``, their softmax over those tokens only; ``n_rows``, items
    scored (one prompt each)."""

    item_ids: tuple[str, ...]
    score_values: tuple[float, ...]
    logits: Float[np.ndarray, "item score"]
    n_rows: int
    n_tokens: int
    #: each item's context (its prompt's group): G-Eval's ties are chained within one
    groups: tuple[str, ...] = ()

    @property
    def probs(self) -> Float[np.ndarray, "item score"]:
        z = self.logits - self.logits.max(axis=1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(axis=1, keepdims=True)

    @property
    def direct(self) -> Float[np.ndarray, "item"]:
        """The most likely score; logits within :data:`SCORE_TIE` of the largest tie, and
        the lowest of the tied scores is the answer."""
        lg = np.asarray(self.logits, dtype=np.float64)
        near = lg >= lg.max(axis=1, keepdims=True) - SCORE_TIE
        values = np.asarray(self.score_values)
        best = np.where(near, values, np.inf).min(axis=1)
        return np.where(np.isnan(lg).any(axis=1), np.nan, best)  # no answer without logits

    @property
    def geval(self) -> Float[np.ndarray, "item"]:
        """The probability-weighted score, chained ties (:func:`chained_ties`) within each
        context."""
        raw = self.probs @ np.asarray(self.score_values)
        return chained_ties(raw, self.groups or ("__all__",) * len(raw))

    def as_dict(self, which: str) -> dict[str, float]:
        vals = {"direct": self.direct, "geval": self.geval}[which]
        return {k: float(v) for k, v in zip(self.item_ids, vals)}


def score_items(bridge, items: Mapping[Hashable, ScoredItem | str],
                meta: Dataset | Mapping[str, Any], template: ScoreTemplate | None = None, *,
                runner: ContextKV | None = None,
                settings: HarvestSettings = HarvestSettings()) -> ItemScores:
    """Direct and G-Eval scores of ``items``, a context's prefix shared across calls when a
    ``runner`` is given."""
    if runner is None:
        return score_item_sets(bridge, [(items, meta)], template, settings=settings)[0]
    template = template or ScoreTemplate()
    tok = bridge.tokenizer
    prompts = _prompts(tok, items, meta, template)
    prefixes, branches = _split(bridge, prompts)
    before = runner.n_tokens
    anchors = [context_anchor(tok, p.text, p.block) for p in prompts]
    with judge_bar(len(prompts), "scoring judge") as update:
        lg = runner.run(prefixes, branches, anchors, logit_ids=prompts[0].score_ids,
                        progress=update).logits[:, 0]
    return _scores(prompts, template, lg, runner.n_tokens - before)


def score_item_sets(bridge, sets: Sequence[tuple[Mapping[Hashable, ScoredItem | str],
                                                 Dataset | Mapping[str, Any]]],
                    template: ScoreTemplate | None = None, *,
                    settings: HarvestSettings = HarvestSettings()) -> list[ItemScores]:
    """Direct and G-Eval scores of several ``(items, meta)`` sets in one pass.

    A context's prompts share its prefix across the sets: a corpus's summaries rated on four
    aspects run each article and summary once; rated aspect by aspect, an article's three
    summaries are too few rows to share it at all (:data:`ppairs_lens.activations.
    prefix_sharing.MIN_GROUP_ROWS`). Each set's ``n_tokens`` is its rows' share of the pass's
    (a shared prefix belongs to no one set); they add up to the pass's.
    """
    template = template or ScoreTemplate()
    tok = bridge.tokenizer
    per_set = [_prompts(tok, items, meta, template) for items, meta in sets]
    prompts = [p for ps in per_set for p in ps]
    if not sets:             # nothing to rate (datasets without scored items): no pass
        return []
    prefixes, branches = _split(bridge, prompts)
    # grouped by context id, as the harvest's are: sets that share an id (a corpus's
    # aspects) share the context; ids that collide across corpora only share less, as the
    # plan is made from the token ids
    groups = [p.group for p in prompts]
    with judge_bar(len(prompts), "scoring judge") as update:
        lg = run_branches(bridge, prefixes, branches, groups, logit_ids=prompts[0].score_ids,
                          settings=settings, progress=update).logits[:, 0]
    n_tokens = tokens_computed(plan(prefixes, groups, share=settings.share_prefixes), 1)
    shares = [round(n_tokens * len(ps) / len(prompts)) for ps in per_set[:-1]]
    shares.append(n_tokens - sum(shares))    # the last set takes the rounding: they add up
    starts = list(itertools.accumulate((len(ps) for ps in per_set), initial=0))
    return [_scores(ps, template, lg[a:a + len(ps)], own)
            for ps, a, own in zip(per_set, starts, shares)]


def _prompts(tok, items: Mapping[Hashable, ScoredItem | str], meta, template: ScoreTemplate
             ) -> list[ScorePrompt]:
    prompts = [score_prompt(tok, meta, k, v, template) for k, v in items.items()]
    if not prompts:
        raise ValueError("no items to score")
    return prompts


def _split(bridge, prompts: Sequence[ScorePrompt]
           ) -> tuple[list[tuple[int, ...]], list[tuple[int]]]:
    """``(prefixes, branches)``: each prompt but its last token, and that token, checked."""
    if any(p.score_ids != prompts[0].score_ids for p in prompts):
        raise TemplateError("score tokens differ between prompts")
    prefixes = [p.prefix_ids[:-1] for p in prompts]
    check_context_length(bridge, [p.item_id for p in prompts], prefixes)
    return prefixes, [(p.prefix_ids[-1],) for p in prompts]


def _scores(prompts: Sequence[ScorePrompt], template: ScoreTemplate, lg: torch.Tensor,
            n_tokens: int) -> ItemScores:
    values = tuple(float(s) for s in template.scores)
    return ItemScores(tuple(p.item_id for p in prompts), values,
                      lg.to(torch.float64).numpy(), len(prompts), n_tokens,
                      tuple(p.group for p in prompts))
