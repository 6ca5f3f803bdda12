"""The ``ppairs-lens`` command line: one subcommand per job, each a thin layer over the library.

Every argument that can be checked without a model is checked before one loads
(:mod:`analyses.cli_args`); every command that runs a model loads it through
:func:`analyses.cli_args.load_model_from_args`, so ``--dtype``, ``--device``, ``--device-map``
and ``--backend`` act everywhere.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from pathlib import Path

from analyses.cli_args import (
    OneLineParser,
    add_calibration,
    add_data_commands,
    add_dataset_options,
    add_max_pairs,
    add_eval_settings,
    add_hooks,
    add_judges,
    add_kinds,
    add_layer,
    add_model_options,
    add_seed,
    add_template,
    check_args,
    check_layer,
    finite_float,
    finite_number,
    load_model_from_args,
    positive_int,
    seed_int,
)
from ppairs_lens.errors import PPairsError
from ppairs_lens.cpu_numerics import pin_cpu_numerics

#: Subcommands that run an analysis module's ``cli(args, bridge)``.
ANALYSES = {"sweep": "layer_sweep", "transfer": "cross_dataset", "ablate": "ablation",
            "shift": "distribution_shift",
            "steer": "steering",
            "finetune": "finetuning",
            "run": "replication.run"}


def _shard_arg(spec: str) -> str:
    """Check ``--shard`` while parsing, so a typo fails at once, before a model loads."""
    from ppairs_lens.activations.pipeline import parse_shard

    try:
        parse_shard(spec)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected i/n with 0 <= i < n (e.g. 0/4 ... 3/4), got {spec!r}") from None
    return spec


def _add_nulls(p: argparse.ArgumentParser, config: str, verb: str) -> None:
    """The null directions of an intervention study (ablate, steer); not given, the
    experiment's ``config`` (at its preset) says how many."""
    p.add_argument("--n-random", type=positive_int, default=None,
                   help=f"isotropic random directions {verb} as a null (default: {config}'s "
                        "n_random at the preset; given, it wins over --quick's)")
    p.add_argument("--n-matched", type=positive_int, default=None,
                   help=f"random directions drawn from the training contrasts' covariance, "
                        f"{verb} as the variance-matched null (default: {config}'s n_matched)")


def _positions_arg(text: str) -> str | int:
    """``--positions``: all, new (from the last prompt token on) or a start position."""
    if text in ("all", "new"):
        return text
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected all, new or a position >= 0, got {text!r}")
    return value


