"""Cross-dataset transfer and cosine similarity of probe directions (paper Table 1, Fig. 5).

The claim under test: unsupervised (PCA) probes fitted on different datasets find nearly the
same direction and transfer across tasks, while supervised probes' directions are nearly
orthogonal yet still transfer fairly well.

For every store (all of one model, same read-outs): drop ties, split by context with
:func:`analyses.layer_sweep.split_store`, and fit every probe kind on the held-in part at
every read-out at once (:func:`ppairs_lens.probes.sweep.fit_sweep`; identical maths to a one-layer
fit). Then, at the read-out ``cfg.layer`` (default -2: the last block's ``resid_post``; -1 is
the final norm's output, any index works):

1. **Transfer** (``transfer.csv``, ``transfer.{png,svg}``): the probe fitted on dataset A is
   scored on the held-out part of every dataset B (diagonal = in distribution), with a 95%
   bootstrap interval that resamples whole contexts. One heatmap panel per probe kind, rows =
   training dataset, columns = test dataset (the layout of the paper's Table 1).

   *Centring.* A probe sees ``(x0 - mu_pos) - (x1 - mu_neg)``; the side means remove what
   only says "this prompt ends in Choice 1 / 2". Those offsets differ between datasets (other
   template text, other item lengths), so a probe applied to B with A's means adds the
   constant ``(mu_pos_B - mu_neg_B) - (mu_pos_A - mu_neg_A)`` to every difference, a bias that
   can push every pair to one side. Two variants are reported (column ``center``):

   * ``"target"`` (the default and the headline, ``TransferConfig.center_target``): B's pairs
     are centred by *B's own* side means, as CCS and PPairS do - each dataset's contrast pairs
     are normalised with that dataset's means before probing. The means come from B's
     held-in part (never from the test pairs being scored) and use no labels, so this is what
     a user with unlabelled data from the target task can do. On the diagonal it is exactly
     the in-distribution probe (training means = B's held-in means).
   * ``"train"``: the probe as fitted, training means and all - the honest "ship the probe
     unchanged" default of :mod:`ppairs_lens.probes.features`.

2. **Cosine similarity** (``cosine.csv``, ``cosine.{png,svg}``,
   ``cosine_distribution.{png,svg}``): signed and absolute cosine between the unit directions
   of all (dataset, kind) pairs. Directions are oriented by their training labels (positive
   projection = item 1 preferred), so the *sign* is meaningful: -1 means the same axis read
   the other way round. As a null, the |cos| of ``cfg.n_random`` pairs of random unit vectors
   in the same dimension (mean ~ sqrt(2 / (pi d)); 0.033 for d = 576) is drawn on the same
   axes and its 95th percentile reported. As a ceiling, each kind is also fitted on two
   disjoint halves (by context) of each dataset's held-in pairs (``relation="split_half"``):
   a kind whose directions do not even agree with themselves on one task (a logistic
   regression with fewer pairs than dimensions fits mostly noise directions) cannot show
   agreement between tasks. Caveat: the residual stream is anisotropic, so two
   *unrelated* probe directions can agree more than isotropic random vectors do; the null says
   whether a cosine is distinguishable from "no relation in an isotropic space", not more.

3. **Per layer** (``layer_cosine.csv``, ``layer_cosine.{png,svg}``): per dataset, the cosine
   between a kind's directions at adjacent read-outs (``layer`` = l compares l with l + 1),
   between kinds at the same read-out, and between datasets at the same read-out (per kind),
   so a reader sees where the direction settles. The last step (last block -> final norm)
   compares directions in two different bases (the norm rescales each coordinate).

Everything regenerates from stores alone, no model: ``python -m analyses.cross_dataset
STORE [STORE ...] --out DIR``. Each output folder gets ``transfer.config.json`` and
``transfer_summary.json``.
"""

from __future__ import annotations

import argparse
import math
import sys
import warnings
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path

import numpy as np
from scipy.special import gammaln

from analyses.layer_sweep import StoreSplit, split_store
from ppairs_lens.errors import PPairsError, ProbeError, StoreError
from ppairs_lens.io.outputs import save_config, save_figure, write_csv, write_json
from ppairs_lens.evaluation.metrics import evaluate
from ppairs_lens.io.plotting import caption, color, label, style
from ppairs_lens.probes.estimators import PROBE_KINDS
from ppairs_lens.evaluation.splits import train_test_split_pairs
from ppairs_lens.activations.store import ActivationStore
from ppairs_lens.probes.sweep import SweepProbes, fit_sweep

__all__ = ["TransferConfig", "FittedStore", "run_transfer", "check_compatible", "fit_store",
           "transfer_rows", "cosine_rows", "layer_cosine_rows", "random_abs_cos",
           "random_reference", "summarize", "cli", "main"]

