"""The per-dataset console table: every predictor with its CI, n/a with the reason, the
verdicts, the split and held-out share, and a chance-level read-out choice flagged."""

from ppairs_lens.evaluation.result_table import chance_flag, result_tables


def _row(ds, kind, layer, value, n=40, **kw):
    return {"dataset": ds, "kind": kind, "layer": layer, "metric": "accuracy", "value": value,
            "lo": value - 0.1, "hi": value + 0.1, "n_test": n, "n_train": 90,
            "split_used": "context", "ci_counts": True, **kw}


def _entry(ds, kind, val, minus):
    return {"dataset": ds, "kind": kind, "layer": 1, "hook": "blocks.1.hook_resid_post",
            "val_value": val, "selected_by": "validation", "split_used": "context",
            "n_test": 40, "n_groups_test": 20, "test": {"value": 0.8, "lo": 0.7, "hi": 0.9},
            "minus": minus, "unavailable": {"memorisation": "no item_id recurs"}}


def test_every_predictor_verdict_split_and_chance_flag_are_shown():
    rows = [_row("A", "supervised", 1, 0.8), _row("A", "length", -1, 0.6),
            _row("A", "few_shot", -1, 0.55, n=10), _row("B", "supervised", 1, 0.5)]
    entries = [
        _entry("A", "supervised", 0.75, {
            "length": {"value": 0.2, "lo": 0.05, "hi": 0.35, "n": 40, "ci_counts": True,
                        "n_groups": 20},
            "few_shot": {"value": 0.1, "lo": -0.2, "hi": 0.3, "n": 10, "ci_counts": False,
                         "n_groups": 5}}),
        _entry("B", "supervised", 0.45, {})]
    text = "\n".join(result_tables(rows, entries, test_size=0.3))
    a, b = text.split("\nB ·")
    assert "split by context" in a and "30% of leak groups held out" in a
    assert "40 test pairs in 20 groups" in a
    length = next(line for line in a.splitlines() if "baseline length" in line)
    assert "0.600 [0.500, 0.700]" in length and length.endswith("holds")
    few = next(line for line in a.splitlines() if "judge few_shot" in line)
    assert "on 10 of 40 pairs" in few and "not tested at this size (needs" in few
    memo = next(line for line in a.splitlines() if "baseline memorisation" in line)
    assert "n/a" in memo and "no item_id recurs" in memo and "0.500" not in memo
    assert "CHANCE" not in a and "CHANCE-LEVEL CHOICE" in b


def test_fallback_and_chance_choices_are_flagged():
    assert chance_flag({"selected_by": "validation", "val_value": 0.5}).startswith("CHANCE")
    assert chance_flag({"selected_by": "validation", "val_value": 0.62}) == ""
    assert "not chosen on validation" in chance_flag(
        {"selected_by": "fallback: ln_final.hook_out, the paper's read-out (no split)"})
    assert chance_flag({"selected_by": "given (layer=3)", "val_value": None}) == ""