def _add_generate(sub) -> None:
    p = sub.add_parser("generate", help="continuations of prompts steered by a saved probe, "
                                        "side by side with a random direction of the same norm")
    add_model_options(p)
    p.add_argument("--probe", required=True, metavar="DIR",
                   help="a saved probe, sweep or direction: folder or Hub repo id")
    p.add_argument("--alpha", type=finite_number, nargs="+", required=True, metavar="A",
                   help="steering strengths, in units of the median activation norm at the "
                        "hook over the prompts' tokens (0, unsteered, is always shown)")
    p.add_argument("--prompt", nargs="+", required=True, metavar="TEXT")
    p.add_argument("--kind", default=None, help="a sweep's probe kind (default supervised)")
    p.add_argument("--hook", default=None,
                   help="hook point to steer at (default: the probe's; for a sweep, the "
                        "read-out its model card records as chosen on validation)")
    p.add_argument("--max-new-tokens", type=positive_int, default=24)
    p.add_argument("--positions", type=_positions_arg, default="all",
                   help="all (default), new (from the last prompt token on) or a start "
                        "position P (0-based, in the whole sequence)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random direction")
    p.add_argument("--chat", action="store_true", help="prompts as the model's chat turn")
    p.add_argument("--raw-alpha", action="store_true", help="alpha in raw activation units")
    p.add_argument("--width", type=positive_int, default=48, help="column width")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="ppairs-lens", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    sub.add_parser("datasets", help="list built-in datasets and supported file formats")
    add_data_commands(sub)
    _add_generate(sub)

    p = sub.add_parser("harvest", help="harvest contrast-pair activations into a store")
    add_model_options(p)
    add_dataset_options(p)
    add_seed(p)
    p.add_argument("--out", default=None, help="store folder (default: under --stores)")
    p.add_argument("--shard", default=None, type=_shard_arg,
                   help="i/n: do only part i of n (0-based)")
    p.add_argument("--shard-size", type=positive_int, default=256, help="pairs per store shard")
    p.add_argument("--token-budget", type=positive_int, default=None,
                   help="tokens held per forward pass (batch rows x sequence length; "
                        "default: by device, ppairs_lens.activations.runner.default_token_budget)")
    add_hooks(p)
    add_template(p)

    p = sub.add_parser("shift", help="train probes on some files, test them on others, with "
                                     "the prompted judge and the no-model baselines beside")
    add_model_options(p)
    p.add_argument("--train", nargs="+", required=True, metavar="SPEC",
                   help="files the probes are trained on (their training split, pooled; "
                        "path, path:aspect, built-in name; @Name to name one)")
    p.add_argument("--test", nargs="+", required=True, metavar="SPEC",
                   help="shifted files, every pair of each scored")
    add_max_pairs(p, "file")
    p.add_argument("--stores", default="stores", help="root folder of activation stores")
    p.add_argument("--out", default="figures", help="folder for the table and figure")
    add_eval_settings(p)
    add_hooks(p)
    add_template(p)
    add_kinds(p, "probe kinds (default: supervised pca mass_mean)")
    add_judges(p, default=("zero_shot",))
    add_calibration(p)

    for name, help_ in [("sweep", "fit every probe type at every layer; figure + table"),
                        ("transfer", "cross-dataset transfer and cosine similarity of directions"),
                        ("ablate", "directional ablation of probe directions, with controls"),
                        ("steer", "steering dose-response of the judge to probe directions, "
                                  "against random and variance-matched nulls"),
                        ("finetune", "probes against LoRA and full finetuning on the same "
                                     "labels, with cost and a label curve"),
                        ("rank", "PAIRS ranking and insertion scoring against baselines"),
                        ("run", "the main job: the replication on the embedded default")]:
        p = sub.add_parser(name, help=help_)
        add_model_options(p)
        add_dataset_options(p, many=True)
        p.add_argument("--out", default="figures", help="folder for tables and figures")
        # --seed, --n-boot (every command), --test-size, --split-by (all but rank, which holds
        # out whole contexts of its own): one record, analyses.cli_args.eval_settings_from_args
        add_eval_settings(p, split=name != "rank")
        if name in ("sweep", "transfer"):
            add_hooks(p)
        if name in ("sweep", "transfer", "ablate", "steer", "finetune"):
            add_template(p)
        if name in ("sweep", "transfer"):
            p.add_argument("--save-probes", default=None, metavar="DIR",
                           help="also save each dataset's probes (every kind and read-out, "
                                "fitted on its training split) into DIR/<dataset> "
                                "(safetensors + metadata.json; ppairs_lens.load_sweep)")
        add_calibration(p)   # every one of these plans and estimates its model passes first
        if name in ("sweep", "transfer"):
            add_judges(p)
        if name == "sweep":
            add_kinds(p, "probe kinds swept (default: supervised pca mass_mean; ccs is fitted "
                         "at every read-out on the validation split too, slower)")
        if name == "transfer":
            add_layer(p, None, "read-out index of the transfer matrix and cosines (default: "
                               "chosen on a validation split of each source's training "
                               "pairs; -1 the final norm)")
            add_kinds(p, "probe kinds of the transfer matrix and cosines (default: all four; "
                         "ccs is fitted at the cosine read-out only)")
        if name == "ablate":
            add_layer(p, None, "read-out index of the probe directions (default: chosen on "
                               "a validation split of the training pairs)")
            _add_nulls(p, "AblationConfig", "ablated")
        if name == "steer":
            add_layer(p, None, "read-out index of the probe directions and of the steering "
                               "hook (default: chosen on a validation split)")
            _add_nulls(p, "SteeringConfig", "added")
            p.add_argument("--alphas", type=finite_float, nargs="+", default=None,
                           help="steering strengths in units of the read-out's median "
                                "activation norm (default: -1 -0.5 -0.25 0.25 0.5 1)")
        if name == "finetune":
            p.add_argument("--max-train", type=positive_int, default=None,
                           help="training comparisons every method gets (default 8; "
                                "--quick 4)")
            p.add_argument("--curve-sizes", type=positive_int, nargs="+", default=None,
                           help="label counts of the label curve (default 4 8; --quick 4)")
            p.add_argument("--curve-seeds", type=seed_int, nargs="+", default=None,
                           help="seeds of each label count's subset (default 0)")
        if name == "rank":
            add_layer(p, None, "read-out index of the probe (default: chosen on held-out "
                               "training pairs)")
        if name == "run":
            p.add_argument("--recompute", action="store_true",
                           help="redo every step (default: steps whose config, stores and code "
                                "are unchanged since the last run into --out are reused)")
            p.add_argument("--shared-data", default=None, metavar="DIR",
                           help="folder of the seed experiments' datasets (the replication); "
                                "not given: ../shared/datasets, or where that is absent the "
                                "files fetched into the cache as by `data fetch` (a failed "
                                "fetch: the built-ins); a folder named here must hold "
                                "them")
            p.add_argument("--extra", nargs="+", default=[], metavar="SPEC",
                           help="further files of the supported formats (path or path:aspect) "
                                "for the probes-vs-prompting and transfer experiments")
            p.add_argument("--full", action="store_true",
                           help="the papers' sizes (for a GPU; hours on a CPU); not with "
                                "--quick")
            p.add_argument("--builtins", action="store_true",
                           help="run the main job on the built-ins (generated datasets) instead "
                                "of the seed experiments' files")
    return parser


