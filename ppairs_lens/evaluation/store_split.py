"""The held-in / held-out split of an activation store that every analysis scores on.

:func:`split_store` drops tied pairs and splits the rest by the pairs' leak groups; the same
arguments always give the same split, so separate analyses see the same held-out pairs.
:func:`validation_split` splits the training pairs again, the same leak-free way, for choices
(the read-out layer) that must not read the test set.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from jaxtyping import Float, Int
from torch import Tensor

from ppairs_lens.activations.pair_info import PairInfo
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.data.records import TIE, Dataset
from ppairs_lens.errors import DataError, PPairsError, ProbeError
from ppairs_lens.evaluation.bootstrap import MIN_BOOTSTRAP_GROUPS
from ppairs_lens.evaluation.sign_flip import groups_for_p
from ppairs_lens.evaluation.splits import resolve_split_by, train_test_split_pairs

__all__ = ["StoreSplit", "bootstrap_groups", "covered_test_pairs", "held_out_ci_counts",
           "held_out_records", "pair_groups", "pair_items",
           "split_pairs", "split_records", "split_store", "store_fits", "training_split",
           "untied_split", "validation_split", "undecidable_at_size"]


@dataclass
class StoreSplit:
    """Held-in / held-out pairs of one store, ties dropped, with their leak groups (the unit a
    bootstrap resamples and a validation split keeps whole); ``split_used``: the mode the
    split resolved to ("context" means by group)."""

    name: str
    acts_train: Float[Tensor, "n_train 2 layer d_model"]
    acts_test: Float[Tensor, "n_test 2 layer d_model"]
    labels_train: np.ndarray
    labels_test: np.ndarray
    pairs_test: list[PairInfo]
    pairs_train: list[PairInfo]
    groups_train: list[str]
    groups_test: list[str]
    split_used: str
    #: the store's read-out names, one per layer of ``acts_*``
    hook_names: list[str] = field(default_factory=list)


def pair_groups(pairs: Sequence[PairInfo]) -> list[str]:
    """Each store pair's leak group (:attr:`PairInfo.group`)."""
    return [p.group for p in pairs]


def pair_items(pairs: Sequence[PairInfo]) -> list[tuple[str, str]] | None:
    """Each store pair's ``(item1_id, item2_id)``; None when some pair has none (statements)."""
    items = [(p.item1_id, p.item2_id) for p in pairs]
    if not items or any(a is None or b is None for a, b in items):
        return None
    return items  # type: ignore[return-value]  # None refused above


def split_pairs(pairs: Sequence[PairInfo], *, test_size: float, split_by: str = "auto",
                seed: int = 0) -> tuple[Int[np.ndarray, " n_train"], Int[np.ndarray, " n_test"],
                                        str]:
    """``(train, test, split_used)`` for a store's pairs, without the activations."""
    groups, items = pair_groups(pairs), pair_items(pairs)
    used = resolve_split_by(groups, items) if split_by == "auto" else split_by
    train, test = train_test_split_pairs(groups, item_ids=items, test_size=test_size, seed=seed,
                                         by=used)
    return train, test, used


def untied_split(pairs: Sequence[PairInfo], *, test_size: float, split_by: str = "auto",
                 seed: int = 0) -> tuple[list[PairInfo], Int[np.ndarray, " n_untied"],
                                         Int[np.ndarray, " n_train"],
                                         Int[np.ndarray, " n_test"], str]:
    """``(untied, keep, train, test, split_used)``: the pairs every analysis scores (ties
    dropped; ``keep`` indexes them in ``pairs``) and their split, ``train`` / ``test`` indexing
    ``untied``. The one rule :func:`split_store` and the
    judges' held-out datasets share; it reads no activations, so it stays cheap."""
    keep = np.flatnonzero(np.array([p.label for p in pairs], dtype=int) != TIE)
    untied = [pairs[i] for i in keep]
    train, test, used = split_pairs(untied, test_size=test_size, split_by=split_by, seed=seed)
    return untied, keep, train, test, used


