"""LEACE concept erasure (Belrose et al. 2023) as an intervention beside vector rejection, and
its matching null: the same eraser fitted on permuted labels.

Rejection removes one chosen direction orthogonally; LEACE removes *all* linearly available
information about the labels with the least-squares smallest change (an oblique projection
whitened by the features' covariance; ``pip install ppairs-lens[erasure]``). Fitted on a
layer's contrast differences with the pair labels as the concept, the affine eraser
``x -> x - P (x - b)`` applied to each side of a pair removes ``P (x0 - x1)`` from their
difference, so no linear probe of the differences can beat chance afterwards.

Its null is LEACE fitted on the *same* features with the labels permuted: the same erasure,
in the same covariance geometry, of a concept that is the labels only by chance. Every null is
a different eraser and none the real one; asking for more than exist is refused rather than
filled with repeats that would fake the p-value's resolution.

:func:`eraser_null_test` compares the real eraser's change of the log-odds with the permuted
erasers', as the ablation compares a probe direction with its nulls: effect = mean ``|Δz|``,
its rank and permutation p-value ``(1 + #{null >= real}) / (1 + K)`` (resolution
``1 / (K + 1)``), Δaccuracy and Δmargin with paired CIs over leak groups, and the verdict
(:func:`ppairs_lens.evaluation.intervention_tests.ablation_changes_verdict`).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Hashable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ppairs_lens.activations.prompts import Template
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.data.records import ITEM1, TIE, Dataset
from ppairs_lens.errors import DirectionError, SettingError
from ppairs_lens.evaluation.intervention_tests import ablation_changes_verdict
from ppairs_lens.evaluation.judge_change import judge_change
from ppairs_lens.evaluation.null_test import direction_effects, null_test, sign_accuracy
from ppairs_lens.interventions.ablation import Positions
from ppairs_lens.interventions.batched import judge_under_branches
from ppairs_lens.models.backend import resolve_hooks
from ppairs_lens.models.hook_points import PRESETS, Hook, Preset, check_hook_names, hook_points
from ppairs_lens.probes.features import as_acts, contrast_features, labels_to_targets, side_means

__all__ = ["apply_eraser", "batched_eraser_hooks", "distinct_relabellings", "erase",
           "eraser_null_test", "eraser_rows", "fit_leace", "judge_under_erasers", "leace_hooks",
           "leace_null_study", "n_distinct_nulls", "permuted_erasers"]


def _eraser_class():
    try:
        from concept_erasure import LeaceEraser
    except ImportError:
        raise DirectionError("LEACE needs the concept-erasure package: pip install "
                             "'ppairs-lens[erasure]' (or pip install concept-erasure)") from None
    return LeaceEraser


def fit_leace(acts: Float[Tensor, "n 2 d"], labels: Any):
    """A ``LeaceEraser`` fitted (float64) on one layer's contrast differences, centred by the
    side means, with the labels 1 / 2 as the concept."""
    x = as_acts(acts, dtype=torch.float64).cpu()
    if x.ndim != 3:
        raise DirectionError(f"fit_leace takes one layer's activations [n, 2, d], got shape "
                             f"{tuple(x.shape)}")
    diffs = contrast_features(x, *side_means(x))
    z = labels_to_targets(labels).to(torch.float64)
    return _eraser_class().fit(diffs, z)


def apply_eraser(eraser, x: Float[Tensor, "... d"]) -> Float[Tensor, "... d"]:
    """``eraser(x)`` in float32 or wider on ``x``'s device, cast back to its dtype."""
    work = torch.promote_types(x.dtype, torch.float32)
    right = eraser.proj_right.to(device=x.device, dtype=work)
    left = eraser.proj_left.to(device=x.device, dtype=work)
    xw = x.to(work)
    delta = xw - eraser.bias.to(device=x.device, dtype=work) if eraser.bias is not None else xw
    return (xw - (delta @ right.mH) @ left.mH).to(x.dtype)


