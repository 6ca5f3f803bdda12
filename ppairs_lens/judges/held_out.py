"""The prompted judges on the held-out pairs a probe is scored on: zero-shot and few-shot.

A probe and a prompted judge are compared *paired*: on the same test pairs of the same split.
:func:`judge_held_out` takes a store and the dataset it was harvested from, rebuilds the
store's split (ties dropped, the same ``split_by`` / ``seed`` / ``test_size`` as
:func:`ppairs_lens.evaluation.store_split.split_store`), and runs on *all* its test pairs

* the calibrated zero-shot judge (:func:`ppairs_lens.judges.zero_shot.evaluate_zero_shot`);
* the few-shot judge (:func:`ppairs_lens.judges.few_shot.evaluate_few_shot`), whose
  demonstrations come from the training pairs only (``few_shot_k=0``: skipped).

Each report keeps ``p_by_pair`` (calibrated P(item 1) per pair id), which the layer sweep
pairs with the probe's answers.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np

from ppairs_lens.activations.pipeline import check_store_matches, store_template
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import Dataset
from ppairs_lens.data.specs import subsample_by_context
from ppairs_lens.errors import DataError
from ppairs_lens.evaluation.store_split import untied_split
from ppairs_lens.judges.few_shot import evaluate_few_shot
from ppairs_lens.judges.zero_shot import evaluate_zero_shot

__all__ = ["held_out_datasets", "judge_entry", "judge_held_out"]


def held_out_datasets(store: ActivationStore, dataset: Dataset, *, test_size: float,
                      split_by: str, seed: int) -> tuple[Dataset, Dataset, str]:
    """``(train, test, split_used)``: ``dataset``'s records on each side of the store's split
    (ties dropped, as every analysis drops them)."""
    pairs, _, train, test, used = untied_split(store.pairs(), test_size=test_size,
                                               split_by=split_by, seed=seed)
    by_id = {r.pair_id: r for r in dataset.records}
    missing = [p.pair_id for p in pairs if p.pair_id not in by_id]
    if missing:
        raise DataError(f"{dataset.name}: {len(missing)} store pairs are not in the dataset "
                        f"(e.g. {missing[0]!r}); was the store harvested from it?")

    def side(idx: np.ndarray, name: str) -> Dataset:
        return replace(dataset, name=f"{dataset.name}:{name}",
                       records=[by_id[pairs[i].pair_id] for i in idx])

    return side(train, "train"), side(test, "test"), used


def _slim(report: dict) -> dict:
    """A judge report without its numpy array (the rest is JSON)."""
    return {k: v for k, v in report.items() if k != "proba"}


def judge_held_out(bridge, store: ActivationStore, dataset: Dataset, *, test_size: float = 0.3,
                   split_by: str = "auto", seed: int = 0, few_shot_k: int = 4,
                   few_shot_max_pairs: int | None = None) -> dict:
    """``{"zero_shot": report, "few_shot": report | None, "few_shot_skipped": reason | None,
    "split_used", "n_test"}`` on every
    held-out pair of ``store`` (reports as :func:`ppairs_lens.judges.zero_shot.judge_report`,
    with ``p_by_pair``). ``few_shot_max_pairs``: the few-shot judge (longer prompts) runs on a
    seeded subset of whole contexts of the test pairs; it is paired with the probe on those."""
    check_store_matches(bridge, store, dataset)
    template = store_template(store)
    train, test, used = held_out_datasets(store, dataset, test_size=test_size,
                                          split_by=split_by, seed=seed)
    out = {"split_used": used, "n_test": len(test),
           "zero_shot": _slim(evaluate_zero_shot(bridge, test, template)), "few_shot": None,
           "few_shot_skipped": None}
    if few_shot_k:
        try:
            part = subsample_by_context(test, few_shot_max_pairs, seed)
            out["few_shot"] = _slim(evaluate_few_shot(bridge, part, train, template,
                                                      k=few_shot_k, seed=seed))
        except DataError as e:  # too few training records share nothing with the test side
            out["few_shot_skipped"] = str(e)
            warnings.warn(f"{dataset.name}: few-shot judge skipped: {e}")
    return out


def judge_entry(result: dict) -> dict:
    """One dataset's :func:`judge_held_out` result as a study keeps it (the layer sweep's
    ``analyses.layer_sweep.pair_scores`` picks its per-pair probabilities): the zero-shot
    report, ``split_used``, and the few-shot judge's ``few_shot_p_by_pair`` /
    ``few_shot_metrics`` / ``few_shot_diagnostics`` / ``few_shot`` (its demonstrations) where
    it ran."""
    entry = {**result["zero_shot"], "split_used": result["split_used"]}
    fs = result.get("few_shot")
    if fs is not None:
        entry.update(few_shot_p_by_pair=fs["p_by_pair"], few_shot_metrics=fs["metrics"],
                     few_shot_diagnostics=fs["diagnostics"], few_shot=fs["few_shot"])
    return entry
