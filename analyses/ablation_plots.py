"""Figure and printed summary of the directional ablation (:mod:`analyses.ablation`), and
:func:`read_rows`, which reads the null directions' table back for a redraw without the model."""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from ppairs_lens.interventions.conditions import (BASELINE, CONTROL, CONTROL_AT_READOUT,
                                                  MATCHED_NULL, RANDOM_NULL)
from ppairs_lens.errors import DataError
from ppairs_lens.io.plotting import caption, style
from ppairs_lens.evaluation.predictors import colour, label
from ppairs_lens.io.records import ABSENT

__all__ = ["plot_ablation", "read_rows", "summary_lines"]

_NULL_STYLE = {RANDOM_NULL: ("#7f7f7f", "isotropic random"),
               MATCHED_NULL: ("#17becf", "variance-matched random")}
_TEXT = {"dataset", "preset", "condition", "kind", "hook", "positions", "split_used", "null",
         "metric", "mode", "probe_kind", "hooks", "pair_id"}


def _missing(x) -> bool:
    return x is None or x is ABSENT or (isinstance(x, float) and math.isnan(x))


def _p(x) -> str:
    return "n/a" if _missing(x) else f"{x:.3f}"


def _d(r, m: str) -> str:
    """``+0.012 [-0.030, +0.050]``: a paired change of the judge's metric with its 95% CI."""
    v = getattr(r, f"delta_{m}")
    if _missing(v):
        return "n/a"
    return f"{v:+.3f} [{getattr(r, f'delta_{m}_lo'):+.3f}, {getattr(r, f'delta_{m}_hi'):+.3f}]"


def _panel(ax, rows: Sequence, nulls: list[dict]) -> None:
    """One dataset x preset: the null effects as histograms, probes and control as lines."""
    sel = [r for r in rows if r.kind in ("probe", "control")]
    effects = [r["effect"] for r in nulls] + [r.effect for r in sel]
    pos = [e for e in effects if e > 0 and math.isfinite(e)]
    log = len(pos) == len(effects) and len(pos) > 1
    lo, hi = (min(pos), max(pos)) if pos else (0.0, 1.0)
    bins = (np.geomspace(lo / 1.2, hi * 1.2, 40) if log
            else np.linspace(min(effects, default=0), max(effects, default=1) + 1e-12, 40))
    for null, (col, name) in _NULL_STYLE.items():
        e = [r["effect"] for r in nulls if r["null"] == null]
        if e:
            ax.hist(e, bins=bins, color=col, alpha=0.45, label=f"{name} (n={len(e)})")
    for r in sel:
        if r.kind == "control":
            ax.axvline(r.effect, color="k", ls="--", lw=1.4,
                       label=f"positive control: {r.effect:.3g}")
        else:
            ax.axvline(r.effect, color=colour(r.condition), lw=2,
                       label=f"{label(r.condition)}: {r.effect:.3g} "
                             f"(p matched {_p(r.p_matched)}, Holm {_p(r.p_matched_holm)}; "
                             f"ΔF1 {_d(r, 'f1')}, Δacc {_d(r, 'accuracy')}, "
                             f"ΔAUROC {_d(r, 'auroc')})")
    if log:
        from matplotlib.ticker import NullFormatter

        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())  # minor labels overlap
    ax.set_xlabel("effect: mean |z − z_baseline| (calibrated log-odds)")
    ax.set_ylabel("null directions")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)