def _hook_fn(eraser, name: str, positions: Positions) -> Callable:
    def hook(x: Tensor, hook=None) -> Tensor:
        if x.shape[-1] != eraser.proj_left.shape[0]:
            raise DirectionError(f"LEACE at {name}: activation has last dimension "
                                 f"{x.shape[-1]}, the eraser {eraser.proj_left.shape[0]}")
        if positions == "all":
            return apply_eraser(eraser, x)
        out = x.clone()
        out[:, -1] = apply_eraser(eraser, x[:, -1])
        return out

    return hook


def leace_hooks(bridge, eraser, preset: Preset | str | Sequence[str] = "paper",
                positions: Positions = "all") -> list[Hook]:
    """Forward hooks applying ``eraser`` at every hook point of ``preset`` (a preset, hook names
    or one name), at all positions or each row's last."""
    if positions not in ("all", "last"):
        raise ValueError(f"positions must be 'all' or 'last', got {positions!r}")
    points = [preset] if isinstance(preset, str) and preset not in PRESETS else preset
    names = hook_points(points, bridge.cfg.n_layers)
    check_hook_names(bridge, names)
    return resolve_hooks(bridge, [(n, _hook_fn(eraser, n, positions)) for n in names])


@contextmanager
def erase(bridge, eraser, preset: Preset | str | Sequence[str] = "paper",
          positions: Positions = "all") -> Iterator:
    """``with erase(bridge, fit_leace(acts, labels), "blocks.3.hook_resid_post"): ...``;
    hooks removed on exit."""
    with bridge.hooks(fwd_hooks=leace_hooks(bridge, eraser, preset, positions)):
        yield bridge


#: Up to this many distinct relabellings they are all listed and drawn without replacement;
#: above it, permutations are drawn and a repeat (or the real labels) is drawn again.
ENUMERATE_MAX = 100_000


