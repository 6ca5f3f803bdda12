"""The judges on the held-out pairs a probe is scored on: prompted, and rating each item.

A probe and a judge are compared *paired*, on the same test pairs of the same split:
:func:`judge_held_out` rebuilds a store's split from its dataset and runs each prompted judge
form (:data:`JUDGE_FORMS`; the few-shot demonstrations from the training pairs only,
``few_shot_k=0``: skipped) on its test pairs, or on a seeded subset of whole test contexts. A
finished form is remembered in ``cache_dir`` under :func:`judge_cache_key` (what the model is
asked, never the code), so a cut run redoes no finished judge. Each report keeps
``p_by_pair`` (calibrated P(item 1) per pair id) for the layer sweep.

Direct scoring and G-Eval (:func:`score_held_out_sets`) rate each held-out item once; a
comparison's answer is the higher score (equal scores count half). Items are keyed
``context_id/item_id``, so a ranking can read the scores of every item of a context.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ppairs_lens.activations.pipeline import check_store_matches, store_template
from ppairs_lens.activations.prompts import ContrastPair, Template
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import TIE, Dataset, ScoredItem
from ppairs_lens.data.specs import subsample_by_context
from ppairs_lens.errors import DataError
from ppairs_lens.evaluation.result_table import JUDGE_KEYS
from ppairs_lens.evaluation.splits import BUILTIN_TEST_SIZE
from ppairs_lens.evaluation.store_split import split_records
from ppairs_lens.io.step_cache import StepCache
from ppairs_lens.judges.few_shot import evaluate_few_shot, few_shot_prompts, select_demos
from ppairs_lens.judges.scoring import score_item_sets
from ppairs_lens.judges.zero_shot import evaluate_zero_shot, judge_prompts

__all__ = ["JUDGE_CACHE_VERSION", "JUDGE_FORMS", "HeldOutJudgeRun", "HeldOutScores",
           "form_prompts", "held_out_datasets", "held_out_items", "held_out_judge_scores",
           "item_key", "judge_cache", "judge_cache_dir", "judge_cache_key", "judge_entry",
           "judge_every_pair", "judge_held_out", "prompts_digest", "score_held_out",
           "score_held_out_sets"]

#: The prompted judge forms a held-out run can ask for, in the order they run (cheapest first).
JUDGE_FORMS = ("zero_shot", "few_shot")


def held_out_datasets(store: ActivationStore, dataset: Dataset, *, test_size: float,
                      split_by: str, seed: int) -> tuple[Dataset, Dataset, str]:
    """``(train, test, split_used)``: ``dataset``'s records on each side of the store's split
    (ties dropped)."""
    return split_records(store.pairs(), dataset, test_size=test_size, split_by=split_by,
                         seed=seed)


def judge_cache_dir(store: ActivationStore) -> Path:
    """Where a store's finished judges are remembered: beside its activations."""
    return store.path / "judges"


#: Bumped by hand when what a remembered judge answer means changes (how its answer is
#: read or calibrated, what its report holds). The cache keys on what the model is asked,
#: never on the package's source, so an unrelated code change keeps finished judges.
JUDGE_CACHE_VERSION = 2  # 2: calibrated answers within TIE_LOGODDS of a tie are ties


def judge_cache(folder: str | Path) -> StepCache:
    """The step cache of finished judges (no code digest in its keys)."""
    return StepCache(folder, code_packages=())


def prompts_digest(prompts: Sequence[ContrastPair]) -> str:
    """A digest of exactly what a judge run asks the model: every prompt's token ids (so the
    template, demonstrations, records and tokenizer), choice tokens, pair id, label and group."""
    h = hashlib.sha256()
    for p in prompts:
        h.update(json.dumps([p.pair_id, list(p.prefix_ids), list(p.final_ids), p.label,
                             p.group]).encode() + b"\n")
    return h.hexdigest()


def judge_cache_key(cache: StepCache, form: str, *, model: str,
                    prompts: Sequence[ContrastPair], records: Dataset,
                    max_pairs: int | None, k: int, seed: int) -> str:
    """The key a finished judge form is remembered under: model, prompts, form, judged pair
    ids, settings and :data:`JUDGE_CACHE_VERSION`; not the code."""
    return cache.key(form, model=model, prompts=prompts_digest(prompts),
                     pair_ids=[r.pair_id for r in records.records], max_pairs=max_pairs,
                     k=k if form == "few_shot" else None, seed=seed,
                     version=JUDGE_CACHE_VERSION)


