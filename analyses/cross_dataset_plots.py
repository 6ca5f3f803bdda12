"""Figures and printed summary of the cross-dataset analysis (:mod:`analyses.cross_dataset`).
``cfg`` is the run's ``TransferConfig``; ``ref`` the random-direction null (with ``samples``)."""

from __future__ import annotations

from itertools import combinations

import numpy as np

from ppairs_lens.evaluation.transfer_fit import CENTERINGS, METRICS
from ppairs_lens.io.plotting import caption, style
from ppairs_lens.io.records import ABSENT
from ppairs_lens.evaluation.predictors import colour, label

__all__ = ["CENTERINGS", "METRICS", "plot_cosine", "plot_cosine_distribution",
           "plot_layer_cosine", "plot_transfer", "print_summary"]

#: Colours of the kind-vs-kind comparisons in the per-layer figure.
PAIR_COLORS = {"supervised~pca": "#9467bd", "supervised~mass_mean": "#17becf",
               "pca~mass_mean": "#8c564b", "supervised~ccs": "#e377c2", "pca~ccs": "#ff9896",
               "mass_mean~ccs": "#98df8a"}


def _ccs_note(cfg) -> str:
    """CCS's one read-out, for a caption ('' without CCS)."""
    return (" CCS (label-free, gradient descent: 5 tries x 400 Adam steps) is fitted at the "
            "cosine read-out only, for transfer too (too slow to validate at every read-out)."
            if "ccs" in cfg.kinds else "")


def _short(name: str, n: int = 16) -> str:
    return name if len(name) <= n else name[: n - 1] + "…"


def _layer_note(cfg, layers: dict[str, dict[str, int]], hooks: dict[int, str]) -> str:
    """How the transfer read-outs were chosen, for a caption."""
    if cfg.layer is not None:
        return f"Read-out {cfg.layer} ({next(iter(hooks.values()))}) for every probe, as set."
    return ("Read-out of each (training dataset, kind) probe chosen on a validation split "
            f"(share {cfg.val_size}) of that dataset's training pairs, never on a test set "
            "(index in the row labels)." + _ccs_note(cfg))


def _cosine_readout_note(cfg) -> str:
    if cfg.layer is not None:
        return f"Read-out {cfg.layer}, as set." + _ccs_note(cfg)
    return ("Read-out with the best validation accuracy averaged over datasets and kinds "
            "(validation splits of the training pairs; no test set read)." + _ccs_note(cfg))


def _split_note(cfg, splits: dict[str, str]) -> str:
    used = sorted(set(splits.values()))
    how = used[0] if len(used) == 1 else ", ".join(f"{n}: {u}" for n, u in splits.items())
    return (f"split_by={cfg.settings.split_by} (used: {how}; 'context' = whole leak groups), test "
            f"fraction {cfg.settings.test_size}, seed {cfg.settings.seed}; supervised probes "
            f"{'on standardised features' if cfg.standardize else 'on raw features'}, "
            f"C={cfg.C}")


def plot_transfer(rows: list, names: list[str], cfg, model: str,
                  layers: dict[str, dict[str, int]], splits: dict[str, str]):
    """``rows``: the run's ``TransferRow``; ``layers``: ``{training dataset: {kind: read-out
    index}}``; ``splits``: the split each dataset used."""
    import matplotlib.pyplot as plt

    hooks = {r.layer: r.hook for r in rows}
    # the headline centring on top, then the other(s), as transfer_rows wrote them
    centers = [cfg.center_target] + [c for c in dict.fromkeys(r.center for r in rows)
                                     if c != cfg.center_target]
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
                refused = np.zeros((nd, nd), dtype=bool)
                for r in rows:
                    if r.kind == kind and r.center == center and r.metric == cfg.metric:
                        i, j = names.index(r.train), names.index(r.test)
                        val[i, j], lo[i, j], hi[i, j] = r.value, r.lo, r.hi
                        refused[i, j] = bool(r.refused)
                im = ax.imshow(val, cmap="RdBu", vmin=0.0, vmax=1.0)
                for i in range(nd):
                    for j in range(nd):
                        if np.isnan(val[i, j]):
                            txt = "other\nkind" if refused[i, j] else "n/a"
                        else:
                            txt = f"{val[i, j]:.2f}\n[{lo[i, j]:.2f},{hi[i, j]:.2f}]"
                        dark = not np.isnan(val[i, j]) and abs(val[i, j] - 0.5) > 0.3
                        ax.text(j, i, txt, ha="center", va="center", fontsize=6.5,
                                color="white" if dark else "black",
                                fontweight="bold" if i == j else "normal")
                ax.set_xticks(range(nd), [_short(n) for n in names] if r_i == 1 else [],
                              rotation=35, ha="right")
                ax.set_yticks(range(nd), [f"{_short(n)} @{layers[n][kind]}" for n in names])
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
        where = ("read-out chosen on validation" if cfg.layer is None
                 else f"read-out {next(iter(hooks.values()))}")
        fig.suptitle(f"Cross-dataset transfer — {model}, {where}")
        caption(fig, f"Rows: dataset the probe was fitted on (@ read-out index); columns: "
                     f"dataset it is scored on (held-out pairs; diagonal = in distribution, "
                     f"bold). {_layer_note(cfg, layers, hooks)} 95% bootstrap CIs over the "
                     f"test set's leak groups ({cfg.settings.n_boot} resamples); "
                     f"{_split_note(cfg, splits)}. Chance = 0.5 (white)."
                     + (" 'other kind': not scored, the two datasets' prompts are of different "
                        "kinds (comparison 'Choice 1/2' vs statement 'True/False'), whose "
                        "answer mapping is arbitrary." if any(r.refused for r in rows)
                        else ""))
    return fig