def _cmd_datasets(_args) -> None:
    from ppairs_lens.data import BUILTIN, FORMATS

    print("Built-in datasets (generated, no download):")
    for name in BUILTIN:
        print(f"  {name}")
    print("\nFile formats (pass a path; scored-items files as path:aspect):")
    for name, desc in FORMATS.items():
        print(f"  {name:14s} {desc}")


def _cmd_data(args) -> None:
    """``data fetch``: the replication's files, verified, into ``--to`` (or the cache)."""
    from analyses.replication.fetch import fetch_datasets

    fetch_datasets(args.to)


def _cmd_harvest(args) -> None:
    from ppairs_lens.activations.harvest import readout_names
    from ppairs_lens.activations.runner import HarvestSettings
    from ppairs_lens.activations.pipeline import default_store_path, harvest_dataset, parse_shard
    from ppairs_lens.activations.prompts import default_template
    from ppairs_lens.activations.readouts import default_readouts
    from ppairs_lens.data.specs import load_dataset_spec
    from ppairs_lens.models.loading import model_name

    settings = HarvestSettings(token_budget=args.token_budget)
    dataset = load_dataset_spec(args.dataset, max_pairs=args.max_pairs, seed=args.seed)
    bridge = load_model_from_args(args)
    hooks = readout_names(bridge, args.hooks)  # a typo in --hooks fails before the harvest
    template = args.template or default_template(dataset)
    out = Path(args.out) if args.out else default_store_path(
        args.stores, model_name(bridge), dataset, template,
        None if hooks == default_readouts(bridge) else hooks)
    store = harvest_dataset(bridge, dataset, out, template=template, shard_size=args.shard_size,
                            shard=parse_shard(args.shard), settings=settings,
                            names=None if args.hooks is None else hooks)
    state = "complete" if store.complete else f"{len(store.missing_shards())} shards left"
    print(f"{store.path}: {store.n_pairs} pairs x 2 x {store.n_readouts} read-outs x "
          f"{store.d_model} ({state})")


def _check_layer_for(args, bridge) -> None:
    """``--layer`` against the read-outs the command's stores will hold."""
    if getattr(args, "layer", None) is None:
        return
    from ppairs_lens.activations.harvest import readout_names

    check_layer(args, len(readout_names(bridge, getattr(args, "hooks", None))))


def _cmd_rank(args) -> None:
    """PAIRS ranking on the comparison datasets, then insertion scoring on a ClimateX file:
    two experiments, one model load."""
    from analyses import insertion, ranking

    bridge = None
    if ranking.wants_model(args) or insertion.wants_model(args):
        bridge = load_model_from_args(args)
        _check_layer_for(args, bridge)
    ranking.cli(args, bridge=bridge)
    insertion.cli(args, bridge=bridge)