def form_prompts(tokenizer, form: str, train: Dataset, test: Dataset, template: Template, *,
                 max_pairs: int | None, k: int, seed: int) -> tuple[Dataset, list[ContrastPair]]:
    """``(records judged, prompts run)`` of one judge form on ``test``, so its cost can be
    planned before it runs."""
    part = subsample_by_context(test, max_pairs, seed)
    if form == "zero_shot":
        return part, judge_prompts(tokenizer, part, template)
    if form == "few_shot":
        demos = select_demos(train, part, k=k, seed=seed)
        return part, few_shot_prompts(tokenizer, part, demos, template)
    raise ValueError(f"unknown judge form {form!r}; known: {', '.join(JUDGE_FORMS)}")


@dataclass(frozen=True)
class HeldOutJudgeRun:
    """Each form's :func:`~ppairs_lens.judges.zero_shot.judge_report` (None where it did not
    run), why the few-shot judge was skipped, and the forms that came from the cache."""

    split_used: str
    n_test: int
    zero_shot: dict | None = None
    few_shot: dict | None = None
    few_shot_skipped: str | None = None
    reused: tuple[str, ...] = ()


def judge_held_out(bridge, store: ActivationStore, dataset: Dataset, *,
                   test_size: float = BUILTIN_TEST_SIZE,
                   split_by: str = "auto", seed: int = 0, few_shot_k: int = 4,
                   forms: tuple[str, ...] = JUDGE_FORMS,
                   max_pairs: Mapping[str, int | None] | None = None,
                   cache_dir: str | Path | None = None,
                   on_done: Callable[[str, HeldOutJudgeRun], None] | None = None
                   ) -> HeldOutJudgeRun:
    """The judges on the held-out pairs of ``store``. ``forms``: which of :data:`JUDGE_FORMS`
    run (the others are None); ``max_pairs``: per form, the size of a seeded subset of whole
    test contexts; ``on_done(form, result so far)``: as each form finishes."""
    unknown = [f for f in forms if f not in JUDGE_FORMS]
    if unknown:
        raise ValueError(f"unknown judge form(s) {unknown}; known: {', '.join(JUDGE_FORMS)}")
    check_store_matches(bridge, store, dataset)
    template = store_template(store)
    train, test, used = held_out_datasets(store, dataset, test_size=test_size,
                                          split_by=split_by, seed=seed)
    cache = None if cache_dir is None else judge_cache(cache_dir)
    out = HeldOutJudgeRun(used, len(test))
    for form in forms:
        if form == "few_shot" and not few_shot_k:
            continue
        kw = {"max_pairs": (max_pairs or {}).get(form), "k": few_shot_k, "seed": seed}
        try:
            report, reused = _cached_form(bridge, store, form, form, train, test, template,
                                          cache, kw)
        except DataError as e:  # too few training records share nothing with the test side
            if form != "few_shot":
                raise
            out = replace(out, few_shot_skipped=str(e))
            warnings.warn(f"{dataset.name}: few-shot judge skipped: {e}")
            continue
        out = replace(out, **{form: report}, reused=out.reused + ((form,) if reused else ()))
        if on_done is not None:
            on_done(form, out)
    return out


def _cached_form(bridge, store: ActivationStore, name: str, form: str, train: Dataset,
                 test: Dataset, template: Template, cache: StepCache | None, kw: dict
                 ) -> tuple[dict, bool]:
    """``(report, reused)`` of one judge form on ``test``, remembered in ``cache`` (its prompts
    built first: a few-shot judge without usable demonstrations raises before any model call)."""
    def run() -> dict:
        part = subsample_by_context(test, kw["max_pairs"], kw["seed"])
        if form == "zero_shot":
            report = evaluate_zero_shot(bridge, part, template)
        else:
            report = evaluate_few_shot(bridge, part, train, template, k=kw["k"], seed=kw["seed"])
        return {k: v for k, v in report.items() if k != "proba"}  # no numpy array: JSON
    if cache is None:
        return run(), False
    part, prompts = form_prompts(bridge.tokenizer, form, train, test, template, **kw)
    key = judge_cache_key(cache, form, model=store.meta.model, prompts=prompts, records=part,
                          **kw)
    return cache.run(name, key, run)


def judge_every_pair(bridge, store: ActivationStore, dataset: Dataset, *,
                     forms: Sequence[str] = ("zero_shot",), train: Dataset | None = None,
                     max_pairs: Mapping[str, int | None] | None = None, k: int = 4,
                     seed: int = 0, cache_dir: str | Path | None = None) -> dict:
    """``{form: report}`` on every untied pair of ``store`` (a shifted set, in the store's
    order), the few-shot demonstrations drawn from ``train``; otherwise as
    :func:`judge_held_out` (remembered as ``<form>_every_pair``). A few-shot judge without
    usable demonstrations is left out with a warning."""
    check_store_matches(bridge, store, dataset)
    template = store_template(store)
    by_id = {r.pair_id: r for r in dataset.records}
    test = replace(dataset, records=[by_id[p.pair_id] for p in store.pairs()
                                     if p.label != TIE])
    cache = None if cache_dir is None else judge_cache(cache_dir)
    out = {}
    for form in forms:
        if form == "few_shot" and train is None:
            raise ValueError("the few-shot judge of a shifted set needs its demonstrations' "
                             "records (train)")
        kw = {"max_pairs": (max_pairs or {}).get(form), "k": k, "seed": seed}
        try:
            out[form] = _cached_form(bridge, store, f"{form}_every_pair", form,
                                     train if train is not None else test, test, template,
                                     cache, kw)[0]
        except DataError as e:
            if form != "few_shot":
                raise
            warnings.warn(f"{dataset.name}: few-shot judge skipped: {e}")
    return out


