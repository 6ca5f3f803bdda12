"""The ``ppairs-lens`` command line: one subcommand per job, each a thin layer over the library."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ppairs_lens.errors import PPairsError


def _add_model(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", default=None,
                   help="HF model id or local folder (default: the embedded SmolLM2-135M-Instruct)")
    p.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    p.add_argument("--device", default=None, help="e.g. cpu, cuda, cuda:1")


def _add_dataset_opts(p: argparse.ArgumentParser, many: bool = False) -> None:
    if many:
        p.add_argument("--datasets", nargs="+", default=None,
                       help="built-in names or paths (path:aspect for scored-items files)")
    else:
        p.add_argument("--dataset", required=True,
                       help="built-in name or a path (path:aspect for scored-items files)")
    p.add_argument("--max-pairs", type=int, default=None, help="use at most this many pairs")
    p.add_argument("--stores", default="stores", help="root folder of activation stores")


def _shard_arg(spec: str) -> str:
    """Check ``--shard`` while parsing, so a typo fails at once, before a model loads."""
    from ppairs_lens.activations.pipeline import parse_shard

    try:
        parse_shard(spec)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected i/n with 0 <= i < n (e.g. 0/4 ... 3/4), got {spec!r}") from None
    return spec


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ppairs-lens", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("datasets", help="list built-in datasets and supported file formats")

    p = sub.add_parser("harvest", help="harvest contrast-pair activations into a store")
    _add_model(p)
    _add_dataset_opts(p)
    p.add_argument("--out", default=None, help="store folder (default: under --stores)")
    p.add_argument("--shard", default=None, type=_shard_arg,
                   help="i/n: do only part i of n (0-based)")
    p.add_argument("--shard-size", type=int, default=256, help="pairs per store shard")
    p.add_argument("--device-map", default=None,
                   help="e.g. auto: spread a model too big for one GPU over the visible GPUs")
    p.add_argument("--token-budget", type=int, default=None,
                   help="tokens held per forward pass (batch rows x sequence length; "
                        "default: by device, ppairs_lens.activations.harvest.default_token_budget)")

    for name, help_ in [("sweep", "fit every probe type at every layer; figure + table"),
                        ("transfer", "cross-dataset transfer and cosine similarity of directions"),
                        ("ablate", "directional ablation of probe directions, with controls"),
                        ("rank", "PAIRS ranking and insertion scoring against baselines"),
                        ("run", "the whole study on the embedded default (the main job)")]:
        p = sub.add_parser(name, help=help_)
        _add_model(p)
        _add_dataset_opts(p, many=True)
        p.add_argument("--out", default="figures", help="folder for tables and figures")
        p.add_argument("--seed", type=int, default=0)
        p.add_argument("--quick", action="store_true", help="small settings (tests, previews)")
        if name == "run":
            p.add_argument("--recompute", action="store_true",
                           help="redo every step (default: steps whose config, stores and code "
                                "are unchanged since the last run into --out are reused)")
    return parser


def _cmd_datasets(_args) -> None:
    from ppairs_lens.data import BUILTIN, FORMATS

    print("Built-in datasets (generated, no download):")
    for name in BUILTIN:
        print(f"  {name}")
    print("\nFile formats (pass a path; scored-items files as path:aspect):")
    for name, desc in FORMATS.items():
        print(f"  {name:14s} {desc}")


def _cmd_harvest(args) -> None:
    import torch

    from ppairs_lens.data.specs import load_dataset_spec
    from ppairs_lens.activations.harvest import HarvestSettings
    from ppairs_lens.activations.pipeline import default_store_path, harvest_dataset, parse_shard
    from ppairs_lens.models.loading import load_model, model_name
    from ppairs_lens.activations.prompts import default_template

    settings = HarvestSettings(token_budget=args.token_budget)  # checked before the model loads
    dataset = load_dataset_spec(args.dataset, max_pairs=args.max_pairs)
    bridge = load_model(args.model, dtype=getattr(torch, args.dtype), device=args.device,
                        device_map=args.device_map)
    template = default_template(dataset)
    out = Path(args.out) if args.out else default_store_path(args.stores, model_name(bridge),
                                                             dataset, template)
    store = harvest_dataset(bridge, dataset, out, template=template, shard_size=args.shard_size,
                            shard=parse_shard(args.shard),
                            settings=settings)
    state = "complete" if store.complete else f"{len(store.missing_shards())} shards left"
    print(f"{store.path}: {store.n_pairs} pairs x 2 x {store.n_readouts} read-outs x "
          f"{store.d_model} ({state})")


def _cmd_rank(args) -> None:
    """PAIRS ranking on the comparison datasets, then insertion scoring on a ClimateX file:
    two experiments, one model load."""
    from analyses import insertion, ranking

    bridge = None
    if ranking.wants_model(args) or insertion.wants_model(args):
        import torch

        from ppairs_lens.models.loading import load_model

        bridge = load_model(args.model, dtype=getattr(torch, args.dtype), device=args.device)
    ranking.cli(args, bridge=bridge)
    insertion.cli(args, bridge=bridge)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "datasets":
            _cmd_datasets(args)
        elif args.command == "harvest":
            _cmd_harvest(args)
        elif args.command == "rank":
            _cmd_rank(args)
        else:
            import importlib

            module = {"sweep": "layer_sweep", "transfer": "cross_dataset", "ablate": "ablation",
                      "run": "run_all"}[args.command]
            importlib.import_module(f"analyses.{module}").cli(args)
    except PPairsError as e:
        # Errors we raise on purpose already say what to fix: no traceback.
        print(f"ppairs-lens {args.command}: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
