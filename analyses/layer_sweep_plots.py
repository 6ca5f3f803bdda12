"""The layer-sweep figure: probe curves per dataset, with the no-model baselines and the
prompted judges as horizontal lines and the validation-chosen layer of each probe marked."""

from __future__ import annotations

from ppairs_lens.evaluation.predictors import colour, label
from ppairs_lens.io.plotting import caption, legend_outside, style, wrapped

#: Characters of a subplot title's line (a 3.6-inch panel at the style's title size).
TITLE_WIDTH = 38

#: Colour and line style of each layer-free row kind (baselines dotted or dash-dotted,
#: judges dashed); names and colours from the predictors' one list.
FLAT = {k: (colour(k), ls) for k, ls in (("memorisation", ":"), ("length", "-."),
                                         ("lexical", ":"), ("embedding", "-."),
                                         ("zero_shot", "--"), ("few_shot", "--"))}


def _flat_lines(ax, rows: list[dict], ds: str, metric: str) -> None:
    for kind, (c, ls) in FLAT.items():
        r = next((r for r in rows if r["dataset"] == ds and r["kind"] == kind
                  and r["metric"] == metric), None)
        if r is None:
            continue
        # one label per kind in every panel: the figure has one legend (values: the table)
        ax.axhline(r["value"], color=c, ls=ls, lw=1.1, label=label(kind))


def _missing_note(entries: list[dict]) -> str:
    """Which baselines could not be drawn, and why (once per reason)."""
    missing: dict[tuple[str, str], list[str]] = {}
    for e in entries:
        for kind, why in e.get("unavailable", {}).items():
            ds = missing.setdefault((kind, why), [])
            if e["dataset"] not in ds:
                ds.append(e["dataset"])
    return "".join(f" Not shown: {kind} ({why}) for {', '.join(ds)}."
                   for (kind, why), ds in missing.items())


def plot_sweep(rows: list[dict], entries: list[dict], cfg, model: str):
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    datasets = list(dict.fromkeys(r["dataset"] for r in rows))
    chosen = {(e["dataset"], e["kind"]): e["layer"] for e in entries}
    with style():
        ncol = min(3, len(datasets))
        nrow = -(-len(datasets) // ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=(3.6 * ncol, 2.9 * nrow), squeeze=False,
                                 sharey=True)
        for ax, ds in zip(axes.flat, datasets):
            for kind in cfg.kinds:
                rs = [r for r in rows if r["dataset"] == ds and r["kind"] == kind
                      and r["metric"] == cfg.metric and r["layer"] >= 0]
                if not rs:
                    continue
                x = [r["layer"] for r in rs]
                ax.plot(x, [r["value"] for r in rs], color=colour(kind), label=label(kind), lw=1.4)
                ax.fill_between(x, [r["lo"] for r in rs], [r["hi"] for r in rs],
                                color=colour(kind), alpha=0.18, lw=0)
                at = next((r for r in rs if r["layer"] == chosen.get((ds, kind))), None)
                if at is not None:
                    ax.plot([at["layer"]], [at["value"]], marker="o", ms=5, color=colour(kind),
                            mec="k", mew=0.6, ls="none")
            _flat_lines(ax, rows, ds, cfg.metric)
            ax.axhline(0.5 if cfg.metric != "spearman" else 0.0, color="k", lw=0.6, alpha=0.5)
            first = next((r for r in rows if r["dataset"] == ds and r["layer"] >= 0), {})
            ax.set_title(f"{wrapped(ds, TITLE_WIDTH)}\n(test n={first.get('n_test', 0)}, "
                         f"split by {first.get('split_used', '?')})")
            ax.set_xlabel("layer (last = final norm output)")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylabel(f"held-out {cfg.metric}")
        for ax in list(axes.flat)[len(datasets):]:
            ax.set_visible(False)
        fig.suptitle(wrapped(f"Layer sweep of PPairS probes — {model}",
                             int(TITLE_WIDTH * 1.2 * ncol)))
        splits = ", ".join(f"{ds}: {next(r['split_used'] for r in rows if r['dataset'] == ds)}"
                           for ds in datasets)
        s = cfg.settings
        caption(fig, f"Split used ({splits}); test fraction {s.test_size}, seed {s.seed}. "
                     f"Dots: layer chosen on validation ({cfg.val_size:.0%} of the training "
                     f"groups held out, {cfg.val_repeats} splits averaged; the test set is never "
                     f"read to choose). 95% bootstrap "
                     f"CIs over leak groups ({s.n_boot} resamples; over contexts where the "
                     f"test side holds < 10 groups, then optimistic as items recur: "
                     f"ci_unit in layer_sweep_summary.json). Baselines fitted on the "
                     f"training split only; F1 is macro over both item orders."
                     + _missing_note(entries))
        legend_outside(fig, [ax for ax in axes.flat if ax.get_visible()], ncol=min(3, 2 * ncol))
    return fig
