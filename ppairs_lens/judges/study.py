"""Every dataset's prompted judges on its store's split, in one pass of the model.

A study asks the zero-shot judge about the held-out comparisons of many datasets, each in both
item orders, and about a sample of training comparisons (to fit the judge's decision threshold
on the labels the supervised probe sees). :func:`judge_study` builds all those prompts and
runs them in ONE call, so a context shared by several prompts (an article asked about four
aspects, in both orders) is computed once. The items' own order is the harvest's prompt, whose
answer the store keeps (read in the harvest's passes): those are taken from the store, so
about half the prompts need not run. The ALLURE judge (:mod:`ppairs_lens.judges.allure`)
starts from the training sample's zero-shot answers.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from ppairs_lens.activations.pipeline import check_store_matches, store_template
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import ITEM1, Dataset
from ppairs_lens.data.specs import subsample_by_context
from ppairs_lens.evaluation.protocol import PAPER_TEST_SIZE, EvalSettings
from ppairs_lens.judges.allure import AllureConfig, allure
from ppairs_lens.judges.calibration import judge_diagnostics
from ppairs_lens.judges.fair_forms import JudgeForms, judge_forms
from ppairs_lens.judges.held_out import held_out_datasets
from ppairs_lens.models.backend import model_dtype
from ppairs_lens.judges.zero_shot import ZeroShotResult, sides_logodds, swapped_dataset

__all__ = ["HeldOutJudges", "JudgeStudySettings", "harvested_logodds", "judge_study",
           "study_prompts"]


@dataclass(frozen=True)
class JudgeStudySettings:
    # the study's one protocol (its split is every store's split; the paper's halves)
    protocol: EvalSettings = EvalSettings(test_size=PAPER_TEST_SIZE)
    train_pairs: int = 24  # training comparisons (whole contexts) that fit the threshold
    allure: AllureConfig | None = AllureConfig()


@dataclass(frozen=True)
class HeldOutJudges:
    """One dataset's prompted judges on its held-out comparisons (ties dropped)."""

    dataset: str
    split_used: str
    test_ids: tuple[str, ...]
    forms: JudgeForms
    diagnostics: dict
    allure_ids: tuple[str, ...] = ()
    allure_p: np.ndarray | None = None
    allure_demos: tuple[str, ...] = ()
    allure_skipped: str | None = None
    n_prompts: dict = field(default_factory=dict)

    def zero_shot_p(self) -> dict[str, float]:
        """The zero-shot judge's P(item 1) per held-out pair id (the paper's form)."""
        return dict(zip(self.test_ids, map(float, self.forms.paper)))

    def zero_shot_z(self) -> dict[str, float]:
        """The zero-shot judge's swap-calibrated log-odds per held-out pair id,
        ``(ld_original - ld_swapped) / 2``: what :func:`ppairs_lens.judges.zero_shot.zero_shot`
        reads as ``z`` (its ``p`` is ``sigmoid(z)``), so the finetuning step reuses it."""
        return dict(zip(self.test_ids, map(float, self.forms.z)))

    def p_by_pair(self) -> dict[str, dict[str, float]]:
        """Per-pair P(item 1) under the keys the layer sweep reads
        (:data:`analyses.layer_sweep.JUDGES`)."""
        out = {"p_by_pair": self.zero_shot_p(),
               "threshold_p_by_pair": dict(zip(self.test_ids, map(float, self.forms.threshold)))}
        if self.allure_p is not None:
            out["allure_p_by_pair"] = dict(zip(self.allure_ids, map(float, self.allure_p)))
        return out

    def record(self) -> dict:
        """What a summary keeps (no per-pair arrays)."""
        return {"dataset": self.dataset, "split_used": self.split_used,
                "n_test": len(self.test_ids), "threshold": self.forms.t,
                "threshold_fitted_on": self.forms.n_train, "diagnostics": self.diagnostics,
                "allure_n": len(self.allure_ids), "allure_demos": list(self.allure_demos),
                "allure_skipped": self.allure_skipped, "n_prompts": self.n_prompts}


def _training_sample(train: Dataset, settings: JudgeStudySettings) -> Dataset:
    """The training comparisons whose answers fit the judge's threshold."""
    return subsample_by_context(train, settings.train_pairs, settings.protocol.seed)


