"""The ``ppairs-lens`` command line: one subcommand per job, each an options class (its
fields are its options, :mod:`analyses.cli_args`) with the job it runs; :data:`COMMANDS` is
the registry. Every argument that can be checked without a model is checked before one loads
(a command's ``check``); every model loads through
:func:`analyses.cli_args.load_model_from_args`, so ``--dtype``, ``--device``, ``--device-map``
and ``--backend`` act everywhere.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from simple_parsing.helpers import field

from analyses.cli_args import (
    CalibrationOption,
    DatasetOptions,
    DatasetsOptions,
    EvalOptions,
    HookOptions,
    JudgeOptions,
    ModelOptions,
    OneLineParser,
    Options,
    SeedOption,
    SplitOptions,
    TemplateOption,
    check_args,
    check_layer,
    config_option,
    finite_float,
    finite_number,
    flag,
    judges_option,
    kinds_option,
    layer_option,
    load_model_from_args,
    max_pairs_option,
    null_option,
    option,
    positive_int,
    seed_int,
)
from ppairs_lens.cpu_numerics import pin_cpu_numerics
from ppairs_lens.errors import PPairsError


def _shard_arg(spec: str) -> str:
    """Check ``--shard`` while parsing, so a typo fails at once, before a model loads."""
    from ppairs_lens.activations.pipeline import parse_shard

    try:
        parse_shard(spec)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected i/n with 0 <= i < n (e.g. 0/4 ... 3/4), got {spec!r}") from None
    return spec


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


class Command:
    """What every subcommand has beside its options: the checks before a model loads
    (``check``) and its job (``run``)."""

    def check(self) -> None:
        """Every check that needs no model; a command whose experiment config refuses values
        its options can hold builds that config here too."""
        check_args(self)

    def run(self) -> None:
        raise NotImplementedError


@dataclass(kw_only=True)
class Datasets(Command, Options):
    """list built-in datasets and supported file formats"""

    name: ClassVar[str] = "datasets"

    def check(self) -> None:
        pass

    def run(self) -> None:
        from ppairs_lens.data import BUILTIN, FORMATS

        print("Built-in datasets (generated, no download):")
        for name in BUILTIN:
            print(f"  {name}")
        print("\nFile formats (pass a path; scored-items files as path:aspect):")
        for name, desc in FORMATS.items():
            print(f"  {name:14s} {desc}")


@dataclass(kw_only=True)
class Data(Command, Options):
    """the replication's data files: data fetch downloads every file of the provenance table
    at its pinned commit, verifies its SHA-256 and lays the files out like ../shared/datasets
    (base URL: $PPAIRS_LENS_DATA_MIRROR, else raw.githubusercontent.com)"""

    name: ClassVar[str] = "data"
    action: str = field(positional=True, choices=("fetch",), metavar="fetch",
                        help="fetch: download and verify the files")
    to: str | None = option(metavar="DIR", help="folder to fill (default: the package cache's "
                                                "datasets folder, $PPAIRS_LENS_CACHE/datasets "
                                                "or ~/.cache/ppairs-lens/datasets)")

    def check(self) -> None:
        pass

    def run(self) -> None:
        from analyses.replication.fetch import fetch_datasets

        fetch_datasets(self.to)


@dataclass(kw_only=True)
class Generate(Command, ModelOptions):
    """continuations of prompts steered by a saved probe, side by side with a random direction
    of the same norm"""

    name: ClassVar[str] = "generate"
    probe: str = option(metavar="DIR", required=True,
                        help="a saved probe, sweep or direction: folder or Hub repo id")
    alpha: list[float] = option(nargs="+", type=finite_number, metavar="A", required=True,
                                help="steering strengths, in units of the median activation "
                                     "norm at the hook over the prompts' tokens (0, unsteered, "
                                     "is always shown)")
    prompt: list[str] = option(nargs="+", metavar="TEXT", required=True,
                               help="prompts to continue, each a table")
    kind: str | None = option(help="a sweep's probe kind (default supervised)")
    hook: str | None = option(help="hook point to steer at (default: the probe's; for a sweep, "
                                   "the read-out its model card records as chosen on "
                                   "validation)")
    max_new_tokens: int = option(24, type=positive_int, help="tokens generated per continuation")
    positions: str = option("all", type=_positions_arg,
                            help="all (default), new (from the last prompt token on) or a "
                                 "start position P (0-based, in the whole sequence)")
    seed: int = option(0, type=int, help="seed of the random direction")
    chat: bool = flag("prompts as the model's chat turn")
    raw_alpha: bool = flag("alpha in raw activation units")
    width: int = option(48, type=positive_int, help="column width")

    def check(self) -> None:
        """Strengths in units of the median norm are bounded before the model loads; a raw
        one once that norm is measured (``generate.cli``)."""
        from ppairs_lens.interventions.steering import check_alpha

        check_args(self)
        if not self.raw_alpha:
            for a in self.alpha:
                check_alpha(a, f"--alpha {a:g}")

    def run(self) -> None:
        from analyses import generate

        generate.cli(self, bridge=load_model_from_args(self))


@dataclass(kw_only=True)
class Harvest(Command, TemplateOption, HookOptions, SeedOption, DatasetOptions, ModelOptions):
    """harvest contrast-pair activations into a store"""

    name: ClassVar[str] = "harvest"
    out: str | None = option(help="store folder (default: under --stores)")
    shard: str | None = option(type=_shard_arg, help="i/n: do only part i of n (0-based)")
    shard_size: int = option(256, type=positive_int, help="pairs per store shard")
    token_budget: int | None = option(type=positive_int,
                                      help="tokens held per forward pass (batch rows x sequence "
                                           "length; default: by device, "
                                           "ppairs_lens.activations.runner.default_token_budget)")

    def run(self) -> None:
        from ppairs_lens.activations.harvest import default_readouts, readout_names
        from ppairs_lens.activations.pipeline import (
            default_store_path,
            harvest_dataset,
            parse_shard,
        )
        from ppairs_lens.activations.prompts import default_template
        from ppairs_lens.activations.runner import HarvestSettings
        from ppairs_lens.data.specs import load_dataset_spec
        from ppairs_lens.models.loading import model_name

        dataset = load_dataset_spec(self.dataset, max_pairs=self.max_pairs, seed=self.seed)
        bridge = load_model_from_args(self)
        hooks = readout_names(bridge, self.hooks)  # a typo in --hooks fails before the harvest
        template = self.template or default_template(dataset)
        out = Path(self.out) if self.out else default_store_path(
            self.stores, model_name(bridge), dataset, template,
            None if hooks == default_readouts(bridge) else hooks)
        store = harvest_dataset(bridge, dataset, out, template=template,
                                shard_size=self.shard_size, shard=parse_shard(self.shard),
                                settings=HarvestSettings(token_budget=self.token_budget),
                                names=None if self.hooks is None else hooks)
        state = "complete" if store.complete else f"{len(store.missing_shards())} shards left"
        print(f"{store.path}: {store.n_pairs} pairs x 2 x {store.n_readouts} read-outs x "
              f"{store.d_model} ({state})")


def _check_layer_for(args, bridge) -> None:
    """``--layer`` against the read-outs the command's stores will hold."""
    if getattr(args, "layer", None) is None:
        return
    from ppairs_lens.activations.harvest import readout_names

    check_layer(args, len(readout_names(bridge, getattr(args, "hooks", None))))