def _cmd_analysis(args) -> None:
    import importlib

    module = importlib.import_module(f"analyses.{ANALYSES[args.command]}")
    bridge = load_model_from_args(args)
    _check_layer_for(args, bridge)
    module.cli(args, bridge=bridge)
    if getattr(args, "save_probes", None):
        _save_probes(args, bridge)


def _save_probes(args, bridge) -> None:
    """``--save-probes DIR``: each dataset's sweep, fitted on its training split (the stores
    the analysis used, reopened), saved into ``DIR/<dataset>``."""
    from ppairs_lens.activations.pipeline import ensure_store
    from ppairs_lens.data import BUILTIN_NAMES
    from ppairs_lens.data.specs import load_dataset_spec
    from ppairs_lens.evaluation.saved_probes import save_store_probes

    for spec in args.datasets or list(BUILTIN_NAMES):
        dataset = load_dataset_spec(spec, max_pairs=args.max_pairs, seed=args.seed)
        store = ensure_store(bridge, dataset, args.stores, template=args.template,
                             names=args.hooks)
        path = save_store_probes(store, args.save_probes, **args.settings.split_kwargs(),
                                 n_boot=args.settings.n_boot)
        print(f"probes saved: {path}")


def _check_transfer(args) -> None:
    from analyses.cross_dataset import TransferConfig

    if args.datasets is not None and len(set(args.datasets)) < 2:
        raise PPairsError(f"transfer needs at least 2 different datasets, got --datasets "
                          f"{' '.join(args.datasets)}")
    if getattr(args, "kinds", None):
        TransferConfig(stores=[], kinds=tuple(args.kinds)).validate()


def _check_steer(args) -> None:
    from analyses.steering import SteeringConfig

    if args.alphas:
        SteeringConfig(stores=[], alphas=tuple(args.alphas))


def _check_finetune(args) -> None:
    from analyses.finetuning import FinetuningConfig

    if args.max_train is not None:
        FinetuningConfig(max_train=args.max_train)


#: Per command: its experiment's own config checks, run on the arguments alone (no stores
#: yet), so that what the config would refuse after the harvest is refused before the model
#: loads.
def _check_generate(args) -> None:
    """Strengths in units of the activations' median norm are bounded before the model loads;
    a raw strength once that norm is measured (``generate.cli``)."""
    from ppairs_lens.interventions.steering import check_alpha

    if not args.raw_alpha:
        for a in args.alpha:
            check_alpha(a, f"--alpha {a:g}")


CONFIG_CHECKS = {"transfer": _check_transfer, "steer": _check_steer,
                 "finetune": _check_finetune, "generate": _check_generate}


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one line naming what it is about, never the library's source line; a
    dependency's notice of its own deprecations, which a user cannot act on, is dropped."""
    ours = any(f"{part}" in str(filename) for part in ("ppairs_lens", "analyses"))
    if issubclass(category, (DeprecationWarning, FutureWarning)) and not ours:
        return
    print(f"ppairs-lens: warning: {' '.join(str(message).split())}", file=file or sys.stderr)


def main(argv: list[str] | None = None) -> int:
    pin_cpu_numerics()      # before any matrix product: the same bits at any thread count
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():     # the command's warnings, restored when it returns
        warnings.showwarning = _one_line_warning
        return _run(args)


def _run(args) -> int:
    try:
        if args.command == "datasets":
            _cmd_datasets(args)
            return 0
        if args.command == "data":
            _cmd_data(args)
            return 0
        check_args(args)  # before any model loads
        CONFIG_CHECKS.get(args.command, lambda _: None)(args)
        if args.command == "harvest":
            _cmd_harvest(args)
        elif args.command == "rank":
            _cmd_rank(args)
        elif args.command == "generate":
            from analyses import generate

            generate.cli(args, bridge=load_model_from_args(args))
        else:
            _cmd_analysis(args)
    except PPairsError as e:
        # Errors we raise on purpose already say what to fix: no traceback, one line.
        print(f"ppairs-lens {args.command}: error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