CENTERINGS = ("target", "train")
METRICS = ("accuracy", "f1", "auroc")
#: Colours of the kind-vs-kind comparisons in the per-layer figure.
PAIR_COLORS = {"supervised~pca": "#9467bd", "supervised~mass_mean": "#17becf",
               "pca~mass_mean": "#8c564b"}


@dataclass
class TransferConfig:
    """What a transfer / cosine analysis ran on; saved beside its results."""

    stores: list[str]
    layer: int = -2              # read-out index: -2 last block's resid_post, -1 final norm
    kinds: tuple[str, ...] = PROBE_KINDS
    test_size: float = 0.3
    split_by: str = "context"    # "context" | "pair" | "item" (as in layer_sweep)
    seed: int = 0
    C: float = 1.0
    n_boot: int = 300
    metric: str = "accuracy"     # plotted / summarised metric: accuracy | f1 (| auroc)
    center_target: str = "target"  # headline centring of B when a probe from A is applied to B
    n_random: int = 10_000       # random unit-vector pairs for the |cos| null

    def validate(self) -> None:
        if self.metric not in METRICS:
            raise ProbeError(f"metric must be one of {METRICS}, got {self.metric!r}")
        if self.center_target not in CENTERINGS:
            raise ProbeError(f"center_target must be 'target' (each dataset centred by its own "
                             f"side means, as in the paper) or 'train' (the probe's training "
                             f"means), got {self.center_target!r}")
        bad = [k for k in self.kinds if k not in PROBE_KINDS]
        if bad or not self.kinds:
            raise ProbeError(f"unknown probe kind(s) {bad}; choose from {PROBE_KINDS}")
        if self.n_random < 100:
            raise ProbeError(f"n_random must be at least 100, got {self.n_random}")


@dataclass
class FittedStore:
    """One store's split and its probes at every read-out."""

    name: str
    split: StoreSplit
    sweep: SweepProbes
    hook_names: list[str]
    #: kind -> (direction on one half, direction on the other half) of the held-in pairs at
    #: ``cfg.layer``: the self-agreement reference (empty when the halves cannot be fitted).
    halves: dict[str, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)


# --------------------------------------------------------------------------------------------
# Inputs
# --------------------------------------------------------------------------------------------

def check_compatible(stores: list[ActivationStore]) -> None:
    """Refuse stores that are not of one model, one d_model and the same read-outs."""
    if len(stores) < 2:
        raise StoreError(f"cross-dataset transfer needs at least 2 stores, got {len(stores)}")
    first = stores[0]
    for s in stores[1:]:
        for key, what in (("model", "model"), ("d_model", "d_model"),
                          ("hook_names", "read-outs (hook_names)")):
            if s.meta.get(key) != first.meta.get(key):
                a, b = first.meta.get(key), s.meta.get(key)
                if key == "hook_names":
                    a, b = f"{len(a or [])} read-outs", f"{len(b or [])} read-outs"
                raise StoreError(
                    f"all stores must come from the same model with the same d_model and "
                    f"read-outs: {first.path} has {what} {a!r}, {s.path} has {b!r}. Directions "
                    f"and probes of different models live in different spaces")


def _unique_names(stores: list[ActivationStore]) -> list[str]:
    """Dataset names; the store folder name where two stores hold the same dataset name."""
    names = [s.meta["dataset"] for s in stores]
    return [s.path.name if names.count(n) > 1 else n for n, s in zip(names, stores)]


def _layer_index(layer: int, n_readouts: int) -> int:
    if not -n_readouts <= layer < n_readouts:
        raise StoreError(f"the stores have read-outs 0..{n_readouts - 1} (or -{n_readouts}..-1); "
                         f"layer {layer} is out of range")
    return layer % n_readouts


def fit_store(store: ActivationStore, cfg: TransferConfig, name: str | None = None
              ) -> FittedStore:
    """Split ``store`` (ties dropped, by context) and fit every kind at every read-out."""
    sp = split_store(store, test_size=cfg.test_size, split_by=cfg.split_by, seed=cfg.seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)   # degenerate read-outs: reported as NaN
        probes = fit_sweep(sp.acts_train, sp.labels_train, cfg.kinds, C=cfg.C,
                           model_name=store.meta["model"])
    fitted = FittedStore(name or sp.name, sp, probes, store.hook_names)
    fitted.halves = _split_half_directions(store, sp, cfg)
    return fitted