class Analysis(Command):
    """A command that runs an experiment module's ``cli(args, bridge)`` on the loaded model
    (then ``--save-probes``)."""

    module: ClassVar[str]

    def run(self) -> None:
        module = importlib.import_module(f"analyses.{self.module}")
        bridge = load_model_from_args(self)
        _check_layer_for(self, bridge)
        module.cli(self, bridge=bridge)
        if getattr(self, "save_probes", None):
            _save_probes(self, bridge)


@dataclass(kw_only=True)
class Experiment(CalibrationOption, DatasetsOptions, ModelOptions):
    """The options every experiment command shares."""

    out: str = option("figures", help="folder for tables and figures")


@dataclass(kw_only=True)
class Shift(Analysis, JudgeOptions, TemplateOption, HookOptions, SplitOptions, Experiment):
    """train probes on some files, test them on others, with the prompted judge and the
    no-model baselines beside"""

    name: ClassVar[str] = "shift"
    module: ClassVar[str] = "distribution_shift"
    datasets: None = field(default=None, cmd=False)
    train: list[str] = option(nargs="+", metavar="SPEC", required=True,
                              help="files the probes are trained on (their training split, "
                                   "pooled; path, path:aspect, built-in name; @Name to name one)")
    test: list[str] = option(nargs="+", metavar="SPEC", required=True,
                             help="shifted files, every pair of each scored")
    max_pairs: object = max_pairs_option("file")
    out: str = option("figures", help="folder for the table and figure")
    kinds: list[str] | None = kinds_option("probe kinds (default: supervised pca mass_mean)")
    judges: list[str] = judges_option(("zero_shot",))


