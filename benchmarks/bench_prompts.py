"""Building contrast pairs: the batched tokenization against one tokenizer call per text.

``build_contrast_pairs`` tokenizes each prompt three times (with each choice, and the prefix
alone, to check that the two prompts differ in their final token only). At the papers' sizes
that is 144,000 SummEval texts: one call per text kept an H100 idle for ~250 s before the
harvest started. :func:`ppairs_lens.activations.prompts.split_finals` puts them in batched
calls, which the fast tokenizer spreads over the cores. Same pairs on both sides (checked).

    python -m benchmarks.bench_prompts [--pairs 2000]
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

from benchmarks.common import SHARED, timed
from ppairs_lens.activations.prompts import (
    default_template,
    prompt_prefix_text,
    split_final,
    split_finals,
)
from ppairs_lens.models.tokenizer import load_tokenizer


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs", type=int, default=2000, help="SummEval comparisons tokenized")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args(argv)
    path = SHARED / "summeval" / "summeval.jsonl"
    if not path.is_file():
        print(f"bench_prompts skipped: {path} is missing (needs ../shared/datasets)")
        return {}
    from ppairs_lens.data.replication_sets import items_within_contexts
    from ppairs_lens.data.formats import load_dataset

    data = items_within_contexts(load_dataset(path, aspect="coherence"), 100, 16)
    data = replace(data, records=data.records[:args.pairs])
    tok = load_tokenizer()
    template = default_template(data)
    texts = [prompt_prefix_text(tok, template, data, r) for r in data.records]
    name = type(template).__name__
    t_one, one = timed(lambda: [split_final(tok, t, template.choices, name) for t in texts],
                       args.repeat)
    t_batch, batch = timed(lambda: split_finals(tok, texts, template.choices, name),
                           args.repeat)
    assert one == batch, "batched tokenization gave other pairs"
    print(f"contrast pairs of {len(texts)} SummEval comparisons ({os.cpu_count()} cores): "
          f"one call per text {t_one:.2f} s, batched {t_batch:.2f} s, "
          f"speed-up {t_one / t_batch:.2f}x")
    return {"pairs": len(texts), "one_per_text_s": t_one, "batched_s": t_batch,
            "speedup": t_one / t_batch}


if __name__ == "__main__":
    main()
