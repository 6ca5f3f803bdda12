"""Every kind of judge pass against its limit: a bare HF forward of exactly the tokens that
pass needs, on the same plan.

Rows: the zero-shot judge (both orders), the few-shot judge (both orders, demonstrations as
a shared prefix), direct scoring + G-Eval (one pass per item gives both), and a greedy merge
sort of one article's summaries with the probe comparator and with the zero-shot comparator.
The judges' limit runs their prompts' prefix-sharing plan through the bare model; a sort's
limit replays the same calls (each comparison the sort asked, when it asked it) from one
cached article. Each judge and its limit alternate for ``--rounds`` rounds, best kept, so a
slow spell of a shared machine hits both.

Run: ``python -m benchmarks.bench_judges [--summaries 8 --sort-summaries 16 --rounds 2]``.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Sequence

import numpy as np
import torch

from benchmarks.common import SHARED, bare_plan, bare_steps, hf_copy, summeval_like, timed
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.activations.prefix_sharing import PrefixState, extend, read_branches
from ppairs_lens.activations.prompts import build_contrast_pairs
from ppairs_lens.data import builtin_dataset
from ppairs_lens.data.records import ScoredItem
from ppairs_lens.judges.comparators import ProbeComparator, ZeroShotComparator
from ppairs_lens.judges.few_shot import build_few_shot_pairs, few_shot, select_demos
from ppairs_lens.judges.scoring import score_items, score_prompt
from ppairs_lens.judges.zero_shot import swapped_dataset, zero_shot
from ppairs_lens.models.embedded import embedded_model_dir
from ppairs_lens.models.loading import load_model
from ppairs_lens.ranking.merge_sort import merge_sort

#: Target of every judge: at most this many times its limit.
TARGET = 1.3


class DirectionProbe:
    """A stand-in probe for timing: P(first) from a fixed direction (seeded)."""

    def __init__(self, d: int, seed: int = 0):
        self.w = torch.randn(d, generator=torch.Generator().manual_seed(seed))

    def predict_proba(self, acts, **_):
        p = torch.sigmoid((acts[:, 0] - acts[:, 1]) @ self.w / 100).numpy()
        return np.stack([1 - p, p], 1)


def judge_rows(pairs) -> tuple[list, list, list]:
    """(prefixes, branches, groups) of a prompted judge: the prompt's last token read."""
    return ([p.prefix_ids[:-1] for p in pairs], [(p.prefix_ids[-1],) for p in pairs],
            [p.group for p in pairs])


class Recorder:
    """Wraps a comparator's runner: each call's prefixes and branches, for the limit."""

    def __init__(self, runner):
        self.runner, self.calls = runner, []

    def run(self, prefixes, branches, anchors, **kw):
        self.calls.append(([tuple(p) for p in prefixes], [tuple(b) for b in branches]))
        return self.runner.run(prefixes, branches, anchors, **kw)

    def __getattr__(self, name):
        return getattr(self.runner, name)


def lcp_all(seqs: Sequence[Sequence[int]]) -> tuple[int, ...]:
    first = seqs[0]
    n = min(len(s) for s in seqs)
    for s in seqs[1:]:
        k = 0
        while k < n and s[k] == first[k]:
            k += 1
        n = k
    return tuple(first[:n])


@torch.inference_mode()
def bare_calls(hf, calls) -> None:
    """A sort's limit: the article once, then each recorded call's rows from its cache."""
    forward, read = bare_steps(hf)
    ctx = lcp_all([p for prefixes, _ in calls for p in prefixes])
    start = extend(PrefixState.empty(hf.device), [0], [ctx], forward)
    for prefixes, branches in calls:
        read_branches(start, [0] * len(prefixes), branches, read,
                      tails=[p[len(ctx):] for p in prefixes])


def sort_once(make: Callable[[], object], items) -> tuple[object, list]:
    """A merge sort with a fresh comparator (fresh context cache); its recorded calls."""
    comp = make()
    comp.runner = Recorder(comp.runner)
    merge_sort(list(items), comp)
    return comp, comp.runner.calls


def side_by_side(ours: Callable[[], object], limit: Callable[[], object], rounds: int
                 ) -> tuple[float, float]:
    ours(), limit()  # warm-up: first-call allocations are not the steady state
    t_o = t_l = float("inf")
    for _ in range(rounds):
        t_o = min(t_o, timed(ours)[0])
        t_l = min(t_l, timed(limit)[0])
    return t_o, t_l


