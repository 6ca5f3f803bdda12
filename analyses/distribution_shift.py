"""Probes under distribution shift (paper Figure 4, Appendix C).

Probes are fitted on LLMBar's clean subsets (Natural + Normal, training half) at the read-out
chosen on validation, then scored beside the calibrated zero-shot judge on the clean held-out
half and on every other subset given (the main job passes the four Adversarial ones), each on
the held-out half of its own split, the pairs the judge answered. The claim: probes lose less
than prompting when the data shifts. Each drop (in-distribution minus shifted accuracy) and
difference of drops (probe minus judge) has a 95% CI, resampling leak groups of both sets at
once. :func:`run_shift` writes ``distribution_shift.csv`` and the config; ``ppairs-lens shift``
runs :func:`run_shift_files` on the user's files (``shift.csv``, ``shift.{png,svg,md}``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any
from dataclasses import dataclass, field, replace

import numpy as np

from analyses.distribution_shift_plots import plot_shift
from ppairs_lens.activations.store import ActivationStore, check_comparable
from ppairs_lens.data.records import TIE
from ppairs_lens.errors import DataError
from ppairs_lens.evaluation.baselines import (cross_dataset_memorisation, memorisation_baseline,
                                              length_baseline)
from ppairs_lens.evaluation.protocol import PAPER_TEST_SIZE, EvalSettings
from ppairs_lens.evaluation.published import citation, published
from ppairs_lens.evaluation.readout_choice import choose_readouts
from ppairs_lens.evaluation.shift import (IN_DISTRIBUTION, SHIFTED, every_pair, gap_verdict,
                                          pooled_split, scored_set, shift_rows)
from ppairs_lens.evaluation.store_split import split_records, split_store, undecidable_at_size
from ppairs_lens.evaluation.text_baselines import text_baselines
from ppairs_lens.io.outputs import save_config, save_figure, write_csv
from ppairs_lens.io.records import ABSENT, Absent, record_data, record_from_data
from ppairs_lens.evaluation.result_table import JUDGE_KEYS
from ppairs_lens.judges.held_out import held_out_judge_scores, judge_cache_dir, judge_every_pair
from ppairs_lens.probes.sweep import fit_sweep

#: A judge form by the key of its per-pair probabilities.
JUDGE_OF_KEY = {key: form for form, key in JUDGE_KEYS.items()}

__all__ = ["PublishedNote", "ShiftConfig", "ShiftDrop", "ShiftFilesConfig", "ShiftFilesResult",
           "ShiftFilesRow", "ShiftResult", "ShiftRow", "gap_verdict", "run_shift",
           "run_shift_files", "shift_lines"]


@dataclass
class ShiftConfig:
    kinds: tuple[str, ...] = ("supervised", "pca")
    settings: EvalSettings = EvalSettings(test_size=PAPER_TEST_SIZE)  # the paper's halves
    C: float = 1.0


@dataclass(frozen=True)
class ShiftRow:
    """One method's accuracy on one set, in distribution or shifted."""

    dataset: str
    role: str
    method: str
    accuracy: float
    lo: float
    hi: float
    ci_counts: bool
    n: int
    read_out: int | None = None  # a probe's read-out index; None for a judge


@dataclass(frozen=True)
class ShiftDrop:
    """A method's drop (in distribution minus shifted), or a judge's minus a probe's."""

    shifted: str
    method: str
    drop: float
    lo: float
    hi: float
    ci_counts: bool
    n_groups: int
    verdict: str | Absent = ABSENT  # only a judge-minus-probe row decides a claim


@dataclass(frozen=True)
class PublishedNote:
    source: str
    note: str


@dataclass(frozen=True)
class ShiftResult:
    """What ``run_shift`` found: accuracies, drops, the published claim, the read-outs."""

    rows: tuple[ShiftRow, ...]
    drops: tuple[ShiftDrop, ...]
    published: tuple[PublishedNote, ...]
    read_outs: dict[str, int]

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ShiftResult:
        return record_from_data(cls, dict(data), cls.__name__)

    def data(self) -> dict:
        return record_data(self)