def _two_classes(labels: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(y, mask)``: the labels and where the first of their two classes is."""
    y = np.asarray(labels)
    classes = np.unique(y)
    if y.ndim != 1 or len(classes) != 2:
        raise SettingError(f"a permuted-label null needs labels of exactly two classes, got "
                           f"{len(classes)} ({classes[:5].tolist()}) over shape {y.shape}")
    return y, y == classes[0]


def n_distinct_nulls(labels: Any) -> int:
    """How many distinct permuted-label erasers exist: relabellings with the same class
    counts, a balanced one and its complement counted once (one eraser), the real left out."""
    y, mask = _two_classes(labels)
    n, k = len(y), int(mask.sum())
    return math.comb(n, k) // (2 if 2 * k == n else 1) - 1


def _key(mask: np.ndarray, balanced: bool) -> bytes:
    """One key per eraser: a balanced relabelling and its complement share it."""
    return min(mask.tobytes(), (~mask).tobytes()) if balanced else mask.tobytes()


def distinct_relabellings(labels: Any, n_perm: int, seed: int = 0) -> list[np.ndarray]:
    """``n_perm`` permutations of ``labels``, each a different eraser and none the real one;
    refused when fewer exist: a p-value over repeats would claim a resolution it lacks."""
    if n_perm < 1:
        raise DirectionError(f"n_perm must be at least 1, got {n_perm}")
    y, mask = _two_classes(labels)
    n, k = len(y), int(mask.sum())
    balanced = 2 * k == n
    available = n_distinct_nulls(labels)
    if available < n_perm:
        raise SettingError(
            f"only {available} distinct permuted-label erasers exist for {n} pairs ({k} of one "
            f"label, {n - k} of the other; a relabelling and its complement give the same "
            f"eraser, and the real labels are no null), {n_perm} were asked: the smallest p "
            f"would be 1/{available + 1}; use more training pairs or n_perm <= {available}")
    first, second = y[mask][0], y[~mask][0]
    real = _key(mask, balanced)
    rng = np.random.default_rng(seed)
    if available + 1 <= ENUMERATE_MAX:  # few: list them all, draw without replacement
        masks = []
        for ones in itertools.combinations(range(n), k):
            m = np.zeros(n, dtype=bool)
            m[list(ones)] = True
            if (not balanced or m[0]) and _key(m, balanced) != real:
                masks.append(m)
        picked = [masks[i] for i in rng.permutation(len(masks))[:n_perm]]
    else:  # many: draw permutations, skipping a repeat or the real labels
        seen, picked = {real}, []
        while len(picked) < n_perm:
            m = mask[rng.permutation(n)]
            if _key(m, balanced) not in seen:
                seen.add(_key(m, balanced))
                picked.append(m)
    return [np.where(m, first, second) for m in picked]


def permuted_erasers(acts: Float[Tensor, "n 2 d"], labels: Any, n_perm: int, seed: int = 0
                     ) -> list:
    """``n_perm`` LEACE erasers fitted on one layer's ``acts`` with the labels permuted
    (seeded, :func:`distinct_relabellings`)."""
    return [fit_leace(acts, yp) for yp in distinct_relabellings(labels, n_perm, seed)]


def eraser_rows(erasers: Sequence, d: int) -> Float[Tensor, "D 3 d"]:
    """Each rank-1 eraser ``x -> x - ((x - b) . v) u`` as a row ``(u, v, b)`` (float32 or
    wider); ``None`` is the identity (zeros). A concept of more than one dimension is refused."""
    rows = torch.zeros(len(erasers), 3, d, dtype=torch.float64)
    for j, e in enumerate(erasers):
        if e is None:
            continue
        left, right = e.proj_left, e.proj_right       # [d, k], [k, d]
        if left.shape != (d, 1) or right.shape != (1, d):
            raise DirectionError(f"eraser {j}: a rank-1 LEACE eraser of dimension {d} was "
                                 f"expected, got projections {tuple(left.shape)} and "
                                 f"{tuple(right.shape)} (labels of more than two classes?)")
        rows[j, 0], rows[j, 1] = left[:, 0].double(), right[0].double()
        if e.bias is not None:
            rows[j, 2] = e.bias.double()
    return rows


def _position_hook(rows: Tensor, name: str) -> Callable:
    def hook(x: Float[Tensor, "batch pos d_model"], hook=None) -> Tensor:
        if x.ndim != 3 or x.shape[1:] != (rows.shape[0], rows.shape[2]):
            raise DirectionError(f"batched erasure at {name}: expected [batch, {rows.shape[0]}, "
                                 f"{rows.shape[2]}] (one position per eraser), got "
                                 f"{tuple(x.shape)}")
        work = torch.promote_types(x.dtype, torch.float32)
        u, v, b = rows.to(device=x.device, dtype=work).unbind(1)
        xw = x.to(work)
        return (xw - ((xw - b) * v).sum(-1, keepdim=True) * u).to(x.dtype)

    return hook


def batched_eraser_hooks(bridge, rows: Float[Tensor, "D 3 d"],
                         preset: Preset | Sequence[str] = "paper") -> list[Hook]:
    """``final_hooks`` applying eraser row ``j`` (:func:`eraser_rows`) at branch position ``j``
    at every hook point of ``preset`` (a preset, hook names or one name)."""
    if rows.shape[-1] != bridge.cfg.d_model:
        raise DirectionError(f"erasers have dimension {rows.shape[-1]}, the model's d_model is "
                             f"{bridge.cfg.d_model}")
    points = [preset] if isinstance(preset, str) and preset not in PRESETS else preset
    names = hook_points(points, bridge.cfg.n_layers)
    check_hook_names(bridge, names)
    return resolve_hooks(bridge, [(n, _position_hook(rows, n)) for n in names])


def judge_under_erasers(bridge, dataset: Dataset, template: Template | None, erasers: Sequence,
                        preset: Preset | Sequence[str] = "paper", *,
                        settings: HarvestSettings = HarvestSettings(),
                        per_pass: int | None = None) -> dict[str, np.ndarray | None]:
    """:func:`ppairs_lens.interventions.batched.judge_under_directions` with eraser ``j`` at
    branch ``j``, all in one pass; ``None`` in ``erasers`` is the unablated judge."""
    rows = eraser_rows(erasers, bridge.cfg.d_model)
    return judge_under_branches(bridge, dataset, template, rows,
                                lambda blk: batched_eraser_hooks(bridge, blk, preset),
                                settings=settings, per_pass=per_pass)


def eraser_null_test(z: Float[np.ndarray, "n D"], y: Float[np.ndarray, "n"],
                     groups: Sequence[Hashable], *, n_boot: int, seed: int = 0,
                     tol: float = 0.0, alpha: float = 0.05) -> dict[str, Any]:
    """The real eraser against the permuted-label ones (module doc). ``z``'s columns: no
    erasure, the real eraser, the ``K`` permuted ones; ``y``: 1 where item 1 is gold."""
    z = np.asarray(z, dtype=float)
    if z.ndim != 2 or z.shape[1] < 3:
        raise ValueError(f"z must be [n, 2 + K] (baseline, real, K >= 1 nulls), got {z.shape}")
    eff, margin = direction_effects(z[:, 0], z, y)
    acc = np.array([sign_accuracy(z[:, j], y, tol) for j in range(z.shape[1])])
    t = null_test(eff[1], eff[2:])
    null_eff, null_acc = eff[2:], acc[2:] - acc[0]
    return {"effect": float(eff[1]), "margin": float(margin[1]),
            "accuracy": float(acc[1]), "accuracy_delta": float(acc[1] - acc[0]),
            "null_effect_median": float(np.median(null_eff)),
            "null_effect_p95": float(np.quantile(null_eff, 0.95)),
            "null_margin_median": float(np.median(margin[2:])),
            "null_accuracy_delta_median": float(np.median(null_acc)),
            "rank": t["rank"], "n_null": t["n_null"], "p": t["p"],
            "p_resolution": 1.0 / (t["n_null"] + 1),
            **judge_change(y, z[:, 0], z[:, 1], groups, n_boot=n_boot, seed=seed, tol=tol),
            "verdict": ablation_changes_verdict([t["p"]], t["n_null"], alpha,
                                                ["LEACE"]).as_dict()}


def leace_null_study(bridge, dataset: Dataset, template: Template | None,
                     acts_train: Float[Tensor, "n 2 d"], labels_train: Any, *,
                     preset: Preset | Sequence[str] = "paper", n_perm: int = 39, seed: int = 0,
                     n_boot: int, tol: float = 0.0,
                     settings: HarvestSettings = HarvestSettings()) -> dict[str, Any]:
    """:func:`eraser_null_test` of LEACE fitted on one read-out's training pairs against
    ``n_perm`` permuted-label erasers, the judge answering ``dataset``'s held-out records, with
    ``z``. ``n_perm=39``: the smallest p, 1/40, is below 0.05 (with 19 it could only equal it)."""
    erasers = [None, fit_leace(acts_train, labels_train),
               *permuted_erasers(acts_train, labels_train, n_perm, seed)]
    # ties have no right answer: dropped, as every analysis drops them
    dataset = replace(dataset, records=[r for r, y in zip(dataset.records, dataset.labels())
                                        if y != TIE])
    out = judge_under_erasers(bridge, dataset, template, erasers, preset, settings=settings)
    y = (np.asarray(dataset.labels()) == ITEM1).astype(int)
    return {**eraser_null_test(out["z"], y, list(dataset.group_ids()), n_boot=n_boot,
                               seed=seed, tol=tol), "z": out["z"],
            "n_null_available": n_distinct_nulls(labels_train)}