def plot_cosine(keys: list[tuple], cos: np.ndarray, cfg, model: str, hook: str,
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
                     f"projection means item 1 preferred. {_cosine_readout_note(cfg)} Random unit vectors in d={ref['d']}: "
                     f"mean |cos| {ref['mean']:.3f}, 95th pct {ref['p95']:.3f}, 99th pct "
                     f"{ref['p99']:.3f} ({ref['n']} pairs).")
        fig.tight_layout()
    return fig


def plot_cosine_distribution(c_rows: list[dict], cfg, model: str, hook: str,
                             ref: dict):
    import matplotlib.pyplot as plt

    rng = np.random.default_rng(cfg.settings.seed)
    pairs = [f"{a}~{b}" for a, b in combinations(cfg.kinds, 2)]
    groups = [("between datasets (same probe kind)",
               [(k, label(k).replace(" (", "\n("), colour(k),
                 [r["abs_cos"] for r in c_rows if r["relation"] == "between_datasets"
                  and r["kind_a"] == k]) for k in cfg.kinds])]
    if pairs:
        groups.append(("between probe kinds (same dataset)",
                       [(p, p.replace("~", " vs\n"), PAIR_COLORS.get(p, "#7f7f7f"),
                         [r["abs_cos"] for r in c_rows if r["relation"] == "between_kinds"
                          and f"{r['kind_a']}~{r['kind_b']}" == p]) for p in pairs]))
    with style():
        widths = [max(4.2, 0.95 * (len(series) + 1)) for _, series in groups]  # 6 kind pairs
        fig, axes = plt.subplots(1, len(groups), figsize=(sum(widths), 3.4), squeeze=False,
                                 sharey=True, gridspec_kw={"width_ratios": widths})
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
                                   facecolor="none", edgecolor=colour(k), lw=1, zorder=3,
                                   label="split-half, same dataset" if x == 0 else None)
            xr = len(series)
            parts = ax.violinplot([ref["samples"]], positions=[xr], widths=0.7,
                                  showextrema=False)
            for b in parts["bodies"]:
                b.set_facecolor(colour("random"))
                b.set_alpha(0.6)
            ax.axhline(ref["p95"], color=colour("random"), ls="--", lw=1,
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
                     f"two halves (whole leak groups) of one dataset's held-in pairs, "
                     f"its self-agreement ceiling. {_cosine_readout_note(cfg)} Grey violin: |cos| of {ref['n']} pairs "
                     f"of random unit vectors in d={ref['d']} (mean {ref['mean']:.3f}, 95th pct "
                     f"{ref['p95']:.3f}, 99th pct {ref['p99']:.3f}). An anisotropic residual "
                     f"stream can make unrelated directions agree more than this isotropic null.")
        fig.tight_layout()
    return fig


