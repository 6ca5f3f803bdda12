"""The prompted judges on the held-out pairs a probe is scored on: zero-shot and few-shot.

A probe and a prompted judge are compared *paired*: on the same test pairs of the same split.
:func:`judge_held_out` takes a store and the dataset it was harvested from, rebuilds the
store's split (ties dropped, the same ``split_by`` / ``seed`` / ``test_size`` as
:func:`ppairs_lens.evaluation.store_split.split_store`), and runs on its test pairs each judge
form asked for (:data:`JUDGE_FORMS`)

* ``zero_shot``: the calibrated zero-shot judge
  (:func:`ppairs_lens.judges.zero_shot.evaluate_zero_shot`);
* ``few_shot``: the few-shot judge (:func:`ppairs_lens.judges.few_shot.evaluate_few_shot`),
  whose demonstrations come from the training pairs only (``few_shot_k=0``: skipped).

Each form may be limited to a seeded subset of whole test contexts (``max_pairs``), and each
finished form is remembered in ``cache_dir`` (a :class:`~ppairs_lens.io.step_cache.StepCache`
keyed by the store's fingerprint, which covers the model, template and records, the split, the
limit and the code), so a cut run redoes no finished judge. Each report keeps ``p_by_pair``
(calibrated P(item 1) per pair id), which the layer sweep pairs with the probe's answers.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path

from ppairs_lens.activations.pipeline import check_store_matches, store_template
from ppairs_lens.activations.prompts import ContrastPair, Template
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import TIE, Dataset
from ppairs_lens.data.specs import subsample_by_context
from ppairs_lens.errors import DataError
from ppairs_lens.evaluation.result_table import JUDGE_KEYS
from ppairs_lens.evaluation.store_split import split_records
from ppairs_lens.io.step_cache import StepCache
from ppairs_lens.judges.few_shot import evaluate_few_shot, few_shot_prompts, select_demos
from ppairs_lens.judges.zero_shot import evaluate_zero_shot, judge_prompts

__all__ = ["JUDGE_CODE", "JUDGE_FORMS", "form_prompts", "held_out_datasets", "judge_cache",
           "judge_cache_dir", "judge_cache_key", "judge_every_pair",
           "judge_entry", "judge_held_out", "held_out_judge_scores"]

#: The prompted judge forms a held-out run can ask for, in the order they run (cheapest first).
JUDGE_FORMS = ("zero_shot", "few_shot")


def held_out_datasets(store: ActivationStore, dataset: Dataset, *, test_size: float,
                      split_by: str, seed: int) -> tuple[Dataset, Dataset, str]:
    """``(train, test, split_used)``: ``dataset``'s records on each side of the store's split
    (ties dropped, as every analysis drops them)."""
    return split_records(store.pairs(), dataset, test_size=test_size, split_by=split_by,
                         seed=seed)


def judge_cache_dir(store: ActivationStore) -> Path:
    """Where a store's finished judges are remembered: beside its activations."""
    return store.path / "judges"


#: The code a judge's answers depend on (a change there recomputes a remembered judge; the
#: records, template and model are in the store's fingerprint).
JUDGE_CODE = ("ppairs_lens.judges", "ppairs_lens.activations", "ppairs_lens.models",
              "ppairs_lens.evaluation")


def judge_cache(folder: str | Path) -> StepCache:
    """The step cache finished judges are remembered in (:func:`judge_cache_dir`)."""
    return StepCache(folder, code_packages=JUDGE_CODE)


def judge_cache_key(cache: StepCache, form: str, store_fingerprint: str, split: Mapping, *,
                    max_pairs: int | None, k: int, seed: int) -> str:
    """The key a finished judge form is remembered under: the store (model, template,
    records), the split, the form's limit, its demonstrations' number and seed, the code."""
    return cache.key(form, store=store_fingerprint, split=dict(split), max_pairs=max_pairs,
                     k=k if form == "few_shot" else None, seed=seed)


def _slim(report: dict) -> dict:
    """A judge report without its numpy array (the rest is JSON)."""
    return {k: v for k, v in report.items() if k != "proba"}


def form_prompts(tokenizer, form: str, train: Dataset, test: Dataset, template: Template, *,
                 max_pairs: int | None, k: int, seed: int) -> tuple[Dataset, list[ContrastPair]]:
    """``(records judged, prompts run)`` of one judge form on the held-out side ``test``: the
    seeded subset of whole contexts it is limited to, and exactly the prompts its run builds
    (both orders), so its cost can be planned before it runs."""
    part = subsample_by_context(test, max_pairs, seed)
    if form == "zero_shot":
        return part, judge_prompts(tokenizer, part, template)
    if form == "few_shot":
        demos = select_demos(train, part, k=k, seed=seed)
        return part, few_shot_prompts(tokenizer, part, demos, template)
    raise ValueError(f"unknown judge form {form!r}; known: {', '.join(JUDGE_FORMS)}")


def _run_form(bridge, form: str, train: Dataset, test: Dataset, template: Template, *,
              max_pairs: int | None, k: int, seed: int) -> dict:
    part = subsample_by_context(test, max_pairs, seed)
    if form == "zero_shot":
        return _slim(evaluate_zero_shot(bridge, part, template))
    return _slim(evaluate_few_shot(bridge, part, train, template, k=k, seed=seed))