def run_shift(source: ActivationStore, shifted: Sequence[ActivationStore],
              judge_p: Mapping[str, Mapping[str, float]], out, cfg: ShiftConfig
              ) -> ShiftResult:
    """``judge_p``: the zero-shot judge's P(item 1) per held-out pair id, per dataset name."""
    sp = split_store(source, **cfg.settings.split_kwargs())
    choice = choose_readouts(sp, cfg.kinds, seed=cfg.settings.seed, C=cfg.C)
    probes = {k: fit_sweep(sp.acts_train[:, :, [choice[k].index]], sp.labels_train, (k,),
                           groups=sp.groups_train, seed=cfg.settings.seed, C=cfg.C)
              for k in cfg.kinds}
    # Only the test fields are kept: a shifted store's training activations are never used.
    sets = [(source.meta.dataset, "in distribution", sp.acts_test, sp.labels_test,
             sp.pairs_test, sp.groups_test)]
    for st in shifted:
        t = split_store(st, **cfg.settings.split_kwargs())
        sets.append((st.meta.dataset, "shifted", t.acts_test, t.labels_test, t.pairs_test,
                     t.groups_test))
    per_set = []
    for name, role, acts, y, pairs, groups in sets:
        jp = judge_p.get(name, {})
        keep = [i for i, p in enumerate(pairs) if p.pair_id in jp and y[i] != TIE]
        preds = {k: probes[k].predict_proba(acts[keep][:, :, [choice[k].index]])[k][0]
                 for k in cfg.kinds}
        preds["zero_shot"] = np.array([jp[pairs[i].pair_id] for i in keep])
        per_set.append(scored_set(name, role, np.asarray(y)[keep], [pairs[i] for i in keep],
                                  preds))
    rows, drops = shift_rows(per_set, cfg.settings, kinds=cfg.kinds)
    for r in rows:
        r["read_out"] = choice[r["method"]].index if r["method"] in choice else None
    write_csv(f"{out}/distribution_shift.csv", rows + [{"role": "drop", **d} for d in drops])
    save_config(out, "distribution_shift", cfg)
    return ShiftResult(rows=tuple(ShiftRow(**r) for r in rows),
                       drops=tuple(ShiftDrop(**d) for d in drops),
                       published=tuple(PublishedNote(source=citation(p), note=p.note)
                                       for p in published(source="paper")
                                       if "Figure 4" in p.table),
                       read_outs={k: c.index for k, c in choice.items()})


@dataclass(frozen=True)
class ShiftFilesRow(ShiftRow):
    """One method's accuracy on one file's pairs; a probe's read-out as its hook name."""

    read_out: str = ""  # "" for a baseline or a judge


@dataclass(frozen=True)
class ShiftFilesResult:
    """Accuracies, drops, and the baselines that could not be fitted (and why)."""

    rows: tuple[ShiftFilesRow, ...]
    drops: tuple[ShiftDrop, ...]
    unavailable: dict[str, str]


@dataclass
class ShiftFilesConfig:
    """What ``ppairs-lens shift`` ran on: probes trained on ``train`` (their training split,
    pooled), scored on the held-out split of ``train`` and on every pair of ``test``."""

    train: list[str]
    test: list[str]
    kinds: tuple[str, ...] = ("supervised", "pca", "mass_mean")
    #: prompted judge forms scored beside the probes (``JUDGE_FORMS``; () for none), each on
    #: at most ``judge_max_pairs[form]`` pairs of each set (whole contexts, seeded)
    judges: tuple[str, ...] = ("zero_shot",)
    judge_max_pairs: dict[str, int] = field(default_factory=dict)
    settings: EvalSettings = EvalSettings()
    C: float = 1.0


def _records(dataset, pairs):
    """``dataset`` with exactly the records of ``pairs``, in their order."""
    by_id = {r.pair_id: r for r in dataset.records}
    return replace(dataset, records=[by_id[p.pair_id] for p in pairs])


def _train_side(train, stores, cfg: ShiftFilesConfig):
    """The training files' pooled split, training and held-out records, and each file's
    held-out pairs (in the pooled order)."""
    split = cfg.settings.split_kwargs()
    splits = [split_store(s, **split) for s in stores]
    pooled = pooled_split(splits, " + ".join(s.meta.dataset for s in stores))
    sides = [split_records(s.pairs(), d, **split) for s, d in zip(stores, train)]
    train_records = replace(sides[0][0], name="train",
                            records=[r for tr, _, _ in sides for r in tr.records])
    held_out = replace(sides[0][1], name=pooled.name,
                       records=[r for _, te, _ in sides for r in te.records])
    return pooled, train_records, held_out, [sp.pairs_test for sp in splits]


