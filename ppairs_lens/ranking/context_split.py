"""Which contexts train a ranking judge and which evaluate it, with no leak group on both sides.

Contexts generated from one template or sharing an item share its words, so a probe tested
on a context whose template it saw is partly tested on what it memorised. Contexts are
therefore split by their records' ``group_id``: :func:`context_groups` joins contexts sharing
a group into one unit (a context is ranked whole, so a group spanning contexts must not
straddle the split), and :func:`split_contexts` gives whole units to evaluation until it has
enough contexts, the rest to training. Data without groups (or with one) falls back to
splitting by context id, and the split says so.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from ppairs_lens.data.records import Dataset, ScoredItem
from ppairs_lens.errors import DataError
from ppairs_lens.evaluation.splits import split_groups_to_count
from ppairs_lens.evaluation.sweep_scores import MIN_RANK_ITEMS

__all__ = ["MIN_RANK_ITEMS", "UNITS", "ContextSplit", "context_groups", "split_contexts",
           "split_for_ranking"]

#: What a split's leak unit was, in words.
UNITS: dict[str, str] = {
    "group_id": "group_id (contexts sharing a group, e.g. one template pool, stay on one side)",
    "context_id": "context_id (the data names no groups larger than a context)",
    "single_group": "context_id (the data has a single group, which cannot be kept apart)",
}


@dataclass(frozen=True)
class ContextSplit:
    """Training and evaluation contexts and the leak units (groups) behind them."""

    train: list[str]
    eval: list[str]
    groups_train: list[str]
    groups_eval: list[str]
    unit: str  # a key of UNITS: what kept contexts apart
    group_of: dict[str, str]  # each training and evaluation context's leak unit
    n_too_small: int = 0  # contexts of 2 to MIN_RANK_ITEMS - 1 items: trained on, never ranked

    def describe(self) -> str:
        """One sentence for configs and figure captions."""
        return (f"split by {UNITS[self.unit]}: {len(self.train)} training contexts from "
                f"{len(self.groups_train)} groups, {len(self.eval)} evaluation contexts from "
                f"{len(self.groups_eval)} other groups")

    def as_info(self) -> dict:
        return {"unit": self.unit, "train_contexts": self.train, "eval_contexts": self.eval,
                "groups_train": self.groups_train, "groups_eval": self.groups_eval,
                "description": self.describe()}


def context_groups(dataset: Dataset) -> dict[str, str]:
    """Each context's leak unit (keys as in ``items_by_context``: ``str(context_id)``, or
    ``"__all__"`` for records without one); contexts whose records share any group get one
    unit, named by its smallest group id."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]  # path halving keeps the chains short
            x = parent[x]
        return x

    for r, group in zip(dataset.records, dataset.group_ids()):
        ctx = "ctx:" + (str(r.context_id) if r.context_id is not None else "__all__")
        a, b = find(ctx), find("grp:" + str(group))
        if a != b:
            parent[max(a, b)] = min(a, b)
    units: dict[str, list[str]] = {}
    for node in parent:
        units.setdefault(find(node), []).append(node)
    out: dict[str, str] = {}
    for members in units.values():
        name = min(m[4:] for m in members if m.startswith("grp:"))
        for m in members:
            if m.startswith("ctx:"):
                out[m[4:]] = name
    return out


def split_contexts(groups: Mapping[str, str], train_ok: Sequence[str], eval_ok: Sequence[str],
                   *, n_train: int, n_eval: int, seed: int, unit: str = "group_id"
                   ) -> ContextSplit:
    """Whole units to evaluation (:func:`split_groups_to_count`) until they hold ``n_eval``
    contexts of ``eval_ok``, keeping at least one unit for training; ``n_train`` contexts of
    ``train_ok`` from the others (each side subsampled, seeded). With fewer than two units each
    context is its own. ``unit``: what ``groups`` are (a :data:`UNITS` key)."""
    if n_train < 1 or n_eval < 1:
        raise DataError(f"need at least one training and one evaluation context, asked for "
                        f"{n_train} and {n_eval}", field="n_train_contexts/n_eval_contexts")
    usable = sorted(set(train_ok) | set(eval_ok))
    if len({groups[c] for c in usable}) < 2:
        groups, unit = {c: c for c in usable}, "single_group"
    eval_ok_set, train_ok_set = set(eval_ok), set(train_ok)
    tr_idx, ev_idx = split_groups_to_count([groups[c] for c in usable],
                                           [c in eval_ok_set for c in usable], n_eval, seed)
    rng = np.random.default_rng(seed)
    ev = [usable[i] for i in ev_idx if usable[i] in eval_ok_set]
    tr = [usable[i] for i in tr_idx if usable[i] in train_ok_set]
    ev = sorted(ev[i] for i in rng.permutation(len(ev))[:n_eval])
    tr = sorted(tr[i] for i in rng.permutation(len(tr))[:n_train])
    names = {groups[c] for c in usable}
    if not ev or not tr:
        raise DataError(f"{len(usable)} usable contexts in {len(names)} leak groups ({unit}) "
                        f"give {len(tr)} training and {len(ev)} evaluation contexts; need at "
                        f"least one of each (evaluation needs {MIN_RANK_ITEMS}+ items with "
                        "different gold scores)")
    return ContextSplit(train=tr, eval=ev,
                        groups_train=sorted({groups[c] for c in tr}),
                        groups_eval=sorted({groups[c] for c in ev}), unit=unit,
                        group_of={c: groups[c] for c in tr + ev})


def split_for_ranking(dataset: Dataset, items: Mapping[str, Mapping[str, ScoredItem]], *,
                      n_train: int, n_eval: int, seed: int, max_items: int | None = None
                      ) -> ContextSplit:
    """The ranking split of ``dataset`` (``items``: from ``items_by_context``): contexts of 2+
    items may train; only those of ``MIN_RANK_ITEMS``+ items with different gold scores rank
    (``n_too_small`` counts those left out for size)."""
    if max_items is not None and max_items < MIN_RANK_ITEMS:
        raise DataError(f"max_items_per_context={max_items}: within-context Spearman is only "
                        f"reported for contexts of {MIN_RANK_ITEMS}+ items",
                        field="max_items_per_context")
    train_ok = [c for c, g in items.items() if len(g) >= 2]
    eval_ok = [c for c in train_ok if len(items[c]) >= MIN_RANK_ITEMS
               and len({it.score for it in items[c].values()}) > 1]  # gold must rank something
    if not eval_ok:
        raise DataError(f"{dataset.name}: no context has {MIN_RANK_ITEMS}+ items with different "
                        "gold scores; within-context Spearman is not reported for smaller "
                        "contexts (with 2 items it is +-1, one comparison's accuracy; where a "
                        "context is one pair, read the sweep's pair accuracy instead)")
    named = any(r.group_id is not None for r in dataset.records)
    split = split_contexts(context_groups(dataset), train_ok, eval_ok, n_train=n_train,
                           n_eval=n_eval, seed=seed, unit="group_id" if named else "context_id")
    return replace(split, n_too_small=sum(1 for c in train_ok if len(items[c]) < MIN_RANK_ITEMS))
