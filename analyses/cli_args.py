"""The ``ppairs-lens`` command's options, as dataclasses: a command's options class *is* its
command line (simple-parsing builds each subcommand's parser from the fields), and the
command reads the parsed instance by attribute. Each idea is one mixin here (the model, the
datasets, the evaluation protocol, the judges...), composed by the commands in
:mod:`analyses.cli`.

Everything that can be checked without a model is checked before one loads, so a typo costs
no model load: numbers while parsing (one-line errors, exit status 2), dataset specs and the
template file by loading them (:func:`check_args`), and where an experiment's config refuses
values its options can hold (transfer, steer, finetune), that config, built in the command's
``check``. What needs the model (hook names, the range of ``--layer``) is checked right after
it loads, before any harvest.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import ClassVar, Literal

import simple_parsing
from simple_parsing import DashVariant, NestedMode
from simple_parsing.helpers import field

from ppairs_lens.errors import PPairsError
from ppairs_lens.judges.held_out import JUDGE_FORMS
from ppairs_lens.models.loading import BACKENDS
from ppairs_lens.presets import DEMO, PRESET_NAMES, PREVIEWS, at_preset, max_pairs_at, settings_at
from ppairs_lens.probes.estimators import ALL_PROBE_KINDS

__all__ = ["SPLITS", "CalibrationOption", "DatasetOptions", "DatasetsOptions", "EvalOptions",
           "HookOptions", "JudgeOptions", "ModelOptions", "OneLineParser", "Options",
           "PairLimitsAction", "SeedOption", "SplitOptions", "TemplateOption", "check_args",
           "check_layer", "config_option", "finite_float", "finite_number", "flag",
           "judges_option", "kinds_option", "layer_option", "load_model_from_args",
           "max_pairs_option", "null_option", "option", "positive_int", "seed_int"]

SPLITS = ("auto", "context", "item", "pair")
#: Commands whose datasets a preview preset caps (``ppairs_lens.presets.max_pairs_at``;
#: ``--max-pairs`` wins); ``run`` caps its ``--builtins`` / ``--datasets`` through its quick
#: preset, with the same number, and ``rank`` sizes its contexts through its own.
PREVIEW_CAPPED = ("harvest", "sweep", "transfer", "ablate", "steer", "finetune", "shift")
#: The presets a flag of their name picks (``--quick``, ``--full``); none: the demo.
FLAG_PRESETS = tuple(n for n in PRESET_NAMES if n != DEMO)
#: How simple-parsing lays out every subcommand: ``--n-boot`` (not ``--n_boot``), the mixins'
#: fields without a prefix, no ``--config_path``.
PARSER_STYLE = {"add_option_string_dash_variants": DashVariant.DASH,
                "nested_mode": NestedMode.WITHOUT_ROOT, "add_config_path_arg": False}


class OneLineParser(simple_parsing.ArgumentParser):
    """An argument parser whose errors are one line (and exit status 2); ``--help`` shows
    each option's default where its help does not already say it."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _DefaultsHelp)
        super().__init__(*args, **{**PARSER_STYLE, **kwargs})

    def _preprocessing(self, *args, **kwargs) -> None:
        """Each value shown as its option's name (``--out OUT``) unless the field names it
        (upper case) or it has choices: simple-parsing's type names (``[str]``, ``int``) and
        its dotted destinations say less."""
        super()._preprocessing(*args, **kwargs)
        for group in self._action_groups:   # "Sweep ['options']" and its class docstring
            if group.title and group.title.endswith("['options']"):
                group.title, group.description = f"{self.prog.split()[-1]} options", None
        for action in self._actions:
            named = isinstance(action.metavar, str) and action.metavar.isupper()
            if action.option_strings and action.nargs != 0 and not named and (
                    action.metavar is not None or action.choices is None):
                action.metavar = action.dest.rsplit(".", 1)[-1].upper()

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


class _DefaultsHelp(argparse.HelpFormatter):
    def _get_help_string(self, action):
        text = action.help or ""
        if ("default" in text or action.default is None or action.default is False
                or action.default is argparse.SUPPRESS or action.default == []):
            return text
        shown = " ".join(map(str, action.default)) if isinstance(action.default, (list, tuple)) \
            else action.default
        return f"{text} (default: {shown})"


