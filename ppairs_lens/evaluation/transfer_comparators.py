"""What a transferred probe is compared with, on exactly the pairs it is scored on.

A probe fitted on dataset A and scored on B's held-out pairs (a cell of the transfer matrix,
``A -> B``) means something only beside what else could be fitted on A, or asked of the model,
for the same pairs. For every cell, on B's held-out pairs:

* the no-model baselines fitted on A's training pairs, as the sweep fits them on a dataset's
  own (:mod:`ppairs_lens.evaluation.baselines`: length and memorisation, system identity
  where ids recur, across datasets only where ids name systems in both; :mod:`ppairs_lens.evaluation.text_baselines`: bag of words and input
  embeddings, when the datasets' texts are given), ``n/a`` with the reason where one cannot
  be built;
* the prompted judges (no training on A) on the part of B's held-out pairs each answered
  (per-pair probabilities the caller measured, as the sweep is handed them:
  :data:`~ppairs_lens.evaluation.result_table.JUDGE_KEYS`);
* and each probe of A at its validation-chosen read-out (headline centring), with its paired
  difference against every one of them (:func:`ppairs_lens.evaluation.paired.paired_difference`,
  bootstrap over B's leak groups).

:func:`transfer_comparisons` returns the rows and entries
:func:`ppairs_lens.evaluation.result_table.result_tables` prints (one block per cell) and the
comparators' rows of ``transfer.csv``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from ppairs_lens.data.records import Dataset
from ppairs_lens.evaluation.baselines import (CROSS_IDS, Baseline, cross_dataset_memorisation,
                                              memorisation_baseline, length_baseline)
from ppairs_lens.evaluation.paired import paired_difference
from ppairs_lens.evaluation.result_table import BASELINE_KINDS, JUDGE_KEYS
from ppairs_lens.evaluation.store_split import (StoreSplit, bootstrap_groups,
                                                covered_test_pairs, held_out_ci_counts)
from ppairs_lens.evaluation.sweep_scores import score_pairs
from ppairs_lens.evaluation.text_baselines import text_baselines
from ppairs_lens.evaluation.transfer_fit import FittedStore, TransferConfig, transfer_proba
from ppairs_lens.evaluation.verdicts import transfer_refusal

__all__ = ["CROSS_IDS", "NO_TEXTS", "Comparisons", "cell_name", "transfer_comparisons"]

#: Why the text baselines are missing when a study is run from stores alone.
NO_TEXTS = "needs the datasets' texts (run `ppairs-lens transfer`, not from stores alone)"


def cell_name(src: str, dst: str) -> str:
    """A transfer cell's name in tables: training dataset -> scored dataset."""
    return f"{src} -> {dst}"


@dataclass
class Comparisons:
    """Everything :func:`transfer_comparisons` found: ``table_rows`` / ``entries`` in the
    layer sweep's shape (what the result table reads, one ``dataset`` per cell), ``csv_rows``
    (the comparators' rows of ``transfer.csv``) and ``refused`` cells with the reason."""

    table_rows: list[dict] = field(default_factory=list)
    entries: list[dict] = field(default_factory=list)
    csv_rows: list[dict] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


def _records(dataset: Dataset, pairs) -> Dataset:
    """``dataset`` with exactly the records of ``pairs`` (a split's side), in their order."""
    by_id = {r.pair_id: r for r in dataset.records}
    return replace(dataset, records=[by_id[p.pair_id] for p in pairs])


def _baselines(src: FittedStore, dst: FittedStore, texts: Mapping[str, Dataset] | None,
               embedding, tokenizer, seed: int) -> list[Baseline]:
    """Every no-model baseline fitted on ``src``'s training pairs, P(item 1) on ``dst``'s
    held-out pairs."""
    a, b = src.split, dst.split
    memo = memorisation_baseline if src is dst else cross_dataset_memorisation
    out = [memo(a.pairs_train, a.labels_train, b.pairs_test),
           length_baseline(a.pairs_train, a.labels_train, b.pairs_test)]
    if texts is None or src.name not in texts or dst.name not in texts:
        return out + [Baseline(k, None, "", reason=NO_TEXTS) for k in ("lexical", "embedding")]
    return out + text_baselines(_records(texts[src.name], a.pairs_train),
                                _records(texts[dst.name], b.pairs_test), embedding=embedding,
                                tokenizer=tokenizer, seed=seed)


