"""Saving, loading and pushing to the Hub fitted probes, sweeps and directions.

Each object is a folder: ``tensors.safetensors`` (the arrays), written atomically and first,
then ``metadata.json`` (a :class:`ProbeMetadata`) with a sha256 of every tensor, so a folder
counts only once it is whole, and a flipped byte, a truncated file or a field of the wrong
JSON type is refused naming the file and the field. Another ``format_version`` is refused: no
released version wrote one, and a folder without checksums could not be verified.

Loading refuses an object fitted for another model or read-out than the caller expects,
naming every field that differs (as an activation store refuses another harvest). A loaded
direction drives :func:`ppairs_lens.interventions.ablation.ablate` and
:func:`ppairs_lens.interventions.steering.steer`. :func:`push_to_hub` uploads the folder's
model card, its metrics and license kept, with the loading snippet naming the repo id.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from jaxtyping import Float
from safetensors import safe_open
from torch import Tensor

from ppairs_lens.errors import ProbeError
from ppairs_lens.io.atomic import atomic_save_tensors, atomic_write_text, check_output_folder
from ppairs_lens.io.checksums import tensor_sha256
from ppairs_lens.io.json_fields import array_of, check_fields, is_int, is_number, json_object
from ppairs_lens.io.json_fields import optional
from ppairs_lens.probes.estimators import PairProbe, make_probe
from ppairs_lens.probes.hub import (
    CARD,
    DEFAULT_LICENSE,
    commit_operations,
    push_folder,
    read_model_card,
    render_card,
    resolve_saved,
    write_model_card,
)
from ppairs_lens.probes.sweep import SweepProbes

__all__ = ["FORMAT_VERSION", "ProbeMetadata", "metadata_from_store", "check_metadata",
           "save_probe", "load_probe", "save_sweep", "load_sweep", "save_direction",
           "load_direction", "read_metadata", "hub_operations", "push_to_hub"]

#: 2: ``sha256`` of every tensor in ``metadata.json`` (1: none).
FORMAT_VERSION = 2
TENSORS, METADATA = "tensors.safetensors", "metadata.json"
#: Fields a loader may be asked to match (``load_*(path, model=..., hook=...)``).
CHECKED = ("model", "hook_names", "template_hash", "dataset_fingerprint", "d_model")


@dataclass(frozen=True)
class ProbeMetadata:
    """What a saved probe, sweep or direction was fitted on (``metadata.json``)."""

    object: str  # "probe", "sweep" or "direction"
    kinds: tuple[str, ...] = ()
    model: str | None = None
    hook_names: tuple[str, ...] = ()  # one per layer of the saved object
    layers: tuple[int, ...] = ()  # the read-out index of each, in the store
    d_model: int | None = None
    template_hash: str | None = None
    dataset: str | None = None
    dataset_fingerprint: str | None = None
    split: str | None = None  # the split mode used ("group", "item", "pair", ...)
    n_train: int | None = None
    C: float | None = None
    standardize: bool | None = None
    params: dict[str, Any] = field(default_factory=dict)  # estimator parameters (get_params)
    fitted: dict[str, Any] = field(default_factory=dict)  # scalar fitted attributes
    package_version: str = ""
    format_version: int = FORMAT_VERSION
    sha256: dict[str, str] = field(default_factory=dict)  # per tensor of tensors.safetensors

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str, source: str | Path = METADATA) -> ProbeMetadata:
        """Parse ``metadata.json``, refusing a value of the wrong JSON type by field."""
        raw = json_object(text, source, ProbeError)
        check_fields(raw, _FIELD_TYPES, source, ProbeError, required=("object",))
        kw = {k: v for k, v in raw.items() if k in {f.name for f in fields(cls)}}
        for k in ("kinds", "hook_names", "layers"):
            kw[k] = tuple(kw.get(k, ()))
        return cls(**kw)


_STRINGS = array_of(lambda v: isinstance(v, str), "strings")
_OBJECT = (lambda v: isinstance(v, dict), "a JSON object")
#: The JSON type of each metadata field (any other field: a string or null).
_FIELD_TYPES = {
    "object": (lambda v: v in ("probe", "sweep", "direction"),
               '"probe", "sweep" or "direction"'),
    "kinds": _STRINGS, "hook_names": _STRINGS, "layers": array_of(is_int, "whole numbers"),
    "d_model": optional((lambda v: is_int(v) and v > 0, "a positive whole number")),
    "n_train": optional((lambda v: is_int(v) and v >= 0, "a whole number")),
    "C": optional((is_number, "a number")),
    "standardize": optional((lambda v: isinstance(v, bool), "true or false")),
    "params": _OBJECT, "fitted": _OBJECT,
    "sha256": (lambda v: isinstance(v, dict) and all(isinstance(h, str) for h in v.values()),
               "a JSON object of hex strings"),
    "format_version": (lambda v: is_int(v) and v >= 1, "a whole number >= 1"),
    **{k: optional((lambda v: isinstance(v, str), "a string"))
       for k in ("model", "template_hash", "dataset", "dataset_fingerprint", "split",
                 "package_version")},
}


def _version() -> str:
    from ppairs_lens import __version__

    return __version__


def metadata_from_store(store) -> dict[str, Any]:
    """The fields a store fixes (model, template and dataset fingerprints, d_model), as
    keyword arguments for :func:`save_probe` / :func:`save_sweep` / :func:`save_direction`."""
    m = store.meta  # an activations.store_meta.StoreMeta (probes sit below activations)
    return {"model": m.model, "template_hash": m.template_hash, "dataset": m.dataset,
            "dataset_fingerprint": m.dataset_fingerprint, "d_model": int(m.d_model)}


def check_metadata(meta: ProbeMetadata, path: str | Path = "", **expected: Any) -> None:
    """Refuse ``meta`` where it differs from ``expected`` (None: not checked), naming every
    field that differs; ``hook`` (one name) must be among ``meta.hook_names``, and
    ``hook_names`` must equal them."""
    diffs = []
    for key, want in expected.items():
        if want is None:
            continue
        if key == "hook":
            if want not in meta.hook_names:
                diffs.append(f"hook (saved {list(meta.hook_names)}, expected {want!r})")
            continue
        if key not in CHECKED:
            raise ProbeError(f"cannot check field {key!r}; checkable: {CHECKED + ('hook',)}")
        have = getattr(meta, key)
        want = tuple(want) if key == "hook_names" else want
        if have is not None and have != want:
            diffs.append(f"{key} (saved {have!r}, expected {want!r})")
    if diffs:
        raise ProbeError(f"{path}: the saved {meta.object} was fitted for something else; "
                         f"differing fields: {'; '.join(diffs)}")


def _write(path: str | Path, tensors: dict[str, Tensor], meta: ProbeMetadata) -> Path:
    """The tensors atomically, then ``metadata.json`` with their checksums (written last: a
    folder counts once it exists, and an interrupted save never leaves half a file)."""
    path = check_output_folder(path, "save folder", ProbeError)
    tensors = {k: v.detach().cpu().contiguous() for k, v in tensors.items()}
    meta = replace(meta, sha256={k: tensor_sha256(v) for k, v in tensors.items()},
                   format_version=FORMAT_VERSION)
    path.mkdir(parents=True, exist_ok=True)
    atomic_save_tensors(path / TENSORS, tensors)
    atomic_write_text(path / METADATA, meta.to_json())
    return write_model_card(path, meta)  # README.md: the Hub's model card


def read_metadata(path: str | Path) -> ProbeMetadata:
    """The :class:`ProbeMetadata` of a saved folder."""
    path = Path(path)
    mfile = path / METADATA
    if not mfile.is_file() or not (path / TENSORS).is_file():
        raise ProbeError(f"{path} is not a saved probe, sweep or direction (needs {METADATA} "
                         f"and {TENSORS})")
    try:
        text = mfile.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ProbeError(f"{mfile} cannot be read: {e}") from None
    meta = ProbeMetadata.from_json(text, mfile)
    if meta.format_version != FORMAT_VERSION:
        raise ProbeError(f"{mfile} was saved in format {meta.format_version}; this version of "
                         f"ppairs-lens reads format {FORMAT_VERSION} only (fit and save it again)")
    return meta


def _read(path: str | Path, obj: str, expected: dict) -> tuple[dict[str, Tensor], ProbeMetadata]:
    path = resolve_saved(path)  # a folder, or a Hub repo id's snapshot
    meta = read_metadata(path)
    if meta.object != obj:
        raise ProbeError(f"{path} holds a saved {meta.object}, not a {obj}")
    check_metadata(meta, path, **expected)
    return _load_tensors(Path(path), meta), meta


def _load_tensors(path: Path, meta: ProbeMetadata) -> dict[str, Tensor]:
    """``tensors.safetensors``, every tensor checked against its sha256 in ``metadata.json``."""
    tfile = path / TENSORS
    try:
        with safe_open(str(tfile), framework="pt") as f:
            tensors = {k: f.get_tensor(k) for k in f.keys()}
    except Exception as e:  # noqa: BLE001 - a truncated or damaged file: safetensors' own error
        raise ProbeError(f"{tfile} is truncated or corrupt ({' '.join(str(e).split())[:120]}); "
                         "save the object again") from None
    if not meta.sha256:
        raise ProbeError(f"{path / METADATA}: field 'sha256' is missing (format "
                         f"{meta.format_version} keeps a checksum per tensor)")
    if set(meta.sha256) != set(tensors):
        raise ProbeError(f"{tfile} holds tensors {sorted(tensors)}, but field 'sha256' of "
                         f"{path / METADATA} lists {sorted(meta.sha256)}")
    for k, t in tensors.items():
        if tensor_sha256(t) != meta.sha256[k]:
            raise ProbeError(f"{tfile} is corrupt: the checksum of tensor {k!r} differs from "
                             f"field 'sha256' of {METADATA}; save the object again")
    return tensors


def _need(tensors: dict[str, Tensor], keys: Any, path: str | Path) -> None:
    missing = [k for k in keys if k not in tensors]
    if missing:
        raise ProbeError(f"{Path(path) / TENSORS} lacks tensor(s) {missing}")


# -- single-layer probes -----------------------------------------------------------------------

_PROBE_ARRAYS = ("mu_pos_", "mu_neg_", "coef_", "direction_")
_PROBE_SCALARS = ("scale_", "intercept_", "n_iter_", "sign_confidence_", "layer_", "ccs_loss_")


def save_probe(probe: PairProbe, path: str | Path, *, hook: str | None = None,
               split: str | None = None, n_train: int | None = None, **meta: Any) -> Path:
    """Save a fitted estimator into folder ``path``; ``hook``: the read-out it was fitted at;
    ``meta``: other :class:`ProbeMetadata` fields (e.g. ``**metadata_from_store(store)``)."""
    if not hasattr(probe, "direction_"):
        raise ProbeError(f"this {type(probe).__name__} is not fitted; nothing to save")
    params = probe.get_params()
    extra = {k: getattr(probe, k) for k in getattr(probe, "extra_arrays_", ())}
    md = ProbeMetadata(
        object="probe", kinds=(probe.kind,), model=meta.pop("model", probe.model_name_),
        hook_names=(hook,) if hook else (),
        layers=(probe.layer_,) if probe.layer_ is not None else (),
        d_model=int(probe.n_features_in_), split=split, n_train=n_train,
        C=params.get("C"), standardize=params.get("standardize"), params=params,
        fitted={k: getattr(probe, k) for k in _PROBE_SCALARS if hasattr(probe, k)},
        package_version=_version(), **{k: v for k, v in meta.items() if k != "d_model"})
    tensors = {k: torch.as_tensor(np.asarray(getattr(probe, k))) for k in _PROBE_ARRAYS}
    tensors.update({f"extra.{k}": torch.as_tensor(np.asarray(v)) for k, v in extra.items()})
    return _write(path, tensors, md)


def load_probe(path: str | Path, *, model: str | None = None, hook: str | None = None,
               **expected: Any) -> PairProbe:
    """The estimator saved in ``path`` (no refit), refusing one saved for another ``model``,
    ``hook``, ``template_hash``, ``dataset_fingerprint`` or ``d_model`` (:func:`check_metadata`);
    ``probe.metadata_`` holds its metadata."""
    tensors, meta = _read(path, "probe", {"model": model, "hook": hook, **expected})
    if len(meta.kinds) != 1:
        raise ProbeError(f"{Path(path) / METADATA}: field 'kinds' of a probe holds one kind, "
                         f"got {list(meta.kinds)}")
    _need(tensors, _PROBE_ARRAYS, path)
    probe = make_probe(meta.kinds[0], **meta.params)
    for k in _PROBE_ARRAYS:
        setattr(probe, k, tensors[k].numpy())
    for k, v in tensors.items():
        if k.startswith("extra."):
            setattr(probe, k.removeprefix("extra."), v.numpy())
    for k, v in meta.fitted.items():
        setattr(probe, k, v)
    probe.n_features_in_ = int(probe.coef_.shape[-1])
    probe.classes_ = np.array([2, 1])
    probe.layer_ = meta.fitted.get("layer_")
    probe.model_name_ = meta.model
    probe.metadata_ = meta
    return probe


# -- sweeps ------------------------------------------------------------------------------------

def save_sweep(sweep: SweepProbes, path: str | Path, *, hook_names: list[str] | None = None,
               split: str | None = None, **meta: Any) -> Path:
    """Save a :class:`~ppairs_lens.probes.sweep.SweepProbes` into folder ``path``;
    ``hook_names``: one per layer of the sweep (e.g. ``[store.hook_names[l] for l in
    sweep.layers]``)."""
    if hook_names is not None and len(hook_names) != sweep.n_layers:
        raise ProbeError(f"{len(hook_names)} hook names for a sweep of {sweep.n_layers} layers")
    tensors = {"mu_pos": sweep.mu_pos, "mu_neg": sweep.mu_neg}
    for name in ("directions", "scales", "intercepts", "degenerate", "sign_confidence"):
        for k, t in getattr(sweep, name).items():
            tensors[f"{name}.{k}"] = t
    for name in ("n_iter", "converged"):
        if getattr(sweep, name) is not None:
            tensors[name] = getattr(sweep, name)
    md = ProbeMetadata(
        object="sweep", kinds=tuple(sweep.kinds), model=meta.pop("model", sweep.model_name),
        hook_names=tuple(hook_names or ()), layers=tuple(sweep.layers),
        d_model=sweep.d_model, split=split, n_train=sweep.n_train, C=sweep.C,
        standardize=sweep.standardize, package_version=_version(),
        **{k: v for k, v in meta.items() if k != "d_model"})
    return _write(path, tensors, md)


def load_sweep(path: str | Path, *, model: str | None = None,
               hook_names: list[str] | None = None, **expected: Any) -> SweepProbes:
    """The sweep saved in ``path`` (no refit); refuses another model / read-outs."""
    t, meta = _read(path, "sweep", {"model": model, "hook_names": hook_names, **expected})
    _need(t, ("mu_pos", "mu_neg"), path)

    def group(name: str) -> dict[str, Tensor]:
        return {k: t[f"{name}.{k}"] for k in meta.kinds if f"{name}.{k}" in t}

    return SweepProbes(
        kinds=meta.kinds, layers=meta.layers, mu_pos=t["mu_pos"], mu_neg=t["mu_neg"],
        directions=group("directions"), scales=group("scales"),
        intercepts=group("intercepts"), degenerate=group("degenerate"),
        C=float(meta.C if meta.C is not None else 1.0), model_name=meta.model,
        n_train=int(meta.n_train or 0), n_iter=t.get("n_iter"), converged=t.get("converged"),
        standardize=bool(meta.standardize), sign_confidence=group("sign_confidence"))


# -- directions --------------------------------------------------------------------------------

def save_direction(direction: Float[Tensor, "*k d_model"] | np.ndarray, path: str | Path, *,
                   hook: str | None = None, kind: str = "direction", **meta: Any) -> Path:
    """Save one direction ``[d_model]`` (or several ``[k, d_model]``) with its metadata."""
    d = torch.as_tensor(np.asarray(direction) if isinstance(direction, np.ndarray)
                        else direction).detach()
    if d.ndim not in (1, 2) or not torch.isfinite(d).all():
        raise ProbeError(f"a direction is a finite [d_model] or [k, d_model] tensor, got shape "
                         f"{tuple(d.shape)}")
    md = ProbeMetadata(object="direction", kinds=(kind,), hook_names=(hook,) if hook else (),
                       d_model=int(d.shape[-1]), package_version=_version(),
                       **{k: v for k, v in meta.items() if k != "d_model"})
    return _write(path, {"direction": d}, md)


def load_direction(path: str | Path, *, model: str | None = None, hook: str | None = None,
                   **expected: Any) -> tuple[Tensor, ProbeMetadata]:
    """``(direction, metadata)`` saved in ``path``; refuses another model or hook."""
    t, meta = _read(path, "direction", {"model": model, "hook": hook, **expected})
    _need(t, ("direction",), path)
    return t["direction"], meta


# -- the Hub -----------------------------------------------------------------------------------

def hub_operations(folder: str | Path, repo_id: str, license: str | None = None) -> list:
    """The commit :func:`push_to_hub` sends: ``folder``'s files, the model card re-rendered to
    load ``repo_id`` (``license``: instead of the card's)."""
    folder = Path(folder)
    meta = read_metadata(folder)
    front = read_model_card(folder) if (folder / CARD).is_file() else {}
    metrics = (front.get("ppairs_lens") or {}).get("metrics") or []
    card = render_card(meta, metrics=metrics, source=repo_id,
                       license=license or front.get("license") or DEFAULT_LICENSE)
    return commit_operations(folder, replace={CARD: card.encode("utf-8")})


def _save(obj: Any, folder: Path, save_kw: dict) -> Path:
    if isinstance(obj, SweepProbes):
        return save_sweep(obj, folder, **save_kw)
    if isinstance(obj, (Tensor, np.ndarray)):
        return save_direction(obj, folder, **save_kw)
    if hasattr(obj, "direction_") or hasattr(obj, "get_params"):
        return save_probe(obj, folder, **save_kw)
    raise ProbeError(f"push_to_hub takes a saved folder, a probe, a sweep or a direction, "
                     f"not a {type(obj).__name__}")


def push_to_hub(folder_or_object: Any, repo_id: str, *, license: str | None = None,
                commit_message: str | None = None,
                private: bool | None = None, revision: str | None = None,
                token: str | None = None, api=None, **save_kw: Any):
    """Upload a saved folder (or an object saved now with ``save_kw``) to model repo
    ``repo_id``; returns the ``CommitInfo``. ``license``: default the folder card's, else
    "other"."""
    def push(folder: Path):
        ops = hub_operations(folder, repo_id, license)
        return push_folder(folder, repo_id, operations=ops, commit_message=commit_message,
                           private=private, revision=revision, token=token, api=api)

    if isinstance(folder_or_object, (str, Path)):
        if save_kw:
            raise ProbeError(f"{folder_or_object} is already saved; save keywords "
                             f"{sorted(save_kw)} apply only to an object")
        return push(Path(folder_or_object))
    with tempfile.TemporaryDirectory(prefix="ppairs-push-") as tmp:
        # The operations read files by path: send them before the folder goes.
        return push(_save(folder_or_object, Path(tmp) / repo_id.split("/")[-1], save_kw))
