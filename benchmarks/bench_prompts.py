"""Building contrast pairs: batched tokenization against the earlier code, one call per text.

``build_contrast_pairs`` renders each prompt (chat template) and tokenizes it three times
(with each choice, and the prefix alone, to check that the two prompts differ in their final
token only). At the papers' sizes that is 144,000 SummEval texts, and the H100 machine sat idle
for ~250 s before the harvest (model load and dataset reading included).
:func:`ppairs_lens.activations.prompts.build_contrast_pairs` now puts the tokenizations in
batched calls (:func:`~ppairs_lens.activations.prompts.split_finals`), which the fast
tokenizer spreads over the cores. The baseline is the earlier code: three tokenizer calls per
text. Both sides render the prompts (timed) and give the same pairs (checked).

    python -m benchmarks.bench_prompts [--pairs 2000]
"""

from __future__ import annotations

import argparse
import os
from dataclasses import replace

from benchmarks.common import SHARED, timed
from ppairs_lens.activations.prompts import (
    build_contrast_pairs,
    default_template,
    prompt_prefix_text,
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
    from analyses.replication.sets import items_within_contexts
    from ppairs_lens.data.formats import load_dataset

    data = items_within_contexts(load_dataset(path, aspect="coherence"), 100, 16)
    data = replace(data, records=data.records[:args.pairs])
    tok = load_tokenizer()
    template = default_template(data)

    def one_text_at_a_time() -> list[tuple[tuple[int, ...], tuple[int, int]]]:
        """The earlier code's work: render, then three tokenizer calls per text."""
        out = []
        for r in data.records:
            text = prompt_prefix_text(tok, template, data, r)
            a, b = (tok(text + c, add_special_tokens=False).input_ids for c in template.choices)
            pre = tok(text, add_special_tokens=False).input_ids
            assert pre == a[:-1] and a[:-1] == b[:-1]
            out.append((tuple(pre), (a[-1], b[-1])))
        return out

    t_one, one = timed(one_text_at_a_time, args.repeat)
    t_batch, batch = timed(lambda: build_contrast_pairs(tok, data, template), args.repeat)
    assert one == [(p.prefix_ids, p.final_ids) for p in batch], "batched gave other pairs"
    print(f"contrast pairs of {len(batch)} SummEval comparisons ({os.cpu_count()} cores, "
          f"rendering included): three tokenizer calls per text {t_one:.2f} s, batched "
          f"{t_batch:.2f} s, speed-up {t_one / t_batch:.2f}x")
    return {"pairs": len(batch), "one_per_text_s": t_one, "batched_s": t_batch,
            "speedup": t_one / t_batch}


if __name__ == "__main__":
    main()