def split_records(pairs: Sequence[PairInfo], dataset: Dataset, *, test_size: float,
                  split_by: str = "auto", seed: int = 0) -> tuple[Dataset, Dataset, str]:
    """``(train, test, split_used)``: ``dataset``'s records on each side of the split of
    ``pairs`` (a store's, or ``pair_info(dataset)`` before any harvest), so what re-reads the
    texts (judges, text baselines) gets exactly the pairs a probe is scored on."""
    untied, _, train, test, used = untied_split(pairs, test_size=test_size, split_by=split_by,
                                                seed=seed)
    by_id = {r.pair_id: r for r in dataset.records}
    missing = [p.pair_id for p in untied if p.pair_id not in by_id]
    if missing:
        raise DataError(f"{dataset.name}: {len(missing)} store pairs are not in the dataset "
                        f"(e.g. {missing[0]!r}); was the store harvested from it?")

    def side(idx: np.ndarray, name: str) -> Dataset:
        return replace(dataset, name=f"{dataset.name}:{name}",
                       records=[by_id[untied[i].pair_id] for i in idx])

    return side(train, "train"), side(test, "test"), used


def held_out_records(dataset: Dataset, pair_ids: Sequence[str], max_pairs: int | None,
                     seed: int) -> Dataset:
    """The records of ``pair_ids`` (named ``<name>:test``), cut to at most ``max_pairs`` in
    whole contexts: what an intervention study's judge answers and its plan counts."""
    from ppairs_lens.data.specs import subsample_by_context

    keep = set(pair_ids)
    return subsample_by_context(
        replace(dataset, name=f"{dataset.name}:test",
                records=[r for r in dataset.records if r.pair_id in keep]), max_pairs, seed)


def split_store(store: ActivationStore, *, test_size: float, split_by: str = "auto",
                seed: int, layers: Sequence[int] | None = None) -> StoreSplit:
    """Load a store (``layers``: only those read-outs), drop ties and split it."""
    pairs, keep, train, test, used = untied_split(store.pairs(), test_size=test_size,
                                                  split_by=split_by, seed=seed)
    acts = store.load(layers)
    if len(keep) < len(acts):  # no tie (the usual case): no copy of the whole store
        acts = acts[keep]
    labels = np.array([p.label for p in pairs])
    groups = pair_groups(pairs)
    return StoreSplit(store.meta.dataset, acts[train], acts[test], labels[train],
                      labels[test], [pairs[i] for i in test], [pairs[i] for i in train],
                      [groups[i] for i in train], [groups[i] for i in test], used,
                      list(store.hook_names) if layers is None
                      else [store.hook_names[i] for i in layers])


def training_split(name: str, acts: Float[Tensor, "n 2 layer d_model"], labels: np.ndarray,
                   groups: Sequence[Hashable], item_ids: Sequence[tuple] | None,
                   hook_names: Sequence[str]) -> StoreSplit:
    """Training pairs with no test side (a probe judge's harvest), as a :class:`StoreSplit` so
    that the read-out is chosen as every store's is."""
    if item_ids is not None and any(a is None or b is None for a, b in item_ids):
        item_ids = None
    used = resolve_split_by(list(groups), item_ids)
    pairs = [PairInfo(str(i), int(labels[i]), group_id=str(g),
                      item1_id=item_ids[i][0] if item_ids else None,
                      item2_id=item_ids[i][1] if item_ids else None)
             for i, g in enumerate(groups)]
    return StoreSplit(name, acts, acts[:0], np.asarray(labels), np.asarray(labels)[:0], [],
                      pairs, [str(g) for g in groups], [], used, list(hook_names))


def validation_split(groups: Sequence[Hashable],
                     item_ids: Sequence[tuple[Hashable, Hashable]] | None, *,
                     val_size: float = 0.25, seed: int, by: str = "auto",
                     ) -> tuple[Int[np.ndarray, " n_fit"], Int[np.ndarray, " n_val"]]:
    """Indices ``(fit, val)`` into the *training* pairs, split as the test split was (``by``:
    ``StoreSplit.split_used``), so the layer is chosen without reading the test set.
    :class:`ProbeError` when the training pairs cannot be split that way (one group)."""
    if item_ids is not None and len(item_ids) != len(groups):
        raise ProbeError(f"{len(groups)} groups but {len(item_ids)} item-id pairs")
    if by == "item" and item_ids is None:
        raise ProbeError("a validation split by item needs the pairs' item ids")
    try:
        return train_test_split_pairs(list(groups), item_ids=item_ids, test_size=val_size,
                                      seed=seed, by=by)
    except ProbeError as e:
        raise ProbeError(f"cannot make a validation split of {len(groups)} training pairs "
                         f"(by={by!r}): {e}") from None


