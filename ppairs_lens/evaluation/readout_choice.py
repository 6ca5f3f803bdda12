"""The one read-out choice: which layer a store split's probe is read at, never by its test set.

A sweep scores 30-odd read-outs; the maximum of 30 noisy test scores is biased upwards, so
the read-out is chosen on a *validation* split of the training pairs, made exactly as the
test split was (whole leak groups on one side), by probes fitted on the rest. The rule,
written once here and used by every analysis:

* ``layer=None``: every probe kind is fitted on the fit part of ``VAL_REPEATS`` validation
  splits (seeds ``seed``, ``seed + 1``, ...) at every read-out, and each kind takes the
  read-out with the best validation accuracy, weighted by validation pairs; ties go to the
  first maximum; degenerate read-outs (NaN) are never chosen.
* One fallback when no validation split is possible (too few groups, one class): the paper's
  read-out, the last block's ``resid_post``; ``selected_by`` says so and why.
* ``layer=<int>``: that read-out, forced (negative counts from the end).

Scores are memoised per training data, so the sweep, the transfer and a probe judge on the
same split fit once and read the same numbers. CCS (gradient descent) costs more: it is
validated at every read-out only when asked for; :func:`add_kinds_at` fits it at one read-out
chosen for the other kinds instead.
"""

from __future__ import annotations

import re
import warnings
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from jaxtyping import Float

from ppairs_lens.errors import ProbeError
from ppairs_lens.evaluation.store_split import StoreSplit, pair_items, validation_split
from ppairs_lens.probes.estimators import PROBE_KINDS
from ppairs_lens.probes.sweep import SweepProbes, fit_sweep, with_kinds_at

__all__ = ["ReadoutChoice", "VAL_REPEATS", "VAL_SIZE", "add_kinds_at", "best_layers",
           "check_layer_setting", "choose_readout", "choose_readout_index", "choose_readouts",
           "common_readout", "fallback_index", "layer_rule", "layer_setting",
           "split_half_directions", "validation_scores"]

#: Share of the training groups held out to choose the read-out.
VAL_SIZE: float = 0.25
#: Validation splits averaged: a split by item leaves few validation pairs, one split jitters.
VAL_REPEATS: int = 3
_RESID_POST = re.compile(r"^blocks\.(\d+)\.hook_resid_post$")
_MEMO: OrderedDict[tuple, dict[str, np.ndarray]] = OrderedDict()
_MEMO_SIZE = 16


@dataclass(frozen=True)
class ReadoutChoice:
    """The read-out a probe kind is used at; ``selected_by``: ``"validation"``,
    ``"given (layer=N)"`` or the fallback with its reason; ``val_scores``: validation accuracy
    per read-out (empty when none was computed)."""

    index: int
    hook: str
    kind: str
    selected_by: str
    val_scores: tuple[float, ...] = ()

    @property
    def val_value(self) -> float:
        return self.val_scores[self.index] if self.val_scores else float("nan")

    @property
    def reason(self) -> str:
        return (f"best {self.kind} validation accuracy ({self.val_value:.3f})"
                if self.selected_by == "validation" else self.selected_by)


def layer_rule(layer: int | None) -> str:
    """A table's label for a layer setting: ``"val"`` (None: chosen on validation, the one
    spelling in code) or ``"fixed"`` (an int read-out index)."""
    return "val" if layer is None else "fixed"


def layer_setting(text: str) -> int | None:
    """A layer setting from text, the one place ``val`` is read: None or an int read-out index;
    ValueError otherwise (argparse reports it as an invalid value)."""
    return None if text == "val" else int(text)


def check_layer_setting(layer: Any) -> None:
    """Refuse a ``layer`` that is neither a read-out index nor None."""
    if isinstance(layer, bool) or not (isinstance(layer, (int, np.integer)) or layer is None):
        raise ProbeError(f"layer must be None (chosen on a validation split of each source's "
                         f"training pairs) or an int read-out index, got {layer!r}")


def _argmax(scores: Float[np.ndarray, " layer"]) -> int:
    """Position of the best score: the first on ties, NaN skipped."""
    v = np.asarray(scores, dtype=np.float64)
    if v.ndim != 1 or not len(v) or np.isnan(v).all():
        raise ProbeError("every read-out's validation score is NaN: none can be chosen")
    return int(np.nanargmax(v))                   # nanargmax returns the first maximum


def fallback_index(hook_names: Sequence[str]) -> int:
    """The paper's read-out: the last block's ``resid_post`` (else the last read-out)."""
    blocks = [(int(m.group(1)), i) for i, h in enumerate(hook_names)
              if (m := _RESID_POST.match(h))]
    return max(blocks)[1] if blocks else len(hook_names) - 1