def check_one_kind(datasets) -> None:
    """Refuse comparisons and statements together: a probe reads one kind of contrast."""
    if len({d.kind for d in datasets}) > 1:
        kinds = ", ".join(f"{d.name}: {d.kind}" for d in datasets)
        raise DataError(f"shift: the files mix comparisons and statements ({kinds}); "
                        "a probe reads one kind")


def run_shift_files(bridge, train, test, stores_train, stores_test, out,
                    cfg: ShiftFilesConfig) -> ShiftFilesResult:
    """Probes and every no-model baseline fitted on the pooled training split of ``train``,
    and the judges of ``cfg.judges`` (few-shot demonstrations from the training records),
    scored on the held-out pairs of ``train`` and on every pair of each ``test`` dataset.
    Writes ``shift.csv``, ``shift.{png,svg,md}`` and the config."""
    check_one_kind([*train, *test])
    check_comparable([*stores_train, *stores_test])
    pooled, train_records, held_out, parts = _train_side(train, stores_train, cfg)
    seed = cfg.settings.seed
    choice = choose_readouts(pooled, cfg.kinds, seed=seed, C=cfg.C)
    probes = {k: fit_sweep(pooled.acts_train[:, :, [choice[k].index]], pooled.labels_train,
                           (k,), groups=pooled.groups_train, seed=seed, C=cfg.C)
              for k in cfg.kinds}
    # each judge's P(item 1) per set, by position (pair ids of two files may coincide): NaN
    # where a (limited) judge did not answer
    in_dist: dict[str, list[float]] = {f: [] for f in cfg.judges}
    for s, d, part in zip(stores_train, train, parts):
        got = {JUDGE_OF_KEY[key]: by_pair for key, by_pair in held_out_judge_scores(
            bridge, s, d, split=cfg.settings.split_kwargs(), forms=cfg.judges,
            max_pairs=cfg.judge_max_pairs).items()}
        for f in cfg.judges:
            in_dist[f] += [got.get(f, {}).get(p.pair_id, np.nan) for p in part]
    sets = [(pooled.name, IN_DISTRIBUTION, pooled.acts_test, pooled.labels_test,
             pooled.pairs_test, held_out, {f: np.array(v) for f, v in in_dist.items()})]
    for s, d in zip(stores_test, test):
        acts, labels, pairs = every_pair(s)
        reports = judge_every_pair(bridge, s, d, forms=cfg.judges, train=train_records,
                                   max_pairs=cfg.judge_max_pairs, seed=seed,
                                   cache_dir=judge_cache_dir(s))
        sets.append((s.meta.dataset, SHIFTED, acts, labels, pairs, _records(d, pairs),
                     {f: np.array([r["p_by_pair"].get(p.pair_id, np.nan) for p in pairs])
                      for f, r in reports.items()}))
    scored, notes = [], {}
    for name, role, acts, labels, pairs, records, judged in sets:
        preds = {k: probes[k].predict_proba(acts[:, :, [choice[k].index]])[k][0]
                 for k in cfg.kinds}
        memo = memorisation_baseline if role == IN_DISTRIBUTION else cross_dataset_memorisation
        for b in (memo(pooled.pairs_train, pooled.labels_train, pairs),
                  length_baseline(pooled.pairs_train, pooled.labels_train, pairs),
                  *text_baselines(train_records, records, embedding=bridge.W_E.detach(),
                                  tokenizer=bridge.tokenizer, seed=seed)):
            if b.available:
                preds[b.kind] = b.p
            else:
                notes[f"{name}: {b.kind}"] = b.reason
        preds.update({f: p for f, p in judged.items() if np.isfinite(p).any()})
        scored.append(scored_set(name, role, labels, pairs, preds))
    rows, drops = shift_rows(scored, cfg.settings, kinds=cfg.kinds, judge=cfg.judges)
    res = ShiftFilesResult(
        rows=tuple(ShiftFilesRow(**r, read_out=choice[r["method"]].hook
                                 if r["method"] in choice else "") for r in rows),
        drops=tuple(ShiftDrop(**d) for d in drops), unavailable=notes)
    write_csv(f"{out}/shift.csv", [record_data(r) for r in res.rows]
              + [{"role": "drop", **record_data(d)} for d in res.drops])
    save_config(out, "shift", cfg)
    save_figure(plot_shift(res.rows, stores_train[0].meta.model, cfg, notes), out, "shift",
                preview=cfg.settings.quick)
    return res