def bootstrap_groups(sp: StoreSplit) -> tuple[list[str], str]:
    """The unit a held-out CI resamples, and its caption: the split's leak groups when the
    test side holds at least ``MIN_BOOTSTRAP_GROUPS`` (with fewer, e.g. 2 template pools, a
    resample of groups says nothing); else contexts, which is optimistic because items recur
    inside the few groups."""
    n_groups = len(set(sp.groups_test))
    if n_groups >= MIN_BOOTSTRAP_GROUPS:
        return list(sp.groups_test), f"by {sp.split_used} group ({n_groups} test groups)"
    ctx = [p.context_id or p.pair_id for p in sp.pairs_test]
    return ctx, (f"by context ({len(set(ctx))}); items recur within the {n_groups} test "
                 f"groups, so this CI is optimistic")


def held_out_ci_counts(sp: StoreSplit, ci: dict) -> bool:
    """Whether a CI on ``sp``'s test pairs may count toward a claim: the bootstrap's own flag
    and at least ``MIN_BOOTSTRAP_GROUPS`` leak groups on the test side (contexts resampled
    inside fewer groups do not count)."""
    return bool(ci.get("ci_counts", False)) and len(set(sp.groups_test)) >= MIN_BOOTSTRAP_GROUPS


def store_fits(store: ActivationStore, split: dict, log) -> bool:
    """Whether a store is complete and its split leaves both classes on both sides (else it is
    left out of every experiment, the reason going to ``log``)."""
    missing = store.missing_shards()
    if missing:
        log(f"{store.meta.dataset} left out: its store misses shards {missing[:10]} of "
            f"{store.n_shards}; re-run to finish its harvest")
        return False
    try:
        # the split's labels only: loading the activations here cost ~75 s at --full's sizes
        pairs, _, train, test, _ = untied_split(store.pairs(), **split)
        for side, idx in (("training", train), ("held-out", test)):
            counts = np.bincount(np.asarray([pairs[i].label for i in idx], dtype=int),
                                 minlength=3)[1:]
            if counts.min() < 2:
                log(f"{store.meta.dataset} left out: its {side} half has {counts[0]} "
                    f"pairs preferring item 1 and {counts[1]} item 2 (fewer than 2 of one)")
                return False
    except PPairsError as e:
        log(f"{store.meta.dataset} left out: {e}")
        return False
    return True


def covered_test_pairs(sp: StoreSplit, by_pair: Mapping[str, float] | None
                       ) -> tuple[np.ndarray, np.ndarray] | None:
    """(positions of ``sp``'s test pairs that ``by_pair`` scores, its P(item 1) there), or
    None where it scores none of them."""
    by_pair = by_pair or {}
    idx = np.array([i for i, p in enumerate(sp.pairs_test) if p.pair_id in by_pair], np.int64)
    if not len(idx):
        return None
    return idx, np.array([float(by_pair[sp.pairs_test[i].pair_id]) for i in idx])


def undecidable_at_size(parts: Sequence[Sequence[PairInfo]], name: str, *,
                        test_size: float | None, split_by: str = "auto", seed: int = 0,
                        alpha: float = 0.05) -> str | None:
    """Before any work: why no comparison on ``name``'s held-out pairs can be decided at this
    size, with the size that could; None when it can. ``parts``: the pairs of each file pooled
    into ``name``, each split on its own (``test_size`` None: all their pairs, a shifted set).
    With ``k`` test groups the exact sign-flip test's smallest two-sided p is ``2 * 2^-k``, so
    fewer than ``groups_for_p(alpha / 2)`` cannot decide anything however large the effect."""
    k = n = 0
    for pairs in parts:
        if test_size is None:
            keep = [p for p in pairs if p.label != TIE]
            k, n = k + len({p.group for p in keep}), n + len(keep)
        else:
            untied, _, _, test, _ = untied_split(pairs, test_size=test_size,
                                                 split_by=split_by, seed=seed)
            k, n = k + len({untied[i].group for i in test}), n + len(untied)
    need = groups_for_p(alpha / 2)
    if k >= need:
        return None
    if k == 0:
        return (f"{name}: no untied test pair at this size, so nothing on it can be decided; "
                f"{need} test leak groups are needed")
    more = int(np.ceil(n * need / k))
    return (f"{name}: {k} test group{'s' if k != 1 else ''} (leak groups) at this size, so no "
            f"comparison on it can be decided (the smallest p a test on {k} group differences "
            f"can give is {2 * 0.5 ** k:.3g}, not below {alpha}); {need} groups are needed, "
            f"about {more} untied pairs at this grouping (now {n})")