def plot_ablation(rows: Sequence, null_rows: list[dict], cfg, model: str):
    """Per dataset (rows) and preset (columns): the nulls' effects, the probes', the control's."""
    import matplotlib.pyplot as plt

    datasets = list(dict.fromkeys(r.dataset for r in rows))
    presets = [p for p in cfg.presets if any(r.preset == p for r in rows)] or ["paper"]
    with style():
        fig, axes = plt.subplots(max(1, len(datasets)), len(presets),
                                 figsize=(9.5 * len(presets), 3.2 * max(1, len(datasets))),
                                 squeeze=False)
        for i, ds in enumerate(datasets):
            for j, preset in enumerate(presets):
                ax = axes[i, j]
                here = [r for r in rows if r.dataset == ds and r.preset == preset]
                nulls = [r for r in null_rows if r["dataset"] == ds and r["preset"] == preset]
                _panel(ax, here, nulls)
                base = next((r for r in here if r.condition == BASELINE), None)
                ctrl = next((r for r in here if r.condition == CONTROL), None)
                sub = ""
                if base:
                    sub = (f"\nbaseline accuracy {base.accuracy:.3f}, mean |z| "
                           f"{base.mean_abs_z:.3g}, n={int(base.n)} "
                           f"({int(base.n_groups)} groups)")
                if ctrl:
                    sub += f"; control: mean |z| {ctrl.mean_abs_z:.1e}"
                at = next((r for r in here if r.condition == CONTROL_AT_READOUT), None)
                if at:
                    sub += f"\ncontrol at the read-out hook only: Δacc {_d(at, 'accuracy')}"
                hook = here[0].hook if here else ""
                ax.set_title(f"{ds} · preset '{preset}' · directions at {hook}{sub}", fontsize=9)
        fig.suptitle(f"Directional ablation at the read-out token: probes vs null directions "
                     f"— {model}", y=1.02)
        fig.tight_layout()
        used = {r.dataset: r.split_used for r in rows if r.split_used}
        split = ", ".join(f"{k}: {v}" for k, v in used.items()) or cfg.settings.split_by
        caption(fig, f"Swap-calibrated zero-shot judge on held-out pairs (split {split}); its "
                     f"log-odds z = (ld_AB − ld_BA)/2. Each direction is rejected at the "
                     f"read-out token only (the prompt's last token; earlier tokens run clean) "
                     f"at every hook point of the preset ('paper': every resid_post + "
                     f"ln_final; 'full': embedding, every attn/MLP output + ln_final). Probe "
                     f"directions fitted on the train split at the read-out chosen on a "
                     f"validation split of train. Nulls: {cfg.n_random} isotropic random unit "
                     f"directions and {cfg.n_matched} drawn from the training contrasts' "
                     f"covariance. p = (1 + #null ≥ probe)/(1 + n_null), paired on the same "
                     f"records; Holm: corrected over every probe test of the run. ΔF1 (macro, as "
                     f"the paper's Table 2) / Δacc / ΔAUROC: the judge's F1 / accuracy / AUROC "
                     f"ablated minus clean, paired 95% CI over leak "
                     f"groups. Positive control (dashed): the two choice tokens' unembedding "
                     f"difference, ablated in the same preset (after the final norm this forces "
                     f"z = 0 by construction) and, in the titles, at the probes' read-out hook "
                     f"only. The probes are read at the contrast token while the judge decides "
                     f"at the token before (as the paper's Appendix B notes); ablating at every "
                     f"position (ablate(..., positions='all')) is the check.")
    return fig


def summary_lines(rows: Sequence) -> list[str]:
    """One line per (dataset, preset, condition): effect, margin, accuracy, p-values."""
    lines = []
    for r in rows:
        if r.kind == "null":
            extra = f"  null effects 2.5-97.5%: [{r.effect_lo:.3g}, {r.effect_hi:.3g}]"
        elif r.kind in ("probe", "control", "control_readout"):
            extra = (f"  p random {_p(r.p_random)}  p matched {_p(r.p_matched)}"
                     f" (Holm {_p(r.p_matched_holm)})  ΔF1 {_d(r, 'f1')}"
                     f"  Δacc {_d(r, 'accuracy')}  ΔAUROC {_d(r, 'auroc')}")
        else:
            extra = ""
        lines.append(f"{r.dataset:24s} {r.preset:6s} {r.condition:12s} effect "
                     f"{r.effect:.3g} margin {r.margin:+.3g} accuracy "
                     f"{r.accuracy:.3f}{extra}")
    return lines


def _cell(v: str):
    if v in ("True", "False"):  # flags such as delta_ci_counts
        return v == "True"
    return float(v) if v not in ("", "None") else float("nan")


def read_rows(path: str | Path) -> list[dict]:
    """Rows of a written ablation CSV, numbers as numbers (empty cells as NaN); a cell that is
    no number where one belongs is refused naming the file, row and column."""
    rows = []
    try:
        with open(path, newline="", encoding="utf-8") as f:
            for i, r in enumerate(csv.DictReader(f), 2):
                row = {}
                for k, v in r.items():
                    try:
                        row[k] = v if k in _TEXT else _cell(v)
                    except (TypeError, ValueError):
                        raise DataError(f"expected a number, got {v!r}", file=str(path), row=i,
                                        field=k) from None
                rows.append(row)
    except OSError as e:
        raise DataError(f"cannot read: {e}", file=str(path)) from None
    return rows