def judge_entry(result: HeldOutJudgeRun) -> dict:
    """One dataset's :func:`judge_held_out` result as a study keeps it: the zero-shot report,
    ``split_used``, and where the few-shot judge ran ``few_shot_p_by_pair`` /
    ``few_shot_metrics`` / ``few_shot_diagnostics`` / ``few_shot`` (its demonstrations)."""
    entry = {**(result.zero_shot or {}), "split_used": result.split_used}
    fs = result.few_shot
    if fs is not None:
        entry.update(few_shot_p_by_pair=fs["p_by_pair"], few_shot_metrics=fs["metrics"],
                     few_shot_diagnostics=fs["diagnostics"], few_shot=fs["few_shot"])
    return entry


def held_out_judge_scores(bridge, store: ActivationStore, dataset: Dataset, *, split: Mapping,
                          forms: tuple[str, ...] = JUDGE_FORMS,
                          max_pairs: Mapping[str, int | None] | None = None
                          ) -> dict[str, dict[str, float]]:
    """:func:`judge_held_out` (remembered beside the store, so a sweep's finished judges are
    reused) as ``{key: {pair_id: P(item 1)}}`` under
    :data:`~ppairs_lens.evaluation.result_table.JUDGE_KEYS`' keys."""
    if not forms:
        return {}
    res = judge_held_out(bridge, store, dataset, **dict(split), forms=forms,
                         max_pairs=max_pairs, cache_dir=judge_cache_dir(store))
    keys = set(JUDGE_KEYS.values())
    return {k: v for k, v in judge_entry(res).items() if k in keys}


def item_key(context_id: str | None, item_id: str | None) -> str:
    return f"{context_id}/{item_id}"


def held_out_items(test: Dataset) -> dict[str, ScoredItem]:
    """The items of ``test``'s comparisons (each once), with their gold scores."""
    out: dict[str, ScoredItem] = {}
    for r in test.records:
        for iid, text, score in ((r.item1_id, r.item1, r.score1), (r.item2_id, r.item2, r.score2)):
            k = item_key(r.context_id, iid)
            out[k] = ScoredItem(k, text, score, r.context_id, r.context)
    return out


@dataclass(frozen=True)
class HeldOutScores:
    """Per item its direct and G-Eval score; per comparison P(item 1) from each."""

    direct_scores: dict[str, float]
    geval_scores: dict[str, float]
    direct_p: dict[str, float]
    geval_p: dict[str, float]
    n_prompts: int

    def p_by_pair(self) -> dict[str, dict[str, float]]:
        """Under the keys the layer sweep reads (:data:`analyses.layer_sweep.JUDGES`)."""
        return {"direct_p_by_pair": self.direct_p, "geval_p_by_pair": self.geval_p}


def _pairwise(test: Dataset, scores: dict[str, float]) -> dict[str, float]:
    return {r.pair_id: float(0.5 + 0.5 * np.sign(scores[item_key(r.context_id, r.item1_id)]
                                                 - scores[item_key(r.context_id, r.item2_id)]))
            for r in test.records}


def score_held_out(bridge, test: Dataset,
                   settings: HarvestSettings = HarvestSettings(batch_contexts=True)
                   ) -> HeldOutScores:
    """Rate every held-out item once; both forms of answer for every comparison.
    ``settings``: how the prompts are batched (never the numbers, beyond float rounding)."""
    return score_held_out_sets(bridge, {"test": test}, settings)["test"]


def score_held_out_sets(bridge, tests: Mapping[str, Dataset],
                        settings: HarvestSettings = HarvestSettings(batch_contexts=True)
                        ) -> dict[str, HeldOutScores]:
    """:func:`score_held_out` of several held-out sets in one pass (a corpus's aspects rate
    the same summaries, so each article and summary runs once for all of them)."""
    items = {n: held_out_items(t) for n, t in tests.items()}
    scored = score_item_sets(bridge, [(items[n], t) for n, t in tests.items()],
                             settings=settings)
    out = {}
    for (n, test), s in zip(tests.items(), scored):
        direct, geval = s.as_dict("direct"), s.as_dict("geval")
        out[n] = HeldOutScores(direct, geval, _pairwise(test, direct), _pairwise(test, geval),
                               len(items[n]))
    return out