@dataclass(kw_only=True)
class Sweep(Analysis, JudgeOptions, TemplateOption, HookOptions, SplitOptions, Experiment):
    """fit every probe type at every layer; figure + table"""

    name: ClassVar[str] = "sweep"
    module: ClassVar[str] = "layer_sweep"
    save_probes: str | None = option(metavar="DIR",
                                     help="also save each dataset's probes (every kind and "
                                          "read-out, fitted on its training split) into "
                                          "DIR/<dataset> (safetensors + metadata.json; "
                                          "ppairs_lens.load_sweep)")
    kinds: list[str] | None = kinds_option("probe kinds swept (default: supervised pca "
                                           "mass_mean; ccs is fitted at every read-out on the "
                                           "validation split too, slower)")


def _save_probes(args, bridge) -> None:
    """``--save-probes DIR``: each dataset's sweep, fitted on its training split of the
    stores the analysis used, saved into ``DIR/<dataset>``."""
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


@dataclass(kw_only=True)
class Transfer(Sweep):
    """cross-dataset transfer and cosine similarity of directions"""

    name: ClassVar[str] = "transfer"
    module: ClassVar[str] = "cross_dataset"
    layer: int | None = layer_option("read-out index of the transfer matrix and cosines "
                                     "(default: chosen on a validation split of each source's "
                                     "training pairs; -1 the final norm)")
    kinds: list[str] | None = kinds_option("probe kinds of the transfer matrix and cosines "
                                           "(default: all four; ccs is fitted at the cosine "
                                           "read-out only)")

    def check(self) -> None:
        from analyses.cross_dataset import TransferConfig

        check_args(self)
        if self.datasets is not None and len(set(self.datasets)) < 2:
            raise PPairsError(f"transfer needs at least 2 different datasets, got --datasets "
                              f"{' '.join(self.datasets)}")
        self.config(TransferConfig, stores=[]).validate()


@dataclass(kw_only=True)
class Ablate(Analysis, TemplateOption, SplitOptions, Experiment):
    """directional ablation of probe directions, with controls"""

    name: ClassVar[str] = "ablate"
    module: ClassVar[str] = "ablation"
    layer: int | None = layer_option("read-out index of the probe directions (default: chosen "
                                     "on a validation split of the training pairs)")
    n_random: int | None = null_option("ablated", "isotropic random directions",
                                       "AblationConfig")
    n_matched: int | None = null_option("ablated", "random directions drawn from the training "
                                                   "contrasts' covariance", "AblationConfig")


@dataclass(kw_only=True)
class Steer(Analysis, TemplateOption, SplitOptions, Experiment):
    """steering dose-response of the judge to probe directions, against random and
    variance-matched nulls"""

    name: ClassVar[str] = "steer"
    module: ClassVar[str] = "steering"
    layer: int | None = layer_option("read-out index of the probe directions and of the "
                                     "steering hook (default: chosen on a validation split)")
    n_random: int | None = null_option("added", "isotropic random directions", "SteeringConfig")
    n_matched: int | None = null_option("added", "random directions drawn from the training "
                                                 "contrasts' covariance", "SteeringConfig")
    alphas: list[float] | None = config_option(nargs="+", type=finite_float, metavar="A",
                                        help="steering strengths in units of the read-out's "
                                             "median activation norm (default: -1 -0.5 -0.25 "
                                             "0.25 0.5 1)")

    def check(self) -> None:
        from analyses.steering import PRESETS, SteeringConfig

        check_args(self)
        self.config(SteeringConfig, PRESETS, stores=[])


