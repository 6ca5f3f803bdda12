"""Every dataset's prompted judges on its store's split, in one pass of the model.

A study asks the zero-shot judge about the held-out comparisons of many datasets, each in both
item orders, and about a sample of training comparisons (to fit the judge's decision threshold
on the labels the supervised probe sees). :func:`judge_study` builds all those prompts and
runs them in ONE call, so a context shared by several prompts (an article asked about four
aspects, in both orders) is computed once. The items' own order is the harvest's prompt, whose
answer the store keeps (read in the harvest's passes): those are taken from the store, so
about half the prompts need not run.

The ALLURE judge (Hasanbeig et al., 2023, :func:`allure`) audits the judge in a closed loop,
starting from the training sample's zero-shot answers: add the training comparisons it gets
most wrong (with their labels) as demonstrations, score again, repeat for a few rounds; then
ask the held-out comparisons after them, in both item orders, read as the few-shot judge is
(:mod:`ppairs_lens.judges.few_shot`). Demonstrations come from the training split only.

A small model's judge can give the same raw answer in both item orders, its calibrated log-odds
then deciding only through a small leftover; so it is reported in each fair form
(:func:`judge_forms`), from the same two passes per comparison, and a probe is compared with
its best: ``paper``, P(item 1) marginalised over the two positions as the paper reports it,
``(P_AB(choice 1) + P_BA(choice 2)) / 2``; ``threshold``, the calibrated log-odds ``z``
against a decision threshold fitted on the training sample's labels (the labels a supervised
probe sees); and AUROC of ``z``, which no threshold changes (scored beside the accuracy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from jaxtyping import Float

from ppairs_lens.activations.pipeline import check_store_matches, store_template
from ppairs_lens.activations.prompts import Template
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import ITEM1, TIE, Dataset
from ppairs_lens.data.specs import subsample_by_context
from ppairs_lens.evaluation.protocol import PAPER_TEST_SIZE, EvalSettings
from ppairs_lens.judges.calibration import judge_diagnostics, sigmoid, swap_calibrated_logodds
from ppairs_lens.judges.few_shot import Demo, few_shot
from ppairs_lens.judges.held_out import held_out_datasets
from ppairs_lens.models.backend import model_dtype
from ppairs_lens.judges.zero_shot import ZeroShotResult, sides_logodds, swapped_dataset

__all__ = ["AllureConfig", "HeldOutJudges", "JudgeForms", "JudgeStudySettings", "allure",
           "fit_threshold", "harvested_logodds", "judge_forms", "judge_study", "most_wrong",
           "paper_probability", "study_prompts"]


def paper_probability(ld_original: Float[np.ndarray, " n"], ld_swapped: Float[np.ndarray, " n"]
                      ) -> Float[np.ndarray, " n"]:
    """P(item 1) marginalised over the two positions (the paper's calibrated comparison); its
    side of 0.5 is the sign of ``ld_original - ld_swapped``, so a calibrated tie
    (:data:`~ppairs_lens.judges.calibration.TIE_LOGODDS`) is exactly 0.5 here too."""
    p = (sigmoid(np.asarray(ld_original)) + sigmoid(-np.asarray(ld_swapped))) / 2
    return np.where(swap_calibrated_logodds(ld_original, ld_swapped) == 0, 0.5, p)


def fit_threshold(z_train: Float[np.ndarray, " n"], item1_better: Float[np.ndarray, " n"]
                  ) -> float:
    """The threshold ``t`` for "item 1 when z > t" with the best training accuracy (the middle
    of the best interval between sorted training scores; 0 without training scores)."""
    z = np.asarray(z_train, dtype=np.float64)
    y = np.asarray(item1_better, dtype=bool)
    if not len(z):
        return 0.0
    s = np.unique(z)
    cuts = np.concatenate([[s[0] - 1.0], (s[:-1] + s[1:]) / 2, [s[-1] + 1.0]])
    acc = np.array([np.mean((z > t) == y) for t in cuts])
    best = np.flatnonzero(acc == acc.max())
    return float(cuts[best[len(best) // 2]])


@dataclass(frozen=True)
class JudgeForms:
    """P(item 1) per evaluated comparison in each form, and the fitted threshold."""

    paper: Float[np.ndarray, " n"]
    threshold: Float[np.ndarray, " n"]
    z: Float[np.ndarray, " n"]
    t: float
    n_train: int


def judge_forms(ld_original: Float[np.ndarray, " n"], ld_swapped: Float[np.ndarray, " n"],
                z_train: Float[np.ndarray, " m"], item1_better_train: Float[np.ndarray, " m"]
                ) -> JudgeForms:
    """The forms of one judge on the evaluated comparisons (log-odds of both orders), its
    threshold fitted on training comparisons' calibrated log-odds and labels."""
    ld_o, ld_s = np.asarray(ld_original, float), np.asarray(ld_swapped, float)
    z = np.asarray(swap_calibrated_logodds(ld_o, ld_s), dtype=np.float64)
    t = fit_threshold(z_train, item1_better_train)
    return JudgeForms(paper_probability(ld_o, ld_s), sigmoid(z - t), z, t, len(z_train))


@dataclass(frozen=True)
class AllureConfig:
    rounds: int = 1  # the first round reads the zero-shot answers: no extra pass
    per_round: int = 2  # demonstrations added per round
    pool: int = 6  # training comparisons scored each round (whole contexts, seeded)
    test_pairs: int | None = 8  # held-out comparisons the final judge answers


def most_wrong(z: np.ndarray, labels: list[int], exclude: set[int], k: int) -> list[int]:
    """Positions of the ``k`` comparisons whose calibrated log-odds lie furthest on the wrong
    side (ties and ``exclude`` never chosen), alternating the right answer so that the
    demonstrations do not all answer one position."""
    margin = np.asarray(z, float) * np.array([1.0 if y == ITEM1 else -1.0 for y in labels])
    order = [int(i) for i in np.argsort(margin, kind="stable")
             if labels[i] != TIE and int(i) not in exclude]
    by_answer = {True: [i for i in order if labels[i] == ITEM1],
                 False: [i for i in order if labels[i] != ITEM1]}
    picks: list[int] = []
    want = True
    while len(picks) < k and (by_answer[True] or by_answer[False]):
        picks.append((by_answer[want] or by_answer[not want]).pop(0))
        want = not want
    return picks


def allure(bridge, train_pool: Dataset, z_pool: np.ndarray, test: Dataset,
           template: Template | None, cfg: AllureConfig = AllureConfig()
           ) -> tuple[ZeroShotResult, list[Demo]]:
    """The ALLURE judge on ``test`` (both orders, calibrated) and its demonstrations, chosen
    over ``cfg.rounds`` rounds from the judge's calibrated log-odds ``z_pool`` on
    ``train_pool`` (the zero-shot judge's: no extra pass for round one)."""
    labels = train_pool.labels()
    chosen: list[int] = []
    demos: list[Demo] = []  # none when cfg.rounds is 0
    z = np.asarray(z_pool, float)
    for r in range(cfg.rounds):
        chosen += most_wrong(z, labels, set(chosen), cfg.per_round)
        demos = [Demo(train_pool.records[i], 0 if labels[i] == ITEM1 else 1) for i in chosen]
        if r + 1 < cfg.rounds:
            z = few_shot(bridge, train_pool, train_pool, template, demos=demos).z
    return few_shot(bridge, test, replace(train_pool, records=[]), template, demos=demos), demos


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