def _memo_key(split: StoreSplit, seed: int, val_size: float, repeats: int, fit_kw: dict
              ) -> tuple:
    # Content, not identity: separate analyses re-split the same store into new objects.
    a = split.acts_train
    probe = a.reshape(a.shape[0], -1)[:, :: max(1, a[0].numel() // 4096)].double()
    return (split.name, split.split_used, tuple(split.groups_train), tuple(a.shape),
            float(probe.sum()), float((probe * probe).sum()),
            tuple(np.asarray(split.labels_train).tolist()), seed, val_size, repeats,
            tuple(sorted((k, repr(v)) for k, v in fit_kw.items())))


def validation_scores(split: StoreSplit, *, kinds: Sequence[str] = PROBE_KINDS, seed: int = 0,
                      val_size: float = VAL_SIZE, repeats: int = VAL_REPEATS, **fit_kw: Any
                      ) -> dict[str, np.ndarray]:
    """``{kind: [read-out]}`` validation accuracy (module doc; the test pairs are never read;
    each kind is fitted on its own, so its scores do not depend on which others are asked
    for). :class:`ProbeError` when no validation split is usable."""
    if repeats < 1:
        raise ProbeError(f"repeats must be at least 1, got {repeats}")
    kinds = tuple(kinds)
    key = (kinds, *_memo_key(split, seed, val_size, repeats, fit_kw))
    if key in _MEMO:
        _MEMO.move_to_end(key)
        return {k: v.copy() for k, v in _MEMO[key].items()}
    y = np.asarray(split.labels_train)
    groups, items = list(split.groups_train), pair_items(split.pairs_train)
    total: dict[str, np.ndarray] = {}
    n_val, problems = 0, []
    for r in range(repeats):
        try:
            fit, val = validation_split(groups, items, val_size=val_size, seed=seed + r,
                                        by=split.split_used)
        except ProbeError as e:
            problems.append(str(e))
            continue
        bad = [part for part, idx in (("fit", fit), ("validation", val))
               if len(np.unique(y[idx])) < 2]
        if bad:                      # a small split by item can leave one class: skip it
            problems.append(f"the {bad[0]} part holds pairs of one class only")
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # degenerate read-outs: NaN
            probes = fit_sweep(split.acts_train[fit], y[fit], kinds,
                               groups=[groups[i] for i in fit], seed=seed, n_sign_boot=1,
                               **fit_kw)
        for kind, acc in probes.score(split.acts_train[val], y[val]).items():
            total[kind] = total.get(kind, 0.0) + acc * len(val)
        n_val += len(val)
    if not n_val:
        raise ProbeError(f"no usable validation split of {len(y)} training pairs in {repeats} "
                         f"tries ({problems[-1]})")
    out = {kind: v / n_val for kind, v in total.items()}
    _MEMO[key] = out
    while len(_MEMO) > _MEMO_SIZE:
        _MEMO.popitem(last=False)
    return {k: v.copy() for k, v in out.items()}


def choose_readouts(split: StoreSplit, kinds: Sequence[str] = PROBE_KINDS, *,
                    layer: int | None = None, seed: int = 0, val_size: float = VAL_SIZE,
                    repeats: int = VAL_REPEATS, **fit_kw: Any) -> dict[str, ReadoutChoice]:
    """``{kind: ReadoutChoice}`` for several kinds from one validation fit (module doc);
    ``fit_kw`` go to :func:`fit_sweep` (``C``, ``standardize``)."""
    check_layer_setting(layer)
    n = split.acts_train.shape[2]
    hooks = list(split.hook_names)
    if len(hooks) != n:
        hooks = [f"read-out {i}" for i in range(n)]
    if layer_rule(layer) == "fixed":
        if not -n <= int(layer) < n:
            raise ProbeError(f"read-outs are 0..{n - 1} (or -{n}..-1); layer {layer} is out "
                             "of range")
        li = int(layer) % n
        return {k: ReadoutChoice(li, hooks[li], k, f"given (layer={layer})") for k in kinds}
    # The three standard kinds always (one memoised fit every caller shares), plus any other
    # asked for (CCS: its own fit at every read-out, costlier)
    asked = (*PROBE_KINDS, *(k for k in kinds if k not in PROBE_KINDS))
    try:
        val = validation_scores(split, kinds=asked, seed=seed, val_size=val_size,
                                repeats=repeats, **fit_kw)
    except ProbeError as e:
        li = fallback_index(hooks)
        warnings.warn(f"{split.name}: no validation split ({e}); read-out {hooks[li]}",
                      stacklevel=2)
        return {k: ReadoutChoice(li, hooks[li], k, f"fallback: {hooks[li]}, the paper's "
                                 f"read-out (no validation split: {e})") for k in kinds}
    out = {}
    for k in kinds:
        scores = tuple(float(v) for v in val[k])
        try:
            li, how = _argmax(val[k]), "validation"
        except ProbeError as e:
            li = fallback_index(hooks)
            how = f"fallback: {hooks[li]}, the paper's read-out ({e})"
        out[k] = ReadoutChoice(li, hooks[li], k, how, scores)
    return out


def choose_readout(split: StoreSplit, kind: str, *, layer: int | None = None, seed: int = 0,
                   val_size: float = VAL_SIZE, repeats: int = VAL_REPEATS, **fit_kw: Any
                   ) -> ReadoutChoice:
    """:func:`choose_readouts` for one kind."""
    return choose_readouts(split, (kind,), layer=layer, seed=seed, val_size=val_size,
                           repeats=repeats, **fit_kw)[kind]


def choose_readout_index(split: StoreSplit, kind: str, *, layer: int | None = None,
                         seed: int = 0, val_size: float = VAL_SIZE, **fit_kw: Any
                         ) -> tuple[int, str]:
    """``(index, reason)`` of :func:`choose_readout`."""
    c = choose_readout(split, kind, layer=layer, seed=seed, val_size=val_size, **fit_kw)
    return c.index, c.reason


def common_readout(choices: Sequence[dict[str, ReadoutChoice]], hook_names: Sequence[str],
                   *, layer: int | None = None) -> ReadoutChoice:
    """One read-out for views that compare several stores (the cross-dataset cosines;
    ``choices``: each store's :func:`choose_readouts`, read-outs ``hook_names``): the forced
    ``layer``, else the best validation accuracy averaged over stores and kinds (first
    maximum), else (a store without validation scores) the fallback. ``kind`` is the kinds
    joined by "+"."""
    flat = [c for per in choices for c in per.values()]
    if not flat:
        raise ProbeError("common_readout needs every store's read-out choices")
    kind = "+".join(dict.fromkeys(c.kind for c in flat))
    if layer_rule(layer) == "fixed" or any(not c.val_scores for c in flat):
        c = next((c for c in flat if not c.val_scores), flat[0])
        return ReadoutChoice(c.index, c.hook, kind, c.selected_by)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)     # all-NaN read-outs stay NaN
        mean = np.nanmean(np.array([c.val_scores for c in flat]), axis=0)
    li = _argmax(mean)
    return ReadoutChoice(li, hook_names[li], kind, "validation (mean over stores and kinds)",
                         tuple(float(v) for v in mean))


def split_half_directions(sp: StoreSplit, li: int, kinds: tuple[str, ...], *, seed: int,
                          **fit_kw: Any) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Directions fitted on two disjoint halves of the held-in pairs at read-out ``li``: their
    cosine is how well one probe kind agrees with *itself* given half the data, the ceiling to
    read cross-dataset cosines against. Empty when the halves cannot be split or fitted."""
    try:
        h1, h2 = validation_split(sp.groups_train, pair_items(sp.pairs_train), val_size=0.5,
                                  seed=seed + 1, by=sp.split_used)
        dirs = []
        for h in (h1, h2):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                sw = fit_sweep(sp.acts_train[h][:, :, [li]], sp.labels_train[h], kinds,
                               groups=[sp.groups_train[i] for i in h], seed=seed, **fit_kw)
            dirs.append(sw.directions)
    except ProbeError:
        return {}
    return {k: (dirs[0][k][0].numpy(), dirs[1][k][0].numpy()) for k in kinds}


def add_kinds_at(split: StoreSplit, sweep: SweepProbes, kinds: Sequence[str], li: int, *,
                 seed: int = 0, why: str = "") -> tuple[SweepProbes, dict[str, ReadoutChoice]]:
    """``kinds`` (e.g. CCS) fitted at read-out ``li`` only and added to ``sweep``, with their
    choice forced to ``li`` (``why`` appended to its ``selected_by``)."""
    kinds = tuple(k for k in kinds if k not in sweep.kinds)
    if not kinds:
        return sweep, {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # degenerate: NaN, as in the sweep
        part = fit_sweep(split.acts_train[:, :, [li]], split.labels_train, kinds, layers=[li],
                         model_name=sweep.model_name, groups=split.groups_train, seed=seed)
    choices = {k: replace(c, selected_by=c.selected_by + (f": {why}" if why else ""))
               for k, c in choose_readouts(split, kinds, layer=li).items()}
    return with_kinds_at(sweep, part, li), choices


def _chosen(r: dict) -> bool:
    v = r.get("chosen")
    return v is True or str(v).lower() == "true"       # CSV round trips give "True"


def best_layers(rows: list[dict], metric: str = "accuracy") -> list[dict]:
    """One row per (dataset, kind) of a layer sweep's table: the ``metric`` row at the
    read-out the sweep marked ``chosen``, read, not chosen again, so every view shows one
    read-out; baseline rows (``layer < 0``) are left out."""
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["metric"] != metric or int(r["layer"]) < 0:
            continue
        groups.setdefault((r["dataset"], r["kind"]), []).append(r)
    out = []
    for (ds, kind), rs in groups.items():
        pick = [r for r in rs if _chosen(r)]
        if len(pick) != 1:
            raise ProbeError(f"sweep rows of ({ds}, {kind}) mark {len(pick)} chosen read-outs, "
                             "not one: re-run the sweep (it records the read-out choice)")
        out.append({**pick[0], "selected_by": pick[0].get("selected_by") or "validation"})
    return out