def shift_lines(res: ShiftFilesResult, cfg: ShiftFilesConfig) -> list[str]:
    """The console table of :func:`run_shift_files`: each set's predictors, then the drops."""
    out = [f"trained on {' + '.join(cfg.train)}; {cfg.settings.test_size:.0%} of its leak "
           "groups held out (in distribution); every pair of each shifted file scored"]
    for name in dict.fromkeys(r.dataset for r in res.rows):
        rs = [r for r in res.rows if r.dataset == name]
        out.append(f"{name} ({rs[0].role}, {rs[0].n} pairs)")
        for r in rs:
            note = "" if r.ci_counts is not False else "  (too few groups to count)"
            at = f" at {r.read_out}" if r.read_out else ""
            part = f" on {r.n} of {rs[0].n} pairs" if r.n != rs[0].n else ""
            out.append(f"  {r.method + at:44s} {r.accuracy:.3f} [{r.lo:.3f}, {r.hi:.3f}]"
                       f"{part}{note}")
    for key, why in res.unavailable.items():
        out.append(f"  n/a {key}: {why}")
    for d in res.drops:
        out.append(f"drop on {d.shifted}: {d.method:36s} {d.drop:+.3f} "
                   f"[{d.lo:+.3f}, {d.hi:+.3f}]"
                   + (f"  {d.verdict}" if d.verdict is not ABSENT else ""))
    return out


def cli(args, bridge) -> None:
    """``ppairs-lens shift --train SPEC... --test SPEC...``: :func:`run_shift_files`; the table
    is printed, ``shift.csv`` and the figure written to ``--out``."""
    from ppairs_lens.activations.pair_info import pair_info
    from ppairs_lens.activations.pipeline import ensure_store
    from ppairs_lens.data.specs import load_dataset_spec
    from ppairs_lens.judges.run_estimate import announce, plan_held_out_run

    def load(specs):
        return [load_dataset_spec(s, max_pairs=args.max_pairs, seed=args.seed) for s in specs]

    train, test = load(args.train), load(args.test)
    check_one_kind([*train, *test])     # before any harvest
    split = args.settings.split_kwargs()
    pooled = " + ".join(d.name for d in train)      # the training files' held-out pairs pool
    small = [w for w in (undecidable_at_size([pair_info(d) for d in train], pooled, **split),
                         *(undecidable_at_size([pair_info(d)], d.name, test_size=None)
                           for d in test)) if w]
    if small:        # said before any model work, so the limits can change first
        print("cannot be decided at these sizes:", *(f"  {w}" for w in small), sep="\n",
              flush=True)
    where = {"template": args.template, "names": args.hooks}
    forms = tuple(f for f in dict.fromkeys(args.judges) if f != "none")
    limits = dict(args.judge_max_pairs or ())
    demos = [split_records(pair_info(d), d, **split)[0] for d in train]
    demos = replace(demos[0], name="train", records=[r for t in demos for r in t.records])
    steps = (plan_held_out_run(bridge, train, args.stores, split=split, forms=forms,
                               max_pairs=limits, **where)
             + plan_held_out_run(bridge, test, args.stores, split=None, forms=forms,
                                 max_pairs=limits, train=demos, seed=split["seed"], **where))
    estimate = announce(bridge, steps, names=args.hooks, measure=not args.no_calibration)
    took: dict[tuple[str, str], float] = {}
    on_disk = {(s.dataset, s.kind) for s in steps if s.done}

    def harvested(d):
        t = time.perf_counter()
        store = ensure_store(bridge, d, args.stores, **where)
        took[d.name, "harvest"] = time.perf_counter() - t
        if (d.name, "harvest") not in on_disk:
            print(estimate.remaining(took), flush=True)
        return store

    t0 = time.perf_counter()
    stores_train = [harvested(d) for d in train]
    stores_test = [harvested(d) for d in test]
    cfg = args.config(ShiftFilesConfig, train=[d.name for d in train],
                      test=[d.name for d in test], judges=forms, judge_max_pairs=limits)
    t = time.perf_counter()
    res = run_shift_files(bridge, train, test, stores_train, stores_test, args.out, cfg)
    judged = sum(estimate.step_seconds(x) for x in steps if x.kind != "harvest")
    print("\n".join(shift_lines(res, cfg)))
    print("", *estimate.compared(took), sep="\n")
    print(f"  judges, probes and baselines together {time.perf_counter() - t:7.1f} s (the "
          f"judges estimated ~{judged:.0f} s)")
    print(f"took {time.perf_counter() - t0:.0f} s after the plan (estimated model time "
          f"~{estimate.seconds:.0f} s)")
