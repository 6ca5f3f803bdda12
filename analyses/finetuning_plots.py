"""Figures of the finetuning comparison: accuracy and cost per method, and the label curve."""

from __future__ import annotations

from collections.abc import Sequence

from ppairs_lens.io.plotting import caption, style
from ppairs_lens.evaluation.predictors import colour

#: Method names as the figures write them.
NAMES = {"supervised": "supervised probe", "pca": "unsupervised probe (PCA)",
         "lora": "LoRA finetuning", "full": "full finetuning",
         "zero_shot": "zero-shot prompt (calibrated)"}
COLORS = {"lora": "#ff7f0e", "full": "#2ca02c"}


def _color(m: str) -> str:
    return COLORS.get(m) or colour(m)


def plot_comparison(rows: Sequence, model: str, cfg):
    """Left: held-out accuracy per dataset and method. Right: training CPU time per method
    (this process, all threads: steadier than wall time on a shared machine)."""
    import matplotlib.pyplot as plt
    import numpy as np

    datasets = list(dict.fromkeys(r.dataset for r in rows))
    methods = [m for m in cfg.methods if any(r.method == m for r in rows)]
    with style():
        fig, (ax, ax2) = plt.subplots(1, 2, figsize=(10, 3.4),
                                      gridspec_kw={"width_ratios": [2, 1]})
        width = 0.8 / max(len(methods), 1)
        for j, m in enumerate(methods):
            rs = [next((r for r in rows if r.dataset == d and r.method == m), None)
                  for d in datasets]
            x = np.arange(len(datasets)) + (j - (len(methods) - 1) / 2) * width
            v = [r.accuracy if r else np.nan for r in rs]
            err = [[r.accuracy - r.lo if r else 0 for r in rs],
                   [r.hi - r.accuracy if r else 0 for r in rs]]
            ax.bar(x, v, width, yerr=err, color=_color(m), label=NAMES.get(m, m),
                   capsize=2, error_kw={"lw": 0.8})
            t = [r.train_cpu_seconds if r and r.train_seconds > 0 else np.nan for r in rs]
            ax2.bar(x, t, width, color=_color(m))
        for a in (ax, ax2):
            a.set_xticks(np.arange(len(datasets)))
            a.set_xticklabels(datasets, rotation=15, ha="right")
        ax.axhline(0.5, color="k", lw=0.6, alpha=0.5)
        ax.set_ylim(0, 1)
        ax.set_ylabel("held-out accuracy")
        ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=7, ncol=3,
                  frameon=False)
        ax2.set_yscale("log")
        ax2.set_ylabel("training CPU time (s; probe: harvest + fit)")
        n = {r.dataset: (r.n_train, r.n_test) for r in rows if r.method != "zero_shot"}
        caption(fig, f"{model}; training comparisons / test pairs: "
                + ", ".join(f"{d} {a}/{b}" for d, (a, b) in n.items())
                + f". CIs: 95% over leak groups ({cfg.settings.n_boot} resamples). LoRA rank "
                f"{cfg.lora.rank}, alpha {cfg.lora.alpha}, {cfg.lora.target_modules}, "
                f"{cfg.lora.epochs} epoch(s), lr {cfg.lora.learning_rate:g}; full finetuning lr "
                f"{cfg.full.learning_rate:g}; both orders of every training comparison.")
        fig.tight_layout()
    return fig


def plot_curve(curve: list[dict], rows: Sequence, model: str, cfg):
    """Accuracy (mean over seeds) against training labels per dataset; zero-shot a line."""
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r["dataset"] for r in curve)) or ["(none)"]
    with style():
        ncol = min(3, len(datasets))
        nrow = -(-len(datasets) // ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=(3.8 * ncol, 3.0 * nrow), squeeze=False,
                                 sharey=True)
        for ax, ds in zip(axes.flat, datasets):
            for m in cfg.curve_methods:
                rs = sorted((r for r in curve if r["dataset"] == ds and r["method"] == m
                             and r["seed"] == "mean"), key=lambda r: r["n_labels"])
                if not rs:
                    continue
                x = [r["n_labels"] for r in rs]
                ax.plot(x, [r["accuracy"] for r in rs], marker="o", ms=3.5, color=_color(m),
                        label=NAMES.get(m, m))
                ax.fill_between(x, [r["lo"] for r in rs], [r["hi"] for r in rs],
                                color=_color(m), alpha=0.15, lw=0)
            zs = next((r for r in rows if r.dataset == ds and r.method == "zero_shot"), None)
            if zs is not None:
                ax.axhline(zs.accuracy, color=colour("zero_shot"), ls="--", lw=1,
                           label=NAMES["zero_shot"])
            ax.axhline(0.5, color="k", lw=0.6, alpha=0.5)
            ax.set_xscale("log", base=2)
            sizes = sorted({r["n_labels"] for r in curve if r["dataset"] == ds})
            ax.set_xticks(sizes)
            ax.set_xticklabels([str(n) for n in sizes])
            ax.minorticks_off()
            ax.set_title(ds)
            ax.set_xlabel("training comparisons (labels)")
            ax.set_ylabel("held-out accuracy")
        for ax in list(axes.flat)[len(datasets):]:
            ax.set_visible(False)
        axes.flat[0].legend(fontsize=7, loc="best")
        full = ("" if cfg.sizes_of("full") == cfg.curve_sizes or "full" not in cfg.curve_methods
                else f" Full finetuning at {list(cfg.sizes_of('full'))} labels only (its steps "
                "cost more).")
        caption(fig, f"{model}; nested seeded subsets of the training side (seeds "
                f"{list(cfg.curve_seeds)}; each finetuned judge trained once through them and "
                f"read after each size), the same test pairs throughout; line: mean over seeds, "
                f"band: 95% CI over leak groups ({cfg.settings.n_boot} resamples).{full}")
        fig.tight_layout()
    return fig