def main(argv=None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--summaries", type=int, default=8,
                    help="summaries of the article the judges compare (all pairs)")
    ap.add_argument("--sort-summaries", type=int, default=16, help="items the sorts rank")
    ap.add_argument("--shots", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--backend", choices=("bridge", "hooked"), default="bridge")
    args = ap.parse_args(argv)
    model = load_model(device=args.device, backend=args.backend)
    hf = hf_copy(embedded_model_dir(), args.device)
    tok = model.tokenizer
    budget = HarvestSettings().budget_for(model, torch.device(args.device))
    if not (SHARED / "summeval" / "summeval.jsonl").is_file():
        print(f"SummEval absent at {SHARED / 'summeval'}: a generated long-context set instead")
    ds = summeval_like(1, args.summaries)
    print(f"\n[judges] {args.backend} on {args.device} ({torch.get_num_threads()} threads, "
          f"{os.cpu_count()} cores), {ds.source}: {len(ds)} pairs of {args.summaries} "
          f"summaries; limit = bare HF forward of the same tokens on the same plan")
    rows: list[dict] = []

    def report(name: str, t_o: float, t_l: float, n: int) -> None:
        r = t_o / t_l
        rows.append({"judge": name, "ours_s": t_o, "limit_s": t_l, "ratio": r, "rows": n})
        print(f"  {name:34s} {n:4d} rows  ours {t_o:7.2f} s  limit {t_l:7.2f} s  "
              f"{r:5.2f}x  ({'met' if r <= TARGET else 'not met'}: target <= {TARGET}x)",
              flush=True)

    zs = build_contrast_pairs(tok, ds) + build_contrast_pairs(tok, swapped_dataset(ds))
    report("zero-shot (both orders)", *side_by_side(
        lambda: zero_shot(model, ds), lambda: bare_plan(hf, *judge_rows(zs), budget),
        args.rounds), len(zs))

    train = builtin_dataset("larger_number", n=4 * args.shots, seed=1)
    target = builtin_dataset("larger_number", n=len(ds), seed=2)
    demos = select_demos(train, target, k=args.shots, seed=0)
    fs = (build_few_shot_pairs(tok, target, demos)
          + build_few_shot_pairs(tok, swapped_dataset(target), demos))
    report(f"few-shot, {args.shots} demos (both orders)", *side_by_side(
        lambda: few_shot(model, target, train, demos=demos),
        lambda: bare_plan(hf, *judge_rows(fs), budget), args.rounds), len(fs))

    items = {}
    for r in ds.records:
        items[r.item1_id] = r.item1
        items[r.item2_id] = r.item2
    ctx = ds.records[0]
    scored = {k: ScoredItem(k, v, 0.0, context_id=ctx.context_id, context=ctx.context)
              for k, v in items.items()}
    sp = [score_prompt(tok, ds, k, v) for k, v in scored.items()]
    report("direct scoring + G-Eval", *side_by_side(
        lambda: score_items(model, scored, ds),
        lambda: bare_plan(hf, [p.prefix_ids[:-1] for p in sp], [(p.prefix_ids[-1],) for p in sp],
                          [p.group for p in sp], budget), args.rounds), len(sp))

    sort_ds = summeval_like(1, args.sort_summaries)
    sort_items = {}
    for r in sort_ds.records:
        for k, t in ((r.item1_id, r.item1), (r.item2_id, r.item2)):
            sort_items[k] = ScoredItem(k, t, 0.0, context_id=r.context_id, context=r.context)
    probe = DirectionProbe(model.cfg.d_model)
    makers = {
        "merge sort, probe comparator": lambda: ProbeComparator(
            model, probe, model.cfg.n_layers // 2, sort_items, sort_ds),
        "merge sort, zero-shot comparator": lambda: ZeroShotComparator(
            model, sort_items, sort_ds),
    }
    for name, make in makers.items():
        _, calls = sort_once(make, sort_items)
        n = sum(len(p) for p, _ in calls)
        report(f"{name} ({len(sort_items)} items, {len(calls)} calls)", *side_by_side(
            lambda make=make: sort_once(make, sort_items), lambda calls=calls: bare_calls(hf, calls),
            args.rounds), n)
    return rows


if __name__ == "__main__":
    main()