@dataclass(kw_only=True)
class Finetune(Analysis, TemplateOption, SplitOptions, Experiment):
    """probes against LoRA and full finetuning on the same labels, with cost and a label
    curve"""

    name: ClassVar[str] = "finetune"
    module: ClassVar[str] = "finetuning"
    max_train: int | None = config_option(
        type=positive_int, help="training comparisons every method gets (default 8; --quick 4)")
    curve_sizes: list[int] | None = config_option(
        nargs="+", type=positive_int, help="label counts of the label curve (default 4 8; "
                                           "--quick 4)")
    curve_seeds: list[int] | None = config_option(
        nargs="+", type=seed_int, help="seeds of each label count's subset (default 0)")

    def check(self) -> None:
        from analyses.finetuning import PRESETS, FinetuningConfig

        check_args(self)
        self.config(FinetuningConfig, PRESETS)


@dataclass(kw_only=True)
class Rank(Command, EvalOptions, Experiment):
    """PAIRS ranking and insertion scoring against baselines"""

    name: ClassVar[str] = "rank"
    layer: int | None = layer_option("read-out index of the probe (default: chosen on held-out "
                                     "training pairs)")

    def run(self) -> None:
        """PAIRS ranking, then insertion scoring: two experiments, one model load."""
        from analyses import insertion, ranking

        bridge = None
        if ranking.wants_model(self) or insertion.wants_model(self):
            bridge = load_model_from_args(self)
            _check_layer_for(self, bridge)
        ranking.cli(self, bridge=bridge)
        insertion.cli(self, bridge=bridge)


@dataclass(kw_only=True)
class Run(Analysis, SplitOptions, Experiment):
    """the main job: the replication on the embedded default"""

    name: ClassVar[str] = "run"
    module: ClassVar[str] = "replication.run"
    recompute: bool = flag("redo every step (default: steps whose config, stores and code are "
                           "unchanged since the last run into --out are reused)")
    shared_data: str | None = option(metavar="DIR",
                                     help="folder of the seed experiments' datasets (the "
                                          "replication); not given: ../shared/datasets, or "
                                          "where that is absent the files fetched into the "
                                          "cache as by `data fetch` (a failed fetch: the "
                                          "built-ins); a folder named here must hold them")
    shared_data_given: bool = field(default=False, cmd=False)
    extra: list[str] = option([], nargs="+", metavar="SPEC",
                              help="further files of the supported formats (path or "
                                   "path:aspect) for the probes-vs-prompting and transfer "
                                   "experiments")
    full: bool = flag("the papers' sizes (for a GPU; hours on a CPU); not with --quick")
    builtins: bool = flag("run the main job on the built-ins (generated datasets) instead of "
                          "the seed experiments' files")


DESCRIPTION = ("Contrast-pair probes on TransformerLens models, and the replication of the "
               "PPairS experiments (run). Every option is checked before a model loads; "
               "ppairs-lens COMMAND --help lists a command's options with their defaults.")
#: Every subcommand, by name, in the order ``--help`` lists them.
COMMANDS: dict[str, type[Command]] = {c.name: c for c in (
    Datasets, Data, Generate, Harvest, Shift, Sweep, Transfer, Ablate, Steer, Finetune, Rank,
    Run)}


class _Program(OneLineParser):
    """The top-level parser: ``parse_args`` gives the chosen command's options instance."""

    def parse_args(self, args=None, namespace=None):
        ns = super().parse_args(args, namespace)
        return ns.options


def build_parser() -> argparse.ArgumentParser:
    parser = _Program(prog="ppairs-lens", description=DESCRIPTION)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineParser)
    for name, cls in COMMANDS.items():
        doc = " ".join(cls.__doc__.split())
        p = sub.add_parser(name, help=doc, description=doc)
        p.add_arguments(cls, dest="options")
    return parser


def _one_line_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A warning as one line, never the library's source line; a dependency's notice of its
    own deprecations, which a user cannot act on, is dropped."""
    ours = any(part in str(filename) for part in ("ppairs_lens", "analyses"))
    if issubclass(category, (DeprecationWarning, FutureWarning)) and not ours:
        return
    print(f"ppairs-lens: warning: {' '.join(str(message).split())}", file=file or sys.stderr)


def main(argv: list[str] | None = None) -> int:
    pin_cpu_numerics()      # before any matrix product: the same bits at any thread count
    args = build_parser().parse_args(argv)
    with warnings.catch_warnings():     # the command's warnings, restored when it returns
        warnings.showwarning = _one_line_warning
        try:
            args.check()    # before any model loads
            args.run()
        except PPairsError as e:
            # Errors we raise on purpose already say what to fix: no traceback, one line.
            print(f"ppairs-lens {args.name}: error: {' '.join(str(e).split())}",
                  file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
