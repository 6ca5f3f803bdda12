"""The figure of thesis Tables 4.1 and 4.2: ours (bars, 95% CIs) beside the published models."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np

from ppairs_lens.io.plotting import caption, style

OURS = ("direct", "G-Eval", "PAIRS", "PPAIRS")
COLORS = {"direct": "#8c8c8c", "G-Eval": "#bcbd22", "PAIRS": "#ff7f0e", "PPAIRS": "#1f77b4"}
MARKERS = {"Mistral-7B-Instruct-v0.1": "o", "Llama-2-7B-chat": "s",
           "Llama-3-8B-Instruct": "^", "GPT-4-Turbo (preview)": "D"}


def plot_tables(rows: Sequence, model: str):
    """Tables 4.1 and 4.2 side by side; ``rows``: the step's ``ThesisRow`` records."""
    ours = [r for r in rows if r.model == "ours"]
    # one column per (dataset, aspect) cell: SummEval's four, then NEWSROOM's
    aspects = sorted({(r.dataset, r.aspect) for r in ours}, key=lambda c: (
        c[0] != "SummEval", c))
    with style():
        fig, axes = plt.subplots(1, 2, figsize=(max(11, 1.4 * len(aspects) + 3), 4))
        for ax, table, ylabel in ((axes[0], "4.1", "pairwise accuracy"),
                                  (axes[1], "4.2", "Spearman with human scores")):
            x = np.arange(len(aspects))
            w = 0.8 / len(OURS)
            for k, m in enumerate(OURS):
                rs = {(r.dataset, r.aspect): r for r in ours
                      if r.table == table and r.method == m}
                v = np.array([rs[a].value if a in rs else np.nan for a in aspects], float)
                lo = np.array([rs[a].lo if a in rs else np.nan for a in aspects], float)
                hi = np.array([rs[a].hi if a in rs else np.nan for a in aspects], float)
                pos = x - 0.4 + w * (k + 0.5)
                ax.bar(pos, v, w, color=COLORS[m], label=f"{m} (ours)")
                ax.errorbar(pos, v, yerr=[v - lo, hi - v], fmt="none", ecolor="k", lw=0.8)
                for pm, mk in MARKERS.items():
                    pub = {(r.dataset, r.aspect): r.value for r in rows
                           if r.model == pm and r.table == table and r.method == m}
                    pv = [pub.get(a, np.nan) for a in aspects]
                    ax.scatter(pos, pv, marker=mk, s=16, facecolor="white", edgecolor="k",
                               zorder=3, label=f"{pm} (thesis)" if k == 3 or m == "PAIRS" else None)
            if table == "4.1":
                ax.axhline(0.5, color="#999999", lw=0.8, ls="--")
            ax.set_xticks(x, [f"{d}\n{a}" for d, a in aspects], fontsize=7)
            ax.set_ylabel(ylabel)
            ax.set_title(f"thesis Table {table}: "
                         f"{' and '.join(dict.fromkeys(d for d, _ in aspects))}")
        handles, labels = axes[0].get_legend_handles_labels()
        seen = dict(zip(labels, handles))
        fig.legend(seen.values(), seen.keys(), loc="upper center", ncol=4, fontsize=7,
                   bbox_to_anchor=(0.5, 1.08))
        n = {(r.dataset, r.aspect): (r.n_test_pairs, r.n_test_articles, r.n_items_per_article)
             for r in ours if hasattr(r, "n_test_pairs")}
        size = "; ".join(f"{d} {a}: {p} held-out pairs in {c} articles, {i:g} summaries each"
                         for (d, a), (p, c, i) in sorted(n.items()))
        caption(fig, f"Bars: {model} on held-out articles (95% CI, bootstrap over "
                f"articles; direct/G-Eval one 1-5 rating per summary; PAIRS = calibrated "
                f"zero-shot comparison; PPAIRS = supervised probe at the read-out chosen on "
                f"validation; sorts: PAIRS beam merge sort, beam 1000, uncertainty 0.6, over "
                f"the comparisons already scored; Spearman per article, 0 where a method "
                f"ranks all summaries equal; NEWSROOM's informativeness beside the thesis's "
                f"CON column). {size}. Markers: the thesis's 7-8B models (and GPT-4-Turbo in "
                f"4.2) on all articles: a comparison of shape, not level.")
        fig.tight_layout()
    return fig