def _judged(sp: StoreSplit, by_key: Mapping[str, Mapping[str, float]]
            ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per judge form: (positions of ``sp``'s test pairs it answered, its P(item 1) there)."""
    covered = {kind: covered_test_pairs(sp, by_key.get(key)) for kind, key in JUDGE_KEYS.items()}
    return {kind: c for kind, c in covered.items() if c is not None}


def transfer_comparisons(fitted: list[FittedStore], cfg: TransferConfig, *,
                         texts: Mapping[str, Dataset] | None = None, embedding=None,
                         tokenizer=None,
                         judges: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None
                         ) -> Comparisons:
    """Every cell's probes, baselines and judges on its held-out pairs (see the module's doc).
    ``texts``: each fitted store's dataset by name (the text baselines need them; without,
    they are ``n/a``); ``embedding`` / ``tokenizer``: the model's ``W_E`` and tokenizer (the
    input-embedding baseline); ``judges``: per scored dataset, key -> {pair_id: P(item 1)}."""
    boot = cfg.settings.boot_kwargs()
    res = Comparisons()
    for src in fitted:
        for dst in fitted:
            name = cell_name(src.name, dst.name)
            refused = transfer_refusal(src.prompt_kind, dst.prompt_kind)
            if refused:
                res.refused[name] = refused
                continue
            _cell(res, name, src, dst, cfg, boot,
                  _baselines(src, dst, texts, embedding, tokenizer, cfg.settings.seed),
                  _judged(dst.split, (judges or {}).get(dst.name, {})))
    return res


def _cell(res: Comparisons, name: str, src: FittedStore, dst: FittedStore,
          cfg: TransferConfig, boot: dict, baselines: list[Baseline], judged: dict) -> None:
    sp = dst.split
    y, n = sp.labels_test, len(sp.labels_test)
    unit, ci_unit = bootstrap_groups(sp)

    def scored(p, idx):
        sc = score_pairs(y[idx], p, [sp.pairs_test[i] for i in idx], [unit[i] for i in idx],
                         **boot)
        return {m: {**s, "ci_counts": held_out_ci_counts(sp, s)} for m, s in sc.items()}

    every = np.arange(n)
    others: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    notes: dict[str, str] = {}
    for b in baselines:
        if b.available:
            others[b.kind], notes[b.kind] = (every, b.p), b.predictor
        else:
            notes[b.kind] = b.reason or "unavailable"
    for kind, (idx, p) in judged.items():
        others[kind] = (idx, p)
        notes[kind] = f"prompted judge on {len(idx)} of {n} test pairs"
    for kind, (idx, p) in others.items():
        role = "baseline" if kind in BASELINE_KINDS else "judge"
        for metric, s in scored(p, idx).items():
            row = {"metric": metric, "value": s["value"], "lo": s["lo"], "hi": s["hi"],
                   "ci_counts": s["ci_counts"], "n_train": len(src.split.labels_train),
                   "n_test": len(idx)}
            res.table_rows.append({"dataset": name, "kind": kind, "layer": -1, "hook": "",
                                   "split_used": sp.split_used, **row})
            res.csv_rows.append({"train": src.name, "test": dst.name, "kind": kind,
                                 "role": role, "center": "", "headline": True,
                                 "in_distribution": src is dst, "layer": None, "hook": "",
                                 "predictor": notes[kind], "split_by": sp.split_used, **row})
    probes = {}
    for kind in cfg.kinds:
        li = src.chosen[kind]
        p = transfer_proba(src, dst, kind, li, cfg.center_target)
        if p is not None and np.isfinite(p).all():
            probes[kind] = (li, p)
    for kind, (li, p) in probes.items():
        c = src.choices[kind]
        test = scored(p, every)["accuracy"]
        entry = {"dataset": name, "kind": kind, "layer": li, "hook": src.hook_names[li],
                 "val_value": c.val_value, "selected_by": c.selected_by,
                 "split_used": sp.split_used, "n_test": n,
                 "n_train": len(src.split.labels_train), "n_groups_test": len(set(sp.groups_test)), "ci_unit": ci_unit,
                 "test": {"metric": "accuracy", **{k: test[k] for k in
                                                   ("value", "lo", "hi", "ci_counts")}},
                 "minus": {}, "unavailable": {k: v for k, v in notes.items()
                                              if k not in others}}
        vs = {**others, **{f"probe:{k}": (every, q) for k, (_, q) in probes.items()
                           if k != kind}}
        for other, (idx, q) in vs.items():
            d = paired_difference(y[idx], p[idx], q, [unit[i] for i in idx], **boot)
            entry["minus"][other] = {**d, "ci_counts": held_out_ci_counts(sp, d),
                                     "about": notes.get(other, "probe at its chosen read-out")}
        res.entries.append(entry)