def _split_half_directions(store: ActivationStore, sp: StoreSplit, cfg: TransferConfig
                           ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Directions fitted on two disjoint halves (by context) of the held-in pairs.

    Their cosine is how well one probe kind agrees with *itself* on the same task given half
    the data: the ceiling to read cross-dataset cosines against (a kind whose split-half
    |cos| is ~0 cannot show agreement between datasets, whatever the truth).
    """
    li = _layer_index(cfg.layer, store.n_readouts)
    test_ids = {p.get("pair_id") for p in sp.pairs_test}
    kept = [p for p in store.pairs() if p["label"] != 0]
    train_pairs = [p for p in kept if p.get("pair_id") not in test_ids]
    if len(train_pairs) != len(sp.labels_train) or None in test_ids:
        return {}                                   # no unique pair ids: cannot align
    by = "context" if cfg.split_by == "context" else "pair"
    try:
        h1, h2 = train_test_split_pairs([p["context_id"] for p in train_pairs], test_size=0.5,
                                        seed=cfg.seed + 1, by=by)
        dirs = []
        for h in (h1, h2):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", UserWarning)
                sw = fit_sweep(sp.acts_train[h][:, :, [li]], sp.labels_train[h], cfg.kinds,
                               C=cfg.C)
            dirs.append(sw.directions)
    except ProbeError:
        return {}
    return {k: (dirs[0][k][0].numpy(), dirs[1][k][0].numpy()) for k in cfg.kinds}


# --------------------------------------------------------------------------------------------
# Transfer
# --------------------------------------------------------------------------------------------

def _transfer_proba(src: FittedStore, dst: FittedStore, kind: str, li: int, center: str
                    ) -> np.ndarray | None:
    """P(item 1) of ``dst``'s test pairs under ``src``'s ``kind`` probe at read-out ``li``."""
    if bool(src.sweep.degenerate[kind][li]):
        return None
    probe = src.sweep.to_probe(kind, li)
    if center == "target":
        probe.mu_pos_ = dst.sweep.mu_pos[li].numpy().copy()
        probe.mu_neg_ = dst.sweep.mu_neg[li].numpy().copy()
    return probe.predict_proba(dst.split.acts_test[:, :, li])[:, 1]


def transfer_rows(fitted: list[FittedStore], cfg: TransferConfig) -> list[dict]:
    """(train, test, kind, center, metric) rows with value and 95% CI."""
    li = _layer_index(cfg.layer, len(fitted[0].hook_names))
    hook = fitted[0].hook_names[li]
    rows = []
    for src in fitted:
        for dst in fitted:
            groups = [p["context_id"] for p in dst.split.pairs_test]
            for kind in cfg.kinds:
                cache = None
                for center in CENTERINGS:
                    same = src is dst  # both centrings are the in-distribution probe
                    if same and cache is not None:
                        scores = cache
                    else:
                        p = _transfer_proba(src, dst, kind, li, center)
                        scores = (None if p is None else
                                  evaluate(dst.split.labels_test, p, groups=groups,
                                           n_boot=cfg.n_boot, seed=cfg.seed))
                        cache = scores
                    for metric in METRICS:
                        s = scores[metric] if scores else {"value": np.nan, "lo": np.nan,
                                                           "hi": np.nan}
                        rows.append({"train": src.name, "test": dst.name, "kind": kind,
                                     "center": center, "headline": center == cfg.center_target,
                                     "in_distribution": same, "metric": metric,
                                     "value": s["value"], "lo": s["lo"], "hi": s["hi"],
                                     "layer": li, "hook": hook,
                                     "n_train": len(src.split.labels_train),
                                     "n_test": len(dst.split.labels_test)})
    return rows


# --------------------------------------------------------------------------------------------
# Cosines
# --------------------------------------------------------------------------------------------

def random_abs_cos(d: int, n: int = 10_000, seed: int = 0) -> np.ndarray:
    """|cos| of ``n`` pairs of independent uniformly random unit vectors in ``R^d``."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((n, d))
    v = rng.standard_normal((n, d))
    return np.abs((u * v).sum(1) / (np.linalg.norm(u, axis=1) * np.linalg.norm(v, axis=1)))


def random_reference(d: int, n: int = 10_000, seed: int = 0) -> dict:
    """Summary of the random-direction null: mean (empirical and exact), 95th / 99th pct."""
    a = random_abs_cos(d, n, seed)
    # E|cos| = Gamma(d/2) / (sqrt(pi) Gamma((d+1)/2)) ~ sqrt(2 / (pi d))
    exact = math.exp(gammaln(d / 2) - gammaln((d + 1) / 2)) / math.sqrt(math.pi)
    return {"d": d, "n": n, "mean": float(a.mean()), "mean_exact": exact,
            "p95": float(np.quantile(a, 0.95)), "p99": float(np.quantile(a, 0.99)),
            "samples": a}


def _directions_at(fitted: list[FittedStore], kinds, li: int) -> tuple[list[tuple], np.ndarray]:
    keys = [(f.name, k) for f in fitted for k in kinds]
    mat = np.stack([f.sweep.directions[k][li].numpy() for f in fitted for k in kinds])
    return keys, mat


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine along the last axis (NaN where a vector is NaN / zero)."""
    with np.errstate(invalid="ignore", divide="ignore"):
        return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))


def cosine_matrix(fitted: list[FittedStore], cfg: TransferConfig
                  ) -> tuple[list[tuple], np.ndarray]:
    """Keys ``(dataset, kind)`` and their signed cosine matrix at ``cfg.layer``."""
    li = _layer_index(cfg.layer, len(fitted[0].hook_names))
    keys, mat = _directions_at(fitted, cfg.kinds, li)
    return keys, _cos(mat[:, None, :], mat[None, :, :])


def cosine_rows(fitted: list[FittedStore], cfg: TransferConfig) -> list[dict]:
    """One row per unordered pair of (dataset, kind) directions (self-pairs excluded)."""
    keys, cos = cosine_matrix(fitted, cfg)
    li = _layer_index(cfg.layer, len(fitted[0].hook_names))
    rows = []
    for i, j in combinations(range(len(keys)), 2):
        (da, ka), (db, kb) = keys[i], keys[j]
        relation = ("between_datasets" if ka == kb else
                    "between_kinds" if da == db else "other")
        rows.append({"dataset_a": da, "kind_a": ka, "dataset_b": db, "kind_b": kb,
                     "relation": relation, "cos": float(cos[i, j]),
                     "abs_cos": float(abs(cos[i, j])), "layer": li,
                     "hook": fitted[0].hook_names[li]})
    for f in fitted:
        for k, (a, b) in f.halves.items():
            c = float(_cos(a, b))
            rows.append({"dataset_a": f.name, "kind_a": k, "dataset_b": f.name, "kind_b": k,
                         "relation": "split_half", "cos": c, "abs_cos": abs(c), "layer": li,
                         "hook": fitted[0].hook_names[li]})
    return rows


def layer_cosine_rows(fitted: list[FittedStore], cfg: TransferConfig) -> list[dict]:
    """Per-layer cosines: adjacent read-outs, between kinds, between datasets.

    ``view="adjacent_layers"``: ``layer`` = l compares read-out l with l + 1 (one kind).
    ``view="between_kinds"``: ``kind`` = "a~b" at read-out ``layer`` (one dataset).
    ``view="between_datasets"``: ``dataset`` = "A~B" at read-out ``layer`` (one kind).
    """
    rows = []
    hooks = fitted[0].hook_names

    def add(view, dataset, kind, c):
        for l, v in enumerate(c):
            rows.append({"view": view, "dataset": dataset, "kind": kind, "layer": l,
                         "hook": hooks[l], "cos": float(v), "abs_cos": float(abs(v))})

    for f in fitted:
        for k in cfg.kinds:
            d = f.sweep.directions[k].numpy()
            add("adjacent_layers", f.name, k, _cos(d[:-1], d[1:]))
        for ka, kb in combinations(cfg.kinds, 2):
            add("between_kinds", f.name, f"{ka}~{kb}",
                _cos(f.sweep.directions[ka].numpy(), f.sweep.directions[kb].numpy()))
    for fa, fb in combinations(fitted, 2):
        for k in cfg.kinds:
            add("between_datasets", f"{fa.name}~{fb.name}", k,
                _cos(fa.sweep.directions[k].numpy(), fb.sweep.directions[k].numpy()))
    return rows


# --------------------------------------------------------------------------------------------
# Summary
# --------------------------------------------------------------------------------------------

def _nanmean(xs) -> float:
    xs = [x for x in xs if x == x]
    return float(np.mean(xs)) if xs else float("nan")


def summarize(t_rows: list[dict], c_rows: list[dict], ref: dict, cfg: TransferConfig) -> dict:
    """Per kind: mean |cos| between datasets vs the null, mean on/off-diagonal transfer."""
    out = {}
    for k in cfg.kinds:
        between = [r["abs_cos"] for r in c_rows if r["relation"] == "between_datasets"
                   and r["kind_a"] == k]
        signed = [r["cos"] for r in c_rows if r["relation"] == "between_datasets"
                  and r["kind_a"] == k]
        tr = [r for r in t_rows if r["kind"] == k and r["metric"] == cfg.metric]
        halves = [r["abs_cos"] for r in c_rows if r["relation"] == "split_half"
                  and r["kind_a"] == k]
        entry = {"mean_abs_cos": _nanmean(between), "mean_cos": _nanmean(signed),
                 "split_half_abs_cos": _nanmean(halves),
                 "frac_abs_cos_above_0.7": (float(np.mean(np.array(between) > 0.7))
                                            if between else float("nan")),
                 "frac_abs_cos_above_null_p95": (float(np.mean(np.array(between) > ref["p95"]))
                                                 if between else float("nan")),
                 "random_mean_abs_cos": ref["mean"], "random_p95": ref["p95"],
                 "random_p99": ref["p99"],
                 "in_distribution": _nanmean(r["value"] for r in tr if r["in_distribution"]
                                             and r["center"] == cfg.center_target)}
        for c in CENTERINGS:
            entry[f"off_diagonal_{c}"] = _nanmean(r["value"] for r in tr
                                                  if not r["in_distribution"] and r["center"] == c)
        entry["off_diagonal"] = entry[f"off_diagonal_{cfg.center_target}"]
        out[k] = entry
    return out


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------

def _short(name: str, n: int = 16) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def plot_transfer(rows: list[dict], names: list[str], cfg: TransferConfig, model: str, hook: str):
    import matplotlib.pyplot as plt

    centers = [cfg.center_target] + [c for c in CENTERINGS if c != cfg.center_target]
    nd, nk = len(names), len(cfg.kinds)
    cell = max(0.55, min(1.0, 4.0 / nd))
    with style():
        fig, axes = plt.subplots(2, nk, figsize=(nk * (nd * cell + 0.6) + 2.6,
                                                 2 * (nd * cell + 1.0) + 0.6),
                                 squeeze=False, layout="constrained")
        im = None
        for r_i, center in enumerate(centers):
            for c_i, kind in enumerate(cfg.kinds):
                ax = axes[r_i, c_i]
                val = np.full((nd, nd), np.nan)
                lo, hi = val.copy(), val.copy()
                for r in rows:
                    if r["kind"] == kind and r["center"] == center and r["metric"] == cfg.metric:
                        i, j = names.index(r["train"]), names.index(r["test"])
                        val[i, j], lo[i, j], hi[i, j] = r["value"], r["lo"], r["hi"]
                im = ax.imshow(val, cmap="RdBu", vmin=0.0, vmax=1.0)
                for i in range(nd):
                    for j in range(nd):
                        if np.isnan(val[i, j]):
                            txt = "n/a"
                        else:
                            txt = f"{val[i, j]:.2f}\n[{lo[i, j]:.2f},{hi[i, j]:.2f}]"
                        dark = not np.isnan(val[i, j]) and abs(val[i, j] - 0.5) > 0.3
                        ax.text(j, i, txt, ha="center", va="center", fontsize=6.5,
                                color="white" if dark else "black",
                                fontweight="bold" if i == j else "normal")
                ax.set_xticks(range(nd), [_short(n) for n in names] if r_i == 1 else [],
                              rotation=35, ha="right")
                ax.set_yticks(range(nd), [_short(n) for n in names] if c_i == 0 else [])
                ax.grid(False)
                if r_i == 1:
                    ax.set_xlabel("test dataset")
                if c_i == 0:
                    how = ("target centred by\nits own side means" if center == "target"
                           else "target centred by the\nprobe's training means")
                    if center == cfg.center_target:
                        how = "headline: " + how
                    ax.set_ylabel(f"{how}\n\ntrain dataset")
                if r_i == 0:
                    ax.set_title(label(kind))
        fig.colorbar(im, ax=axes, shrink=0.6, label=f"held-out {cfg.metric}")
        fig.suptitle(f"Cross-dataset transfer — {model}, read-out {hook}")
        caption(fig, f"Rows: dataset the probe was fitted on; columns: dataset it is scored on "
                     f"(held-out pairs; diagonal = in distribution, bold). 95% bootstrap CIs "
                     f"by context ({cfg.n_boot} resamples); split by {cfg.split_by}, test "
                     f"fraction {cfg.test_size}, seed {cfg.seed}. Chance = 0.5 (white).")
    return fig


def plot_cosine(keys: list[tuple], cos: np.ndarray, cfg: TransferConfig, model: str, hook: str,
                ref: dict):
    import matplotlib.pyplot as plt

    n = len(keys)
    ticks = [f"{_short(d, 14)} · {k}" for d, k in keys]
    size = max(3.2, 0.42 * n + 1.8)
    with style():
        fig, axes = plt.subplots(1, 2, figsize=(2 * size + 1.2, size))
        for ax, data, cmap, vmin, title in (
                (axes[0], cos, "RdBu_r", -1.0, "signed cosine"),
                (axes[1], np.abs(cos), "viridis", 0.0, "|cosine|")):
            im = ax.imshow(data, cmap=cmap, vmin=vmin, vmax=1.0)
            if n <= 20:
                for i in range(n):
                    for j in range(n):
                        v = data[i, j]
                        light = (abs(v) > 0.6) if cmap == "RdBu_r" else (v < 0.6)
                        ax.text(j, i, "" if np.isnan(v) else f"{v:.2f}", ha="center",
                                va="center", fontsize=5.5 if n > 12 else 6.5,
                                color="white" if light else "black")
            ax.set_xticks(range(n), ticks, rotation=60, ha="right", fontsize=6.5)
            ax.set_yticks(range(n), ticks, fontsize=6.5)
            ax.grid(False)
            # separate the datasets' blocks
            nk = len(cfg.kinds)
            for b in range(nk, n, nk):
                ax.axhline(b - 0.5, color="w", lw=1.5)
                ax.axvline(b - 0.5, color="w", lw=1.5)
            ax.set_title(title)
            fig.colorbar(im, ax=ax, shrink=0.75)
        fig.suptitle(f"Cosine similarity of probe directions — {model}, read-out {hook}", y=1.0)
        caption(fig, f"Directions fitted on each dataset's held-in pairs, oriented so a positive "
                     f"projection means item 1 preferred. Random unit vectors in d={ref['d']}: "
                     f"mean |cos| {ref['mean']:.3f}, 95th pct {ref['p95']:.3f}, 99th pct "
                     f"{ref['p99']:.3f} ({ref['n']} pairs).")
        fig.tight_layout()
    return fig


def plot_cosine_distribution(c_rows: list[dict], cfg: TransferConfig, model: str, hook: str,
                             ref: dict):
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(cfg.seed)
    pairs = [f"{a}~{b}" for a, b in combinations(cfg.kinds, 2)]
    groups = [("between datasets (same probe kind)",
               [(k, label(k).replace(" (", "\n("), color(k),
                 [r["abs_cos"] for r in c_rows if r["relation"] == "between_datasets"
                  and r["kind_a"] == k]) for k in cfg.kinds])]
    if pairs:
        groups.append(("between probe kinds (same dataset)",
                       [(p, p.replace("~", " vs\n"), PAIR_COLORS.get(p, "#7f7f7f"),
                         [r["abs_cos"] for r in c_rows if r["relation"] == "between_kinds"
                          and f"{r['kind_a']}~{r['kind_b']}" == p]) for p in pairs]))
    with style():
        fig, axes = plt.subplots(1, len(groups), figsize=(4.2 * len(groups), 3.4),
                                 squeeze=False, sharey=True)
        for ax, (title, series) in zip(axes[0], groups):
            for x, (_, name, col, vals) in enumerate(series):
                vals = np.asarray([v for v in vals if v == v])
                if len(vals):
                    if len(vals) >= 5:
                        ax.boxplot([vals], positions=[x], widths=0.5, showfliers=False,
                                   medianprops={"color": col}, boxprops={"color": col},
                                   whiskerprops={"color": col}, capprops={"color": col})
                    ax.scatter(x + rng.uniform(-0.15, 0.15, len(vals)), vals, s=18, color=col,
                               alpha=0.85, zorder=3, edgecolor="white", lw=0.4)
                    ax.text(x, 1.04, f"mean {vals.mean():.2f}", ha="center", fontsize=7,
                            color=col)
            if title.startswith("between datasets"):
                for x, (k, *_rest) in enumerate(series):
                    hv = [r["abs_cos"] for r in c_rows if r["relation"] == "split_half"
                          and r["kind_a"] == k]
                    if hv:
                        ax.scatter(np.full(len(hv), x + 0.3), hv, s=22, marker="D",
                                   facecolor="none", edgecolor=color(k), lw=1, zorder=3,
                                   label="split-half, same dataset" if x == 0 else None)
            xr = len(series)
            parts = ax.violinplot([ref["samples"]], positions=[xr], widths=0.7,
                                  showextrema=False)
            for b in parts["bodies"]:
                b.set_facecolor(color("random"))
                b.set_alpha(0.6)
            ax.axhline(ref["p95"], color=color("random"), ls="--", lw=1,
                       label=f"random 95th pct ({ref['p95']:.3f})")
            ax.axhline(0.7, color="k", ls=":", lw=0.8, alpha=0.6, label="0.7 (paper's bar)")
            ax.set_xticks(range(xr + 1), [s[1] for s in series] + [f"random\nd={ref['d']}"],
                          fontsize=7.5)
            ax.set_ylim(0, 1.1)
            ax.set_ylabel("|cosine|")
            ax.set_title(title)
        handles, names = axes[0, 0].get_legend_handles_labels()
        axes[0, -1].legend(handles, names, loc="center right", fontsize=7)
        fig.suptitle(f"Agreement of probe directions — {model}, read-out {hook}", y=1.02)
        caption(fig, f"Each dot: one pair of directions. Hollow diamonds: the same kind fitted on "
                     f"two halves (by context) of one dataset's held-in pairs, its "
                     f"self-agreement ceiling. Grey violin: |cos| of {ref['n']} pairs "
                     f"of random unit vectors in d={ref['d']} (mean {ref['mean']:.3f}, 95th pct "
                     f"{ref['p95']:.3f}, 99th pct {ref['p99']:.3f}). An anisotropic residual "
                     f"stream can make unrelated directions agree more than this isotropic null.")
        fig.tight_layout()
    return fig


def plot_layer_cosine(rows: list[dict], names: list[str], cfg: TransferConfig, model: str,
                      ref: dict, n_readouts: int):
    import matplotlib.pyplot as plt

    li = _layer_index(cfg.layer, n_readouts)
    nd, nk = len(names), len(cfg.kinds)
    ncol = max(nd, nk)
    with style():
        fig, axes = plt.subplots(3, ncol, figsize=(3.0 * ncol, 7.6), squeeze=False, sharey=True)

        def series(view, dataset=None, kind=None):
            rs = [r for r in rows if r["view"] == view and (dataset is None or
                  r["dataset"] == dataset) and (kind is None or r["kind"] == kind)]
            return np.array([r["layer"] for r in rs]), np.array([r["cos"] for r in rs])

        for c, ds in enumerate(names):
            ax = axes[0, c]
            for k in cfg.kinds:
                x, y = series("adjacent_layers", ds, k)
                ax.plot(x + 0.5, y, color=color(k), label=label(k), lw=1.3)
            ax.set_title(f"{_short(ds, 24)}: layer l vs l+1")
            ax = axes[1, c]
            for ka, kb in combinations(cfg.kinds, 2):
                p = f"{ka}~{kb}"
                x, y = series("between_kinds", ds, p)
                ax.plot(x, y, color=PAIR_COLORS.get(p, "#7f7f7f"), lw=1.3,
                        label=f"{ka} vs {kb}")
            ax.set_title(f"{_short(ds, 24)}: between kinds")
        for c, k in enumerate(cfg.kinds):
            ax = axes[2, c]
            ys = []
            for a, b in combinations(names, 2):
                x, y = series("between_datasets", f"{a}~{b}", k)
                ax.plot(x, y, color=color(k), lw=0.7, alpha=0.45)
                ys.append(y)
            if ys:
                ax.plot(x, np.nanmean(np.abs(np.stack(ys)), axis=0), color=color(k), lw=2,
                        label="mean |cos|")
            ax.set_title(f"{label(k)}: between datasets")
        for r_i in range(3):
            used = nd if r_i < 2 else nk
            for c in range(ncol):
                ax = axes[r_i, c]
                if c >= used:
                    ax.set_visible(False)
                    continue
                ax.axhspan(-ref["p95"], ref["p95"], color=color("random"), alpha=0.25, lw=0)
                ax.axhline(0, color="k", lw=0.5, alpha=0.5)
                ax.axvline(li, color="k", ls=":", lw=0.8, alpha=0.7)
                ax.set_xlabel("read-out (last = final norm)")
            axes[r_i, 0].set_ylabel("cosine")
            axes[r_i, 0].legend(loc="lower left", fontsize=6.5)
        axes[0, 0].set_ylim(-1.05, 1.05)
        fig.suptitle(f"Where the probe directions settle — {model}", y=1.0)
        caption(fig, f"Top: cosine of a kind's directions at adjacent read-outs (plotted "
                     f"between them); middle: between probe kinds at each read-out; bottom: "
                     f"between datasets (thin: each pair, signed; thick: mean |cos|). Grey "
                     f"band: ±95th pct of |cos| of random unit vectors (d={ref['d']}, "
                     f"{ref['p95']:.3f}). Dotted: the read-out used for transfer "
                     f"({cfg.layer}). The last step compares directions before and after the "
                     f"final norm, i.e. in two bases.")
        fig.tight_layout()
    return fig


# --------------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------------

def run_transfer(stores: list[ActivationStore], out: str | Path,
                 cfg: TransferConfig | None = None) -> dict:
    """Transfer matrix, cosine tables and per-layer cosines; tables and figures into ``out``.

    Returns ``{"transfer", "cosine", "layer_cosine"}`` (lists of rows, as in the CSVs),
    ``"random"`` (the null's summary), ``"summary"`` (per kind, see :func:`summarize`),
    ``"names"`` and ``"hook"``.
    """
    cfg = cfg or TransferConfig(stores=[str(s.path) for s in stores])
    cfg.validate()
    check_compatible(stores)
    n_readouts = stores[0].n_readouts
    li = _layer_index(cfg.layer, n_readouts)
    hook = stores[0].hook_names[li]
    model = stores[0].meta["model"]
    names = _unique_names(stores)
    fitted = [fit_store(s, cfg, n) for s, n in zip(stores, names)]

    t_rows = transfer_rows(fitted, cfg)
    c_rows = cosine_rows(fitted, cfg)
    l_rows = layer_cosine_rows(fitted, cfg)
    ref = random_reference(stores[0].d_model, cfg.n_random, cfg.seed)
    summary = summarize(t_rows, c_rows, ref, cfg)
    ref_public = {k: v for k, v in ref.items() if k != "samples"}

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    write_csv(out / "transfer.csv", t_rows)
    write_csv(out / "cosine.csv", c_rows)
    write_csv(out / "layer_cosine.csv", l_rows)
    write_json(out / "transfer_summary.json",
               {"model": model, "layer": li, "hook": hook, "datasets": names,
                "metric": cfg.metric, "center_target": cfg.center_target,
                "random_reference": ref_public, "per_kind": summary})
    save_config(out, "transfer", cfg)
    import matplotlib.pyplot as plt

    keys, cos = cosine_matrix(fitted, cfg)
    for name, fig in (
            ("transfer", plot_transfer(t_rows, names, cfg, model, hook)),
            ("cosine", plot_cosine(keys, cos, cfg, model, hook, ref)),
            ("cosine_distribution", plot_cosine_distribution(c_rows, cfg, model, hook, ref)),
            ("layer_cosine", plot_layer_cosine(l_rows, names, cfg, model, ref, n_readouts))):
        save_figure(fig, out, name)
        plt.close(fig)
    return {"transfer": t_rows, "cosine": c_rows, "layer_cosine": l_rows, "random": ref_public,
            "summary": summary, "names": names, "hook": hook}


def print_summary(result: dict, cfg: TransferConfig) -> None:
    ref = result["random"]
    print(f"read-out {result['hook']}; random unit vectors in d={ref['d']}: mean |cos| "
          f"{ref['mean']:.3f} (exact {ref['mean_exact']:.3f}), 95th pct {ref['p95']:.3f}, "
          f"99th pct {ref['p99']:.3f}")
    for k, s in result["summary"].items():
        print(f"{k:10s} mean |cos| between datasets {s['mean_abs_cos']:.3f} "
              f"(random {s['random_mean_abs_cos']:.3f}, 95th pct {s['random_p95']:.3f}; "
              f"split-half same dataset {s['split_half_abs_cos']:.3f}); "
              f"{cfg.metric}: in-distribution {s['in_distribution']:.3f}, off-diagonal "
              f"{s['off_diagonal']:.3f} (target-centred {s['off_diagonal_target']:.3f}, "
              f"train-centred {s['off_diagonal_train']:.3f})")


def cli(args) -> None:
    from ppairs_lens.models.loading import load_model
    from ppairs_lens.activations.pipeline import ensure_store
    from ppairs_lens.data.specs import load_dataset_spec

    specs = args.datasets or ["larger_number", "capital_true", "alphabetical", "story_sentiment"]
    bridge = load_model(args.model)
    stores = [ensure_store(bridge, load_dataset_spec(s, max_pairs=args.max_pairs, seed=args.seed),
                           args.stores) for s in specs]
    cfg = TransferConfig(stores=[str(s.path) for s in stores], seed=args.seed,
                         n_boot=100 if getattr(args, "quick", False) else 300)
    print_summary(run_transfer(stores, args.out, cfg), cfg)


def main(argv: list[str] | None = None) -> int:
    """Regenerate everything from existing stores (no model): ``python -m
    analyses.cross_dataset STORE STORE ... --out DIR``."""
    p = argparse.ArgumentParser(prog="python -m analyses.cross_dataset", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("stores", nargs="+", help="activation store folders (same model)")
    p.add_argument("--out", default="figures/transfer")
    p.add_argument("--layer", type=int, default=-2,
                   help="read-out index (-2 last block's resid_post, -1 final norm)")
    p.add_argument("--center-target", choices=CENTERINGS, default="target")
    p.add_argument("--metric", choices=METRICS, default="accuracy")
    p.add_argument("--n-boot", type=int, default=300)
    p.add_argument("--test-size", type=float, default=0.3)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    try:
        stores = [ActivationStore.open(s) for s in args.stores]
        cfg = TransferConfig(stores=[str(s.path) for s in stores], layer=args.layer,
                             center_target=args.center_target, metric=args.metric,
                             n_boot=args.n_boot, test_size=args.test_size, seed=args.seed)
        print_summary(run_transfer(stores, args.out, cfg), cfg)
    except PPairsError as e:
        print(f"{p.prog}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
