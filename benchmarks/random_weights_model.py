"""Write a model folder with a model's architecture and tokenizer but seeded random weights.

For timing where the real weights cannot go: a lent GPU machine takes at most 64 MiB of files,
and the embedded model's GGUF is 98 MB. A forward pass costs the same whatever the weights
hold, so the harvest benchmark's times and ratios carry over; its stored-value comparisons
still check that every path computes the same function.

Run: ``python -m benchmarks.random_weights_model SRC DST [--seed 0]`` where SRC holds
``config.json`` and the tokenizer files (e.g. a copy of the embedded model's folder without
``model.safetensors``).
"""

from __future__ import annotations

import argparse

import torch


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    config = AutoConfig.from_pretrained(args.src)
    with torch.random.fork_rng():
        torch.manual_seed(args.seed)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    model.save_pretrained(args.dst)
    AutoTokenizer.from_pretrained(args.src).save_pretrained(args.dst)
    print(f"{args.dst}: {config.model_type}, {sum(p.numel() for p in model.parameters()):,} "
          f"random parameters (seed {args.seed})")


if __name__ == "__main__":
    main()