def study_prompts(tokenizer, dataset: Dataset, template,
                  settings: JudgeStudySettings = JudgeStudySettings()) -> list:
    """The zero-shot prompts :func:`judge_study` runs for ``dataset`` where its store kept
    the harvest's answers (the swapped orders of the held-out pairs and of the training
    sample), known before the harvest: the split made from the records' own pair
    information, as the store's. For a run's plan (ALLURE's few-shot prompts are not in it:
    its demonstrations are chosen from these answers)."""
    from ppairs_lens.activations.pair_info import pair_info
    from ppairs_lens.activations.prompts import build_contrast_pairs
    from ppairs_lens.evaluation.store_split import split_records

    train, test, _ = split_records(pair_info(dataset), dataset,
                                   **settings.protocol.split_kwargs())
    return [p for part in (test, _training_sample(train, settings))
            for p in build_contrast_pairs(tokenizer, swapped_dataset(part), template)]


def judge_study(bridge, stores: Sequence[ActivationStore], datasets: Sequence[Dataset],
                settings: JudgeStudySettings = JudgeStudySettings(), log=print
                ) -> dict[str, HeldOutJudges]:
    """``{dataset name: HeldOutJudges}`` for every store (comparisons in both orders).

    A prompt in the items' own order is the store's harvest prompt up to its last token, so
    its answer is taken from the store where the harvest kept it
    (:meth:`ActivationStore.judge_logodds`; same model and dtype, records and template, as checked
    here): only the swapped orders run, plus any prompt whose stored answer is missing.
    ``n_prompts`` says how many answers ran and how many came from the harvest."""
    parts, sides = [], []
    for store, ds in zip(stores, datasets):
        check_store_matches(bridge, store, ds)
        template = store_template(store)
        seed = settings.protocol.seed
        train, test, used = held_out_datasets(store, ds, **settings.protocol.split_kwargs())
        train_sub = _training_sample(train, settings)
        stored = harvested_logodds(store, bridge)
        # the items' own order is the harvest's prompt: its answer may be stored
        sides += [(test, template, stored), (swapped_dataset(test), template, None),
                  (train_sub, template, stored), (swapped_dataset(train_sub), template, None)]
        parts.append((store.meta.dataset, template, train, train_sub, test, used))
    answers, runs = sides_logodds(bridge, sides,
                                  desc="zero-shot judge, every dataset, both orders")
    out = {}
    for k, (name, template, train, train_sub, test, used) in enumerate(parts):
        ld_o, ld_s, tr_o, tr_s = answers[4 * k:4 * k + 4]
        n_run = sum(runs[4 * k:4 * k + 4])
        y_tr = np.array([y == ITEM1 for y in train_sub.labels()])
        forms = judge_forms(ld_o, ld_s, (tr_o - tr_s) / 2, y_tr)
        diag = judge_diagnostics(ZeroShotResult.from_logodds(ld_o, ld_s, 2 * len(test)),
                                 test.labels())
        extra: dict = {}
        if settings.allure is not None:
            evaluated = subsample_by_context(test, settings.allure.test_pairs, seed)
            pool = subsample_by_context(train_sub, settings.allure.pool, seed)
            z_of = dict(zip((r.pair_id for r in train_sub.records), (tr_o - tr_s) / 2))
            try:
                res, demos = allure(bridge, pool, np.array([z_of[r.pair_id]
                                                            for r in pool.records]),
                                    evaluated, template, settings.allure)
                extra = dict(allure_ids=tuple(r.pair_id for r in evaluated.records),
                             allure_p=res.p,
                             allure_demos=tuple(d.record.pair_id for d in demos))
            except ValueError as e:  # e.g. a context too long for the model with demos
                extra = dict(allure_skipped=str(e))
                log(f"{name}: ALLURE judge skipped: {e}")
        n_all = 2 * (len(test) + len(train_sub))
        out[name] = HeldOutJudges(
            name, used, tuple(r.pair_id for r in test.records), forms, diag,
            n_prompts={"zero_shot": n_all, "zero_shot_run": n_run,
                       "zero_shot_from_harvest": n_all - n_run}, **extra)
    return out


def harvested_logodds(store: ActivationStore, bridge) -> dict[str, float]:
    """``{pair id: the judge's log-odds}`` the store's harvest read on each pair's own prompt
    (finite ones only), where that harvest ran the model in the dtype ``bridge`` runs in (the
    swapped order, run now, is combined with them); else empty, and every prompt runs."""
    if store.meta.model_dtype != model_dtype(bridge):
        return {}
    ld = store.judge_logodds()
    if ld is None:
        return {}
    return {p.pair_id: float(v) for p, v in zip(store.pairs(), ld) if np.isfinite(v)}