def option(default=None, help: str = "", **argparse_kw):
    """One option with any argparse keyword; ``nargs=None`` by default, so an option whose
    default is None still takes one value."""
    kw = {"nargs": None, "required": False, **argparse_kw}
    if isinstance(default, list):
        return field(default_factory=lambda: list(default), help=help, **kw)
    return field(default=default, help=help, **kw)


def config_option(default=None, help: str = "", **argparse_kw):
    """An option that sets the field of its name in the command's experiment config
    (:meth:`Options.config`): not given (None), the config's value at the preset stays."""
    return option(default, help, metadata={"config": True}, **argparse_kw)


def flag(help: str):
    return field(default=False, action="store_true", help=help)


def _whole_number(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= {least}, got {text!r}") \
            from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
    return value


def positive_int(text: str) -> int:
    return _whole_number(text, 1)


def seed_int(text: str) -> int:
    """A seed: a whole number >= 0 (numpy's generators refuse negative seeds, which would
    surface only after the harvest)."""
    return _whole_number(text, 0)


def pair_limit(text: str) -> tuple[str | None, int]:
    """One ``--max-pairs`` entry: ``N`` (every dataset) or ``NAME=N``."""
    name, sep, n = text.rpartition("=")
    if not sep:
        return None, positive_int(text)
    if not name.strip():
        raise argparse.ArgumentTypeError(f"expected N or NAME=N, got {text!r}")
    return name.strip(), positive_int(n)


class PairLimitsAction(argparse.Action):
    """``--max-pairs N NAME=N ...`` as one :class:`~ppairs_lens.data.specs.PairLimits`."""

    def __call__(self, parser, namespace, values, option_string=None):
        from ppairs_lens.data.specs import PairLimits

        bare = [n for name, n in values if name is None]
        if len(bare) > 1:
            raise argparse.ArgumentError(self, f"one limit for every dataset at most, got "
                                               f"{' '.join(map(str, bare))}")
        try:
            limits = PairLimits(bare[0] if bare else None,
                                tuple((name, n) for name, n in values if name is not None))
        except ValueError as e:
            raise argparse.ArgumentError(self, str(e)) from None
        setattr(namespace, self.dest, limits)


def share(text: str) -> float:
    """A share strictly between 0 and 1 (``--test-size``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number between 0 and 1, got {text!r}") \
            from None
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError(f"must be strictly between 0 and 1, got {value}")
    return value


def template_file(text: str):
    """``--template FILE``, read and checked while parsing."""
    from ppairs_lens.activations.prompts import load_template

    try:
        return load_template(text)
    except PPairsError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def judge_limit(text: str) -> tuple[str, int]:
    """``FORM=N`` (``--judge-max-pairs``): a judge form and its most held-out pairs."""
    form, sep, n = text.partition("=")
    if not sep or form not in JUDGE_FORMS:
        raise argparse.ArgumentTypeError(f"expected FORM=N with FORM one of "
                                         f"{', '.join(JUDGE_FORMS)}, got {text!r}")
    return form, positive_int(n)


def finite_number(text: str) -> float:
    """A finite number (``generate --alpha``: its bound depends on ``--raw-alpha``, checked
    by the ``generate`` command's ``check``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def finite_float(text: str) -> float:
    """A steering strength (``--alphas``): a finite number within
    :data:`~ppairs_lens.interventions.steering.MAX_ALPHA` (``1e39`` overflows the
    activations)."""
    from ppairs_lens.interventions.steering import check_alpha

    value = finite_number(text)
    try:
        return check_alpha(value, text)
    except PPairsError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


TEMPLATE_HELP = ("prompt template file: a JSON object with \"kind\" (\"comparison\" or "
                 "\"statement\") and any ComparisonTemplate / StatementTemplate fields to change "
                 "(user, assistant, choices, system, context_block, no_context_block, "
                 "include_description), e.g. {\"kind\": \"comparison\", \"choices\": "
                 "[\" A\", \" B\"], \"assistant\": \"The {comparative} {item} is Choice\"}; "
                 "applies to every dataset, which must be of its kind; the two prompts must "
                 "differ in their final token only")


@dataclass(kw_only=True)
class Options:
    """What every command's options give beside their fields: the preset they pick
    (``preset``) and the one evaluation protocol (``settings``)."""

    #: The subcommand these options belong to (its registry entry, ``analyses.cli.COMMANDS``).
    name: ClassVar[str] = ""

    @property
    def preset(self) -> str:
        """``quick``, ``full`` or the defaults, ``demo`` (both flags together are refused by
        :func:`check_args`)."""
        return next((n for n in FLAG_PRESETS if getattr(self, n, False)), DEMO)

    def config(self, cls, presets=None, **fixed):
        """The experiment config ``cls(**fixed)`` with these options' ``settings``, at their
        preset (``presets``: the experiment's ``PRESETS``), then ``fixed`` and every config
        option given (:func:`config_option`; a list as a tuple), which win over the preset."""
        names = {f.name for f in fields(cls)}
        cfg = cls(**{"settings": self.settings, **fixed} if "settings" in names else fixed)
        if presets is not None:
            cfg = at_preset(cfg, presets, self.preset)
        given = {f.name: getattr(self, f.name) for f in fields(self)
                 if f.metadata.get("config") and f.name in names and f.name not in fixed
                 and getattr(self, f.name) is not None}
        given = {k: tuple(v) if isinstance(v, list) else v for k, v in given.items()}
        return replace(cfg, **{k: v for k, v in fixed.items() if k != "settings"}, **given)

    @property
    def settings(self):
        """The command's one :class:`~ppairs_lens.evaluation.protocol.EvalSettings`: the
        built-ins' protocol at the options' preset, then every option given."""
        from ppairs_lens.evaluation.protocol import EvalSettings

        s = settings_at(EvalSettings(), self.preset)
        given = {"seed": getattr(self, "seed", None), "n_boot": getattr(self, "n_boot", None),
                 "test_size": getattr(self, "test_size", None),
                 "split_by": getattr(self, "split", None)}
        return s.but(**{k: v for k, v in given.items() if v is not None})


@dataclass(kw_only=True)
class ModelOptions(Options):
    """The model every command loads (:func:`load_model_from_args`) and the preset."""

    model: str | None = option(help="HF model id or local folder (default: the embedded "
                                    "SmolLM2-135M-Instruct)")
    dtype: Literal["float32", "bfloat16", "float16"] = option("float32",
                                                              help="the weights' dtype")
    device: str | None = option(help="e.g. cpu, cuda, cuda:1")
    device_map: str | None = option(help="e.g. auto: spread a model too big for one GPU over "
                                         "the visible GPUs")
    backend: str = option("bridge", choices=tuple(BACKENDS),
                          help="bridge: TransformerBridge (default); hooked: a classic "
                               "HookedTransformer (transformer-lens<4)")
    quick: bool = flag(
        f"the quick preset, for a preview or a test: the experiment's own small sizes (its "
        f"config's PRESETS), at most {PREVIEWS['quick'].n_boot} resamples, PNG figures only; "
        f"{', '.join(PREVIEW_CAPPED)} and run --builtins: at most "
        f"{PREVIEWS['quick'].max_pairs} pairs per dataset unless --max-pairs")


def max_pairs_option(what: str):
    """``--max-pairs N NAME=N ...``: one :class:`~ppairs_lens.data.specs.PairLimits`."""
    return option(nargs="+", type=pair_limit, action=PairLimitsAction, metavar="N|NAME=N",
                  help=f"use at most N pairs of each {what} (a prefix of one seeded order of "
                       "its contexts, so the last context may be cut), or of the one named "
                       "NAME (its @Name, else its file's name); every limit of a file shares "
                       "its store: a smaller one reads pairs a larger one harvested")


@dataclass(kw_only=True)
class DatasetsOptions(Options):
    """The datasets a command runs on, how many pairs of each, and where their stores lie."""

    datasets: list[str] | None = option(nargs="+", metavar="SPEC",
                                        help="built-in names or paths (path:aspect for "
                                             "scored-items files)")
    # object, not PairLimits | None: simple-parsing would read a dataclass type as a nested
    # group of options; the option's action builds the PairLimits (None: no limit)
    max_pairs: object = max_pairs_option("dataset")
    stores: str = option("stores", help="root folder of activation stores")


@dataclass(kw_only=True)
class DatasetOptions(DatasetsOptions):
    """One dataset in place of several (``harvest``)."""

    datasets: None = field(default=None, cmd=False)
    dataset: str = option(help="built-in name or a path (path:aspect for scored-items files)",
                          required=True)


@dataclass(kw_only=True)
class SeedOption(Options):
    seed: int = option(0, type=seed_int, help="seed of the dataset subsets, splits and "
                                              "bootstrap resamples")


@dataclass(kw_only=True)
class EvalOptions(SeedOption):
    """The shared evaluation protocol's options, read back as one record (``settings``)."""

    n_boot: int | None = option(type=positive_int,
                                help="bootstrap resamples of every confidence interval "
                                     f"(default 2000; --quick {PREVIEWS['quick'].n_boot})")


@dataclass(kw_only=True)
class SplitOptions(EvalOptions):
    """How the held-out pairs are chosen."""

    test_size: float | None = option(type=share, help="held-out share of the leak groups "
                                                      "(default 0.3; the replication 0.5, as "
                                                      "the paper)")
    split: str = option("auto", alias=["--split-by"], choices=SPLITS,
                        help="how held-out pairs are chosen so that nothing leaks: auto "
                             "(default: whole groups where records share one (a context, an "
                             "item block, a statement's subject), else items if they recur "
                             "(cross pairs dropped), else pairs), context (whole groups), item, "
                             "or pair")


@dataclass(kw_only=True)
class HookOptions(Options):
    hooks: list[str] | None = option(nargs="+", metavar="HOOK",
                                     help="read-outs: hook names, presets (paper, full) or glob "
                                          "patterns such as 'blocks.*.hook_resid_pre' (default: "
                                          "every block's hook_resid_post and ln_final.hook_out)")


@dataclass(kw_only=True)
class TemplateOption(Options):
    # a Template or None; object, as max_pairs (a template is a dataclass too)
    template: object = option(type=template_file, metavar="FILE", help=TEMPLATE_HELP)


@dataclass(kw_only=True)
class CalibrationOption(Options):
    no_calibration: bool = flag("skip timing a few prompts before the work: the estimate uses "
                                "the rates remembered from an earlier run on this model and "
                                "device (measured rates are remembered in the cache's "
                                "rates.json)")


def judges_option(default: tuple[str, ...] | None = None):
    """``--judges`` (default: ``default``, else every form; ``none`` with a form is refused
    by :func:`check_args`)."""
    forms = tuple(JUDGE_FORMS)
    default = tuple(default or forms)
    return option(list(default), nargs="+", choices=[*forms, "none"], metavar="FORM",
                  help=f"prompted judge forms run on the held-out pairs (choose from "
                       f"{', '.join(forms)}; none: no judge; default: {' '.join(default)}). "
                       "Finished judges are remembered beside their store and reused")


@dataclass(kw_only=True)
class JudgeOptions(Options):
    """The prompted judges beside the probes, each on a seeded subset of whole held-out
    contexts (``judge_max_pairs``: a list of ``(form, n)``)."""

    judges: list[str] = judges_option()
    judge_max_pairs: list[tuple[str, int]] = option(
        [], nargs="+", type=judge_limit, metavar="FORM=N",
        help="run a judge form on at most N held-out pairs (whole contexts, seeded), e.g. "
             "few_shot=40 (its long prompts cost most)")


def kinds_option(help_: str):
    """``--kinds``: probe kinds, any of ``ALL_PROBE_KINDS`` (default None: the command's own)."""
    return config_option(nargs="+", choices=ALL_PROBE_KINDS, metavar="KIND",
                         help=f"{help_} (choose from {', '.join(ALL_PROBE_KINDS)})")


def layer_option(help_: str):
    return config_option(type=int, help=help_)


def null_option(verb: str, what: str, config: str):
    return config_option(type=positive_int,
                         help=f"{what}, {verb} as a null (default: {config}'s value at the "
                              "preset; given, it wins over --quick's)")


#: Where ``run`` looks for the seed experiments' data unless ``--shared-data`` says.
DEFAULT_SHARED_DATA = "../shared/datasets"


def check_args(args) -> None:
    """Every check that needs no model: output folders, ``run``'s presets and data folder,
    dataset specs (loaded), the template against each dataset. A preview without
    ``--max-pairs`` caps the pairs here."""
    from ppairs_lens.activations.prompts import check_template_fits
    from ppairs_lens.data.specs import PairLimits, load_dataset_spec
    from ppairs_lens.io.atomic import check_output_folder

    for flag in ("out", "stores", "save_probes"):
        if getattr(args, flag, None) is not None:  # stores already there may only be read
            check_output_folder(getattr(args, flag), f"--{flag.replace('_', '-')}",
                                may_be_read_only=flag == "stores")
    _check_device(getattr(args, "device", None))
    if args.name == "run":
        _check_run(args)
    judges = getattr(args, "judges", None) or []
    if "none" in judges and len(set(judges)) > 1:
        raise PPairsError(f"--judges none cannot be combined with other forms "
                          f"({' '.join(j for j in judges if j != 'none')})")
    limits = getattr(args, "max_pairs", None)
    cap = max_pairs_at(args.preset)
    if (cap is not None and args.name in PREVIEW_CAPPED
            and (limits is None or limits.default is None)):
        args.max_pairs = replace(limits or PairLimits(), default=cap)
    specs = [args.dataset] if getattr(args, "dataset", None) else (getattr(args, "datasets", None)
                                                                   or [])
    specs = [*specs, *(getattr(args, "train", None) or []), *(getattr(args, "test", None) or [])]
    template = getattr(args, "template", None)
    if template is not None and not specs:
        raise PPairsError("--template applies to every dataset: name them with --datasets "
                          "(the default ones are of both kinds)")
    tokenizer = _tokenizer(args) if template is not None else None
    for spec in getattr(args, "extra", None) or []:  # run's --extra files, read the same way
        load_dataset_spec(spec, max_pairs=getattr(args, "max_pairs", None), seed=args.seed)
    loaded = {}
    for spec in specs:
        dataset = load_dataset_spec(spec, max_pairs=getattr(args, "max_pairs", None),
                                    seed=args.seed)
        if template is not None:
            check_template_fits(template, dataset, tokenizer)
        loaded[spec] = dataset
    if getattr(args, "train", None) and getattr(args, "test", None):
        _check_shift_sets(args.train, args.test, loaded)
    _check_names(loaded)
    _check_limit_names(getattr(args, "max_pairs", None), loaded)


def _check_limit_names(limits, loaded: dict) -> None:
    """A named ``--max-pairs`` must name a dataset of the command (a misspelt name would
    leave that dataset unlimited)."""
    from ppairs_lens.data.specs import limit_names

    if limits is None or not limits.named:
        return
    names = sorted({n for spec, d in loaded.items() for n in limit_names(spec, d)})
    for name in limits.unknown(names):
        raise PPairsError(f"--max-pairs {name}={limits.of(name)}: no dataset here is named "
                          f"{name!r} (the names: {', '.join(names) or 'none'}); use a dataset's "
                          "@Name or its file's name")


#: Untied pairs a shifted (test) set needs for a drop to be measured at all.
MIN_UNTIED_TEST_PAIRS = 2


def _pair_key(r) -> tuple:
    if not hasattr(r, "item1"):                     # a statement: its text
        return (getattr(r, "statement", None) or getattr(r, "text", ""),)
    return (r.context or "", *sorted((r.item1, r.item2)))


def _check_shift_sets(train: list[str], test: list[str], loaded: dict) -> None:
    """A shifted set must share no pair with the training sets (a "drop" measured partly on
    training pairs is none) and hold enough untied pairs to be scored."""
    seen = {_pair_key(r): spec for spec in train for r in loaded[spec].records}
    for spec in test:
        recs = loaded[spec].records
        shared = [seen[_pair_key(r)] for r in recs if _pair_key(r) in seen]
        if shared:
            raise PPairsError(f"--test {spec} shares {len(shared)} of its {len(recs)} pairs with "
                              f"the training set {shared[0]}: a drop on them would be measured "
                              "partly on training pairs; give a test set of other pairs")
        untied = sum(r.label in (1, 2) for r in recs if hasattr(r, "item1"))
        if all(hasattr(r, "item1") for r in recs) and untied < MIN_UNTIED_TEST_PAIRS:
            raise PPairsError(f"--test {spec} has {untied} untied pair(s) of {len(recs)}: too few "
                              f"to score (at least {MIN_UNTIED_TEST_PAIRS})")


def _check_names(loaded: dict) -> None:
    """Display names are unique: two datasets under one name would merge in every table."""
    by_name: dict[str, str] = {}
    for spec, d in loaded.items():
        if d.name in by_name and by_name[d.name] != spec:
            raise PPairsError(f"{by_name[d.name]} and {spec} are both named {d.name!r}: their "
                              "rows would merge in every table; name one with @Name")
        by_name[d.name] = spec


def _check_run(args) -> None:
    """``run``: one preset at most; a data folder given with ``--shared-data`` must exist and
    hold at least one of the replication's files (the default one may be absent: a clone
    without ``../shared`` runs the built-ins, and says so)."""
    from analyses.replication.sets import replication_files

    given = [f"--{p}" for p in FLAG_PRESETS if getattr(args, p, False)]
    if len(given) > 1:
        raise PPairsError(f"{' and '.join(given)} exclude each other: choose one preset")
    explicit = getattr(args, "shared_data", None) is not None
    args.shared_data_given = explicit  # only the default folder may be fetched in its place
    if not explicit:
        args.shared_data = DEFAULT_SHARED_DATA
    root = Path(args.shared_data)
    expected = replication_files()
    if explicit and not root.is_dir():
        raise PPairsError(f"--shared-data {root}: no such folder (expected the seed "
                          f"experiments' data: {', '.join(expected)})")
    builtins = bool(getattr(args, "builtins", False) or getattr(args, "datasets", None))
    if getattr(args, "extra", None) and (builtins or not root.is_dir()):
        why = ("--builtins or --datasets runs the main job on the built-ins" if builtins else
               f"{root} is absent, so the main job runs on the built-ins")
        raise PPairsError(f"--extra adds files to the replication, but {why}: the files would "
                          "be ignored")
    if getattr(args, "full", False) and builtins:
        raise PPairsError("--full sizes the replication to the papers' data, but --builtins or "
                          "--datasets runs the main job on the built-ins, which has no such "
                          "size: drop one")
    if getattr(args, "max_pairs", None) is not None and args.max_pairs.named:
        raise PPairsError("run takes one --max-pairs for every dataset (its --builtins or "
                          "--datasets), not NAME=N")
    if builtins or not root.is_dir():
        return  # the main job on the built-ins (the folder is not read)
    if getattr(args, "max_pairs", None) is not None:
        raise PPairsError(f"--max-pairs sizes the built-ins or --datasets files, but the main "
                          f"job reads the seed experiments' files in {root} at its preset's "
                          "sizes (--quick, the demo, --full): drop --max-pairs, or add "
                          "--builtins / --datasets")
    if not any((root / rel).is_file() for rel in expected):
        raise PPairsError(f"--shared-data {root} holds none of the replication's datasets "
                          f"(expected at least one of {', '.join(expected)})")


def _check_device(device: str | None) -> None:
    """A device torch knows and this machine has (else torch fails deep inside the load)."""
    if device is None:
        return
    import torch

    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError):
        raise PPairsError(f"--device {device!r} is not a device torch knows (e.g. cpu, cuda, "
                          "cuda:1, mps)") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise PPairsError(f"--device {device}: no CUDA device is available on this machine")


def _tokenizer(args):
    """The model's tokenizer, to check a template's contrast pairs before the model loads; None
    where it cannot be had without the model (the model's own load then says why)."""
    from ppairs_lens.models.tokenizer import load_tokenizer

    try:
        return load_tokenizer(args.model)
    except Exception:  # noqa: BLE001 - any failure here is reported by the model load instead
        return None


def load_model_from_args(args):
    """The model every command loads: ``--model`` with ``--dtype``, ``--device``,
    ``--device-map`` and ``--backend``."""
    from ppairs_lens.models.loading import load_model
    from ppairs_lens.models.spec import ModelSpec

    return load_model(ModelSpec.from_args(args))


def check_layer(args, n_readouts: int) -> None:
    """Refuse a ``--layer`` outside the ``n_readouts`` read-outs (negative counts from the end)."""
    layer = getattr(args, "layer", None)
    if layer is not None and not -n_readouts <= layer < n_readouts:
        raise PPairsError(f"--layer {layer} is out of range: there are {n_readouts} read-outs "
                          f"(0..{n_readouts - 1}, or -{n_readouts}..-1 from the end)")