def judge_held_out(bridge, store: ActivationStore, dataset: Dataset, *, test_size: float = 0.3,
                   split_by: str = "auto", seed: int = 0, few_shot_k: int = 4,
                   few_shot_max_pairs: int | None = None,
                   forms: tuple[str, ...] = JUDGE_FORMS,
                   max_pairs: Mapping[str, int | None] | None = None,
                   cache_dir: str | Path | None = None,
                   on_done: Callable[[str, dict], None] | None = None) -> dict:
    """``{"zero_shot": report | None, "few_shot": report | None, "few_shot_skipped": reason |
    None, "split_used", "n_test", "reused": [forms taken from the cache]}`` on the held-out
    pairs of ``store`` (reports as :func:`ppairs_lens.judges.zero_shot.judge_report`, with
    ``p_by_pair``). ``forms``: which of :data:`JUDGE_FORMS` run (the others are None);
    ``max_pairs``: per form, a seeded subset of whole contexts of the test pairs (the judge is
    paired with the probe on those; ``few_shot_max_pairs`` is the few-shot entry's older
    name). ``cache_dir``: finished forms remembered there and reused. ``on_done(form, result)``
    is called as each form finishes with the result so far, so a caller can write it at once."""
    unknown = [f for f in forms if f not in JUDGE_FORMS]
    if unknown:
        raise ValueError(f"unknown judge form(s) {unknown}; known: {', '.join(JUDGE_FORMS)}")
    check_store_matches(bridge, store, dataset)
    template = store_template(store)
    split = {"test_size": test_size, "split_by": split_by, "seed": seed}
    train, test, used = held_out_datasets(store, dataset, **split)
    limits = {"few_shot": few_shot_max_pairs, **(max_pairs or {})}
    cache = None if cache_dir is None else judge_cache(cache_dir)
    out = {"split_used": used, "n_test": len(test), "zero_shot": None, "few_shot": None,
           "few_shot_skipped": None, "reused": []}
    fingerprint = None if cache is None else store.fingerprint()
    for form in forms:
        if form == "few_shot" and not few_shot_k:
            continue
        kw = {"max_pairs": limits.get(form), "k": few_shot_k, "seed": seed}

        def run(form=form, kw=kw) -> dict:
            return _run_form(bridge, form, train, test, template, **kw)
        try:
            if cache is None:
                report, reused = run(), False
            else:
                report, reused = cache.run(form, judge_cache_key(
                    cache, form, fingerprint, split, **kw), run)
        except DataError as e:  # too few training records share nothing with the test side
            if form != "few_shot":
                raise
            out["few_shot_skipped"] = str(e)
            warnings.warn(f"{dataset.name}: few-shot judge skipped: {e}")
            continue
        out[form] = report
        if reused:
            out["reused"].append(form)
        if on_done is not None:
            on_done(form, out)
    return out


def judge_every_pair(bridge, store: ActivationStore, dataset: Dataset, *,
                     cache_dir: str | Path | None = None) -> dict:
    """The zero-shot judge's report on every untied pair of ``store`` (a shifted set, scored
    whole), in the store's order; remembered in ``cache_dir`` as :func:`judge_held_out`'s."""
    check_store_matches(bridge, store, dataset)
    template = store_template(store)
    by_id = {r.pair_id: r for r in dataset.records}
    records = [by_id[p.pair_id] for p in store.pairs() if p.label != TIE]

    def run() -> dict:
        return _slim(evaluate_zero_shot(bridge, replace(dataset, records=records), template))
    if cache_dir is None:
        return run()
    cache = judge_cache(cache_dir)
    name = "zero_shot_every_pair"
    return cache.run(name, cache.key(name, store=store.fingerprint()), run)[0]


def judge_entry(result: dict) -> dict:
    """One dataset's :func:`judge_held_out` result as a study keeps it (the layer sweep's
    ``analyses.layer_sweep.pair_scores`` picks its per-pair probabilities): the zero-shot
    report (where it ran), ``split_used``, and the few-shot judge's ``few_shot_p_by_pair`` /
    ``few_shot_metrics`` / ``few_shot_diagnostics`` / ``few_shot`` (its demonstrations) where
    it ran."""
    entry = {**(result.get("zero_shot") or {}), "split_used": result["split_used"]}
    fs = result.get("few_shot")
    if fs is not None:
        entry.update(few_shot_p_by_pair=fs["p_by_pair"], few_shot_metrics=fs["metrics"],
                     few_shot_diagnostics=fs["diagnostics"], few_shot=fs["few_shot"])
    return entry


def held_out_judge_scores(bridge, store: ActivationStore, dataset: Dataset, *, split: Mapping,
                          forms: tuple[str, ...] = JUDGE_FORMS,
                          max_pairs: Mapping[str, int | None] | None = None
                          ) -> dict[str, dict[str, float]]:
    """The judge forms of :func:`judge_held_out` on ``store``'s held-out pairs (remembered
    beside the store, :func:`judge_cache_dir`, so a sweep's finished judges are reused), as
    the per-pair probabilities a command scores beside its probes: ``{key: {pair_id: P(item
    1)}}`` under :data:`~ppairs_lens.evaluation.result_table.JUDGE_KEYS`' keys."""
    if not forms:
        return {}
    res = judge_held_out(bridge, store, dataset, **dict(split), forms=forms,
                         max_pairs=max_pairs, cache_dir=judge_cache_dir(store))
    keys = set(JUDGE_KEYS.values())
    return {k: v for k, v in judge_entry(res).items() if k in keys}