def plot_layer_cosine(rows: list[dict], names: list[str], cfg, model: str,
                      ref: dict, li: int):
    """``li``: the read-out used for transfer (dotted line)."""
    import matplotlib.pyplot as plt

    kinds = [k for k in cfg.kinds if any(r["view"] == "adjacent_layers" and r["kind"] == k
                                         for r in rows)]   # swept at every read-out (not CCS)
    nd, nk = len(names), len(kinds)
    ncol = max(nd, nk)
    with style():
        fig, axes = plt.subplots(3, ncol, figsize=(3.0 * ncol, 7.6), squeeze=False, sharey=True)

        def series(view, dataset=None, kind=None):
            rs = [r for r in rows if r["view"] == view and (dataset is None or
                  r["dataset"] == dataset) and (kind is None or r["kind"] == kind)]
            return np.array([r["layer"] for r in rs]), np.array([r["cos"] for r in rs])

        for c, ds in enumerate(names):
            ax = axes[0, c]
            for k in kinds:
                x, y = series("adjacent_layers", ds, k)
                ax.plot(x + 0.5, y, color=colour(k), label=label(k), lw=1.3)
            ax.set_title(f"{_short(ds, 24)}: layer l vs l+1")
            ax = axes[1, c]
            for ka, kb in combinations(kinds, 2):
                p = f"{ka}~{kb}"
                x, y = series("between_kinds", ds, p)
                ax.plot(x, y, color=PAIR_COLORS.get(p, "#7f7f7f"), lw=1.3,
                        label=f"{ka} vs {kb}")
            ax.set_title(f"{_short(ds, 24)}: between kinds")
        for c, k in enumerate(kinds):
            ax = axes[2, c]
            ys = []
            for a, b in combinations(names, 2):
                x, y = series("between_datasets", f"{a}~{b}", k)
                ax.plot(x, y, color=colour(k), lw=0.7, alpha=0.45)
                ys.append(y)
            if ys:
                ax.plot(x, np.nanmean(np.abs(np.stack(ys)), axis=0), color=colour(k), lw=2,
                        label="mean |cos|")
            ax.set_title(f"{label(k)}: between datasets")
        for r_i in range(3):
            used = nd if r_i < 2 else nk
            for c in range(ncol):
                ax = axes[r_i, c]
                if c >= used:
                    ax.set_visible(False)
                    continue
                ax.axhspan(-ref["p95"], ref["p95"], color=colour("random"), alpha=0.25, lw=0)
                ax.axhline(0, color="k", lw=0.5, alpha=0.5)
                ax.axvline(li, color="k", ls=":", lw=0.8, alpha=0.7)
                ax.set_xlabel("read-out (last = final norm)")
            axes[r_i, 0].set_ylabel("cosine")
            if axes[r_i, 0].get_legend_handles_labels()[0]:    # one kind: no kind pairs
                axes[r_i, 0].legend(loc="lower left", fontsize=6.5)
        axes[0, 0].set_ylim(-1.05, 1.05)
        fig.suptitle(f"Where the probe directions settle — {model}", y=1.0)
        caption(fig, f"Top: cosine of a kind's directions at adjacent read-outs (plotted "
                     f"between them); middle: between probe kinds at each read-out; bottom: "
                     f"between datasets (thin: each pair, signed; thick: mean |cos|). Grey "
                     f"band: ±95th pct of |cos| of random unit vectors (d={ref['d']}, "
                     f"{ref['p95']:.3f}). Dotted: the read-out of the cosine views "
                     f"({li}: {'chosen on validation' if cfg.layer is None else 'as set'}; "
                     f"transfer probes use their own, see transfer.png). The last step compares directions before and after the "
                     f"final norm, i.e. in two bases."
                     + (" CCS is fitted at one read-out only, so it is not drawn here."
                        if "ccs" in cfg.kinds else ""))
        fig.tight_layout()
    return fig


def print_summary(result, cfg) -> None:
    """The run's :class:`~analyses.cross_dataset.TransferResult`, printed."""
    ref = result.random
    print("transfer read-outs (training dataset: kind @ index): " + "; ".join(
        f"{n}: " + ", ".join(f"{k} @{li}" for k, li in ks.items())
        for n, ks in result.layers.items()))
    print(f"cosine read-out {result.hook}; random unit vectors in d={ref['d']}: mean |cos| "
          f"{ref['mean']:.3f} (exact {ref['mean_exact']:.3f}), 95th pct {ref['p95']:.3f}, "
          f"99th pct {ref['p99']:.3f}")
    for k, s in result.per_kind.items():
        print(f"{k:10s} mean |cos| between datasets {s.mean_abs_cos:.3f} "
              f"(random {s.random_mean_abs_cos:.3f}, 95th pct {s.random_p95:.3f}; "
              f"split-half same dataset {s.split_half_abs_cos:.3f}); "
              f"{cfg.metric}: in-distribution {s.in_distribution:.3f}, off-diagonal "
              f"{s.off_diagonal:.3f} (target-centred {s.off_diagonal_target:.3f}, "
              f"train-centred {s.off_diagonal_train:.3f})")
        if s.agreement is not ABSENT:
            print(f"{'':10s} agreement across datasets {s.agreement.outcome}: "
                  f"{s.agreement.reason}")
