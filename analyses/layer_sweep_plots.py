"""The layer-sweep figure: probe curves per dataset, with the no-model baselines and the
prompted judges as horizontal lines and the validation-chosen layer of each probe marked."""

from __future__ import annotations

from ppairs_lens.evaluation.predictors import colour, label, short
from ppairs_lens.io.plotting import caption, legend_outside, style, wrapped

#: Characters of a subplot title's line (a 3.6-inch panel at the style's title size).
TITLE_WIDTH = 38

#: Colour and line style of each layer-free row kind (baselines dotted or dash-dotted,
#: judges dashed); names and colours from the predictors' one list.
FLAT = {k: (colour(k), ls) for k, ls in (("memorisation", ":"), ("length", "-."),
                                         ("lexical", ":"), ("embedding", "-."),
                                         ("zero_shot", "--"), ("few_shot", "--"))}


def _flat_lines(ax, rows, ds: str, metric: str, n_test) -> list[str]:
    """Each judge and baseline as a line with its 95% interval as a band; returns notes on
    those scored on fewer pairs than the probes."""
    notes = []
    for kind, (c, ls) in FLAT.items():
        r = next((r for r in rows if r.dataset == ds and r.kind == kind
                  and r.metric == metric), None)
        if r is None:
            continue
        # one label per kind in every panel: the figure has one legend (values: the table)
        ax.axhline(r.value, color=c, ls=ls, lw=1.1, label=label(kind))
        if r.lo is not None and r.hi is not None and r.hi > r.lo:
            ax.axhspan(r.lo, r.hi, color=c, alpha=0.07, lw=0)
        if n_test is not None and r.n_test != n_test:
            notes.append(f"{short(kind)} on {r.n_test} of {n_test} pairs in {ds}")
    return notes


def _missing_note(entries) -> str:
    """Which baselines could not be drawn, and why (once per reason)."""
    missing: dict[tuple[str, str], dict[str, None]] = {}  # datasets, deduplicated in order
    for e in entries:
        for kind, why in e.unavailable.items():
            missing.setdefault((kind, why), {})[e.dataset] = None
    return "".join(f" Not shown: {kind} ({why}) for {', '.join(ds)}."
                   for (kind, why), ds in missing.items())


def plot_sweep(result, cfg, model: str):
    """The figure of a :class:`~analyses.layer_sweep.SweepResult`."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    rows, entries = result.rows, result.entries
    datasets = list(dict.fromkeys(r.dataset for r in rows))
    chosen = result.chosen()
    with style():
        ncol = min(3, len(datasets))
        nrow = -(-len(datasets) // ncol)
        fig, axes = plt.subplots(nrow, ncol, figsize=(3.6 * ncol, 2.9 * nrow), squeeze=False,
                                 sharey=True)
        notes: list[str] = []
        fallback = sorted({f"{short(e.kind)} in {e.dataset}" for e in entries
                           if str(e.selected_by or "").startswith("fallback")})
        for ax, ds in zip(axes.flat, datasets):
            for kind in cfg.kinds:
                rs = [r for r in rows if r.dataset == ds and r.kind == kind
                      and r.metric == cfg.metric and r.layer >= 0]
                if not rs:
                    continue
                x = [r.layer for r in rs]
                ax.plot(x, [r.value for r in rs], color=colour(kind), label=label(kind), lw=1.4)
                # light bands with edges of their own colour: three kinds stay apart
                ax.fill_between(x, [r.lo for r in rs], [r.hi for r in rs],
                                color=colour(kind), alpha=0.10, lw=0)
                for edge in ("lo", "hi"):
                    ax.plot(x, [getattr(r, edge) for r in rs], color=colour(kind), lw=0.5,
                            alpha=0.6)
                at = next((r for r in rs if r.layer == chosen.get((ds, kind))), None)
                if at is not None:
                    e = result.entry(ds, kind)
                    fell_back = str(e and e.selected_by or "").startswith("fallback")
                    ax.plot([at.layer], [at.value], marker="s" if fell_back else "o",
                            ms=5, color=colour(kind), mec="k", mew=0.6, ls="none")
            first = next((r for r in rows if r.dataset == ds and r.layer >= 0), None)
            notes += _flat_lines(ax, rows, ds, cfg.metric, first and first.n_test)
            ax.axhline(0.5 if cfg.metric != "spearman" else 0.0, color="k", lw=0.6, alpha=0.5)
            ax.set_title(f"{wrapped(ds, TITLE_WIDTH)}\n(test n={first.n_test if first else 0}, "
                         f"split by {first.split_used if first else '?'})")
            ax.set_xlabel("layer (last = final norm output)")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_ylabel(f"held-out {cfg.metric}")
        for ax in list(axes.flat)[len(datasets):]:
            ax.set_visible(False)
        # the legend names every mark: the chosen read-out (validation or fallback)
        first_ax = axes.flat[0]
        first_ax.plot([], [], marker="o", ms=5, color="w", mec="k", ls="none",
                      label="read-out chosen on validation")
        if fallback:
            first_ax.plot([], [], marker="s", ms=5, color="w", mec="k", ls="none",
                          label="read-out by fallback (no validation split)")
        fig.suptitle(f"Layer sweep of PPairS probes\n{model}")
        splits = ", ".join(f"{ds}: {next(r.split_used for r in rows if r.dataset == ds)}"
                           for ds in datasets)
        s = cfg.settings
        caption(fig, f"Split used ({splits}); test fraction {s.test_size}, seed {s.seed}. "
                     f"Dots: layer chosen on validation ({cfg.val_size:.0%} of the training "
                     f"groups held out, {cfg.val_repeats} splits averaged; the test set is never "
                     f"read to choose). 95% bootstrap "
                     f"CIs over leak groups ({s.n_boot} resamples; over contexts where the "
                     f"test side holds < 10 groups, then optimistic as items recur: "
                     f"ci_unit in layer_sweep_summary.json). Baselines fitted on the "
                     f"training split only; judges and baselines as lines with their "
                     f"95% CI as a band. F1 is macro over both item orders."
                     + (f" Scored on fewer pairs: {'; '.join(notes)}." if notes else "")
                     + (f" Read-out by fallback: {', '.join(fallback)}." if fallback else "")
                     + _missing_note(entries))
        legend_outside(fig, [ax for ax in axes.flat if ax.get_visible()], ncol=min(3, 2 * ncol))
    return fig
