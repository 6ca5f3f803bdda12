"""The compact console table a command ends with: one block per dataset.

Each block says how the dataset was split, then every predictor's held-out accuracy and 95%
CI (each probe kind at its chosen read-out, each no-model baseline, ``n/a`` with the reason
where it cannot be built, never a constant 0.5, and each prompted judge), with the first
probe's paired difference against each and its verdict. A read-out whose validation accuracy
is no better than chance is flagged: its test score means little. It reads a layer sweep's
rows (baselines and judges at ``layer = -1``), so every command prints the same table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ppairs_lens.evaluation.bootstrap import MIN_BOOTSTRAP_GROUPS
from ppairs_lens.evaluation.verdicts import ACCURACY_DELTA, Verdict, interval_verdict

#: δ of a probe against any other predictor: the registry's "beats" families use the same.
BEATS_DELTA: float = ACCURACY_DELTA

__all__ = ["BASELINE_KINDS", "CHANCE", "JUDGE_KEYS", "TEXT_BASELINE_KEYS", "chance_flag",
           "dataset_table", "result_tables"]

#: Accuracy of a guess on balanced binary choices.
CHANCE = 0.5


def chance_flag(entry: Mapping) -> str:
    """Why a probe's chosen read-out deserves a warning ('' when it does not): chosen by a
    fallback without validation, or no better than chance on its validation split."""
    how = entry.get("selected_by") or ""
    if how.startswith("fallback"):
        return f"read-out not chosen on validation ({how.split(' (', 1)[0]})"
    val = entry.get("val_value")
    if val is not None and val <= CHANCE:
        return f"CHANCE-LEVEL CHOICE: validation accuracy {val:.3f} <= {CHANCE}"
    return ""


def _ci(d: Mapping, signed: bool = False) -> str:
    f = "+.3f" if signed else ".3f"
    lo, hi = d.get("lo"), d.get("hi")
    ci = "[n/a]" if lo is None or hi is None else f"[{lo:{f}}, {hi:{f}}]"
    few = "†" if d.get("ci_counts") is False else ""     # the header says what † means
    return f"{d['value']:{f}} {ci}{few}"


def _short(verdict: Verdict) -> str:
    """The outcome, with the size that would test it where the run could not."""
    return str(verdict.outcome) + (f" (needs {verdict.needed})" if verdict.needed else "")


def dataset_table(name: str, rows: Sequence[Mapping], entries: Sequence[Mapping], *,
                  test_size: float | None = None) -> list[str]:
    """The block of one dataset (module doc)."""
    acc = [r for r in rows if r["dataset"] == name and r["metric"] == "accuracy"]
    mine = [e for e in entries if e["dataset"] == name]
    first = mine[0] if mine else (acc[0] if acc else {})
    share = f"{test_size:.0%} of leak groups held out" if test_size is not None else ""
    n_groups = first.get("n_groups_test")
    few = any(r.get("ci_counts") is False for r in acc)
    lines = [f"{name} · split by {first.get('split_used', '?')} · {share} "
             f"({first.get('n_test', '?')} test pairs"
             + (f" in {n_groups} groups" if n_groups is not None else "")
             + f", {acc[0]['n_train'] if acc else first.get('n_train', '?')} training pairs)"
             + (f" · † CI over fewer than {MIN_BOOTSTRAP_GROUPS} groups: shown, its "
                f"comparisons decided on their group differences" if few else "")]
    ref = mine[0] if mine else None
    head = f"{ref['kind']} minus it: verdict" if ref else ""
    lines.append(f"  {'predictor':24s} {'read-out (validation acc)':36s} "
                 f"{'accuracy [95% CI]':22s} {head}")

    def vs(kind: str) -> str:
        d = (ref or {}).get("minus", {}).get(kind)
        if d is None:
            return ""
        return f"{_ci(d, signed=True)} on {d['n']}: {_short(interval_verdict(d, BEATS_DELTA))}"

    for e in mine:
        where = f"{e['hook']} #{e['layer']}"
        v = e.get("val_value")
        val = "" if v is None or v != v else f" ({v:.3f})"     # NaN: not validated there
        flag = chance_flag(e)
        lines.append(f"  {'probe ' + e['kind']:24s} {where + val:36s} {_ci(e['test']):22s} "
                     f"{vs('probe:' + e['kind'])}" + (f"  <- {flag}" if flag else ""))
    for r in acc:
        if int(r["layer"]) >= 0:
            continue
        what = "baseline" if r["kind"] in BASELINE_KINDS else "judge"
        cover = f"on {r['n_test']} of {first.get('n_test')} pairs" \
            if r["n_test"] != first.get("n_test") else ""
        lines.append(f"  {what + ' ' + r['kind']:24s} {cover:36s} {_ci(r):22s} "
                     f"{vs(r['kind'])}")
    unavailable: dict[str, str] = {}
    for e in mine:
        unavailable.update(e.get("unavailable") or {})
    for kind, why in unavailable.items():
        lines.append(f"  {'baseline ' + kind:24s} {'':36s} {'n/a':22s} ({why})")
    return lines


#: The no-model baselines every probe is scored beside (the rest at ``layer = -1`` are judges).
BASELINE_KINDS = ("memorisation", "length", "lexical", "embedding")
#: Prompted judges: kind -> the key of its ``{pair_id: P(item 1)}`` in a dataset's entry.
JUDGE_KEYS: dict[str, str] = {"zero_shot": "p_by_pair", "few_shot": "few_shot_p_by_pair",
                              "zero_shot_threshold": "threshold_p_by_pair",
                              "allure": "allure_p_by_pair", "direct": "direct_p_by_pair",
                              "g_eval": "geval_p_by_pair"}
#: No-model predictors that need the items' texts, handed per pair like the judges.
TEXT_BASELINE_KEYS: dict[str, str] = {"lexical": "lexical_p_by_pair",
                                      "embedding": "embedding_p_by_pair"}


def result_tables(rows: Sequence[Mapping], entries: Sequence[Mapping], *,
                  test_size: float | None = None) -> list[str]:
    """:func:`dataset_table` for every dataset, in order, blank-separated."""
    names = list(dict.fromkeys([*(r["dataset"] for r in rows),
                                *(e["dataset"] for e in entries)]))
    out: list[str] = []
    for n in names:
        out += ["", *dataset_table(n, rows, entries, test_size=test_size)]
    return out
