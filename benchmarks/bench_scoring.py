"""Direct scoring and G-Eval of held-out items: three ways to run the same prompts, side by side.

Each item (a summary in its article) is one rating prompt. The three paths:

* ``alone`` - each prompt on its own (``HarvestSettings(share_prefixes=False)``: the runner's
  reference path, the whole prompt as its own context);
* ``per article`` - each article's prefix run once for its summaries, one article at a time
  (a batch-1 pass for the article, then a pass or more for its summaries);
* ``batched`` - the same sharing with the articles' contexts batched, many in one pass, and
  their summaries together (``batch_contexts``: what
  :func:`ppairs_lens.judges.held_out.score_held_out` runs).

Printed per path: wall time (best of ``--rounds``, the paths alternating so a slow spell of a
shared machine hits each), prompts/s, forward passes, tokens computed, the time ratio to
``alone`` and to ``per article``, and the largest difference to ``alone`` of the five score
logits (relative to their scale) and of the score probabilities (relative).

``--aspects N`` times instead the same items rated on N aspects (the replication's four
SummEval aspects), ``batched`` aspect by aspect against one pass over every aspect
(:func:`ppairs_lens.judges.scoring.score_item_sets`: each article and summary runs once for
all aspects), with the largest logit difference between the two.

Run: ``python -m benchmarks.bench_scoring [--articles 4 --summaries 10 --rounds 1
--device cpu --summeval PATH --aspects 0]`` (real SummEval from ../shared/datasets when
present; the demo's held-out SummEval is ``--articles 12 --summaries 3 --aspects 4``).
"""

from __future__ import annotations

import argparse
import itertools
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from benchmarks.common import summeval_like, timed
from ppairs_lens.activations.runner import HarvestSettings
from ppairs_lens.judges.held_out import held_out_items
from ppairs_lens.judges.scoring import ItemScores, score_item_sets, score_items
from ppairs_lens.models.loading import load_model

PATHS = {
    "alone": HarvestSettings(share_prefixes=False),
    "per article": HarvestSettings(),
    "batched": HarvestSettings(batch_contexts=True),
}


class PassCounter:
    """Forward passes of a bridge: calls of its input embedding."""

    def __init__(self, bridge):
        self.n = 0
        emb = bridge.original_model.get_input_embeddings()
        self.handle = emb.register_forward_pre_hook(self._count)

    def _count(self, *_):
        self.n += 1


def _rel(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(max |logit diff| / max |logit|, max relative probability diff)."""
    def probs(x):
        e = np.exp(x - x.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)

    pa, pb = probs(a), probs(b)
    return float(np.abs(a - b).max() / np.abs(b).max()), float((np.abs(pa - pb) / pb).max())


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--articles", type=int, default=4)
    ap.add_argument("--summaries", type=int, default=10,
                    help="summaries an article (--full keeps 10 of SummEval's 16)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--summeval", type=Path, default=None,
                    help="summeval.jsonl (default: ../shared/datasets beside the repository)")
    ap.add_argument("--aspects", type=int, default=0,
                    help="time N aspects aspect by aspect against one pass (0: the paths)")
    args = ap.parse_args(argv)

    test = summeval_like(args.articles, args.summaries, path=args.summeval)
    items = held_out_items(test)
    bridge = load_model(device=args.device)
    if args.aspects:
        return _aspects(bridge, test, items, args.aspects, args.rounds)
    counter = PassCounter(bridge)
    print(f"{test.source}: {args.articles} articles x {args.summaries} summaries = "
          f"{len(items)} rating prompts; device {args.device}, "
          f"{torch.get_num_threads()} torch threads")
    best: dict[str, float] = {}
    result: dict[str, ItemScores] = {}
    passes: dict[str, int] = {}
    for _ in range(args.rounds):
        for name, settings in PATHS.items():
            n0 = counter.n
            t, result[name] = timed(lambda s=settings: score_items(bridge, items, test,
                                                                   settings=s))
            passes[name] = counter.n - n0
            best[name] = min(best.get(name, float("inf")), t)
    ref = result["alone"].logits
    print(f"{'path':<12} {'time s':>8} {'prompts/s':>9} {'passes':>6} {'tokens':>7} "
          f"{'vs alone':>8} {'vs per article':>14} {'logit diff':>10} {'prob diff':>9}")
    for name in PATHS:
        r = result[name]
        dl, dp = _rel(r.logits, ref)
        print(f"{name:<12} {best[name]:8.2f} {len(items) / best[name]:9.1f} {passes[name]:6d} "
              f"{r.n_tokens:7d} {best['alone'] / best[name]:7.2f}x "
              f"{best['per article'] / best[name]:13.2f}x {dl:10.1e} {dp:9.1e}")
    same = all(np.array_equal(result[n].direct, result["alone"].direct) for n in PATHS)
    print(f"direct scores identical on every path: {same}")


def _aspects(bridge, test, items, n: int, rounds: int) -> None:
    """The same items on ``n`` aspects: a pass per aspect against one pass for all."""
    sets = [(items, replace(test, aspect=a))
            for a in ("coherent", "consistent", "fluent", "relevant", "informative")[:n]]
    batched = HarvestSettings(batch_contexts=True)
    ways = {"aspect by aspect": lambda: [score_items(bridge, i, m, settings=batched)
                                         for i, m in sets],
            "aspects together": lambda: score_item_sets(bridge, sets, settings=batched)}
    first = dict(itertools.islice(items.items(), 2))
    score_item_sets(bridge, [(first, m) for _, m in sets], settings=batched)   # warm-up
    best: dict[str, float] = {}
    out: dict[str, list[ItemScores]] = {}
    for r in range(rounds):
        for name, fn in sorted(ways.items(), reverse=bool(r % 2)):   # alternate which first
            t, out[name] = timed(fn)
            best[name] = min(best.get(name, float("inf")), t)
    n_prompts = len(items) * len(sets)
    print(f"{len(items)} items x {len(sets)} aspects = {n_prompts} rating prompts; "
          f"{torch.get_num_threads()} torch threads")
    print(f"{'way':<17} {'time s':>8} {'prompts/s':>9} {'tokens':>7} {'ratio':>6}")
    for name in ways:
        tokens = sum(r.n_tokens for r in out[name])
        print(f"{name:<17} {best[name]:8.2f} {n_prompts / best[name]:9.1f} {tokens:7d} "
              f"{best['aspect by aspect'] / best[name]:5.2f}x")
    a = np.concatenate([r.logits for r in out["aspect by aspect"]])
    b = np.concatenate([r.logits for r in out["aspects together"]])
    dl, dp = _rel(b, a)
    same = all(np.array_equal(x.direct, y.direct)
               for x, y in zip(out["aspect by aspect"], out["aspects together"]))
    print(f"largest difference: logits {dl:.1e} (of their scale), probabilities {dp:.1e}; "
          f"direct scores identical: {same}")


if __name__ == "__main__":
    main()
