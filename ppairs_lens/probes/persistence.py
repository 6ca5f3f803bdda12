"""Saving and loading fitted probes, sweeps and directions: safetensors plus JSON metadata.

Each object is a folder with two files:

* ``tensors.safetensors``: the arrays (training side means, directions, weights, ...);
* ``metadata.json``: a :class:`ProbeMetadata` (model, hook names, template and dataset
  fingerprints, split, ``C``, standardisation, package version, estimator parameters).

Loading checks what the caller expects: ``load_probe(path, model=..., hook=...)`` refuses a
probe fitted for another model or read-out, naming every field that differs (as an activation
store refuses another harvest, :mod:`ppairs_lens.activations.store`). A loaded probe or sweep
scores new activations with no refit; a loaded direction drives
:func:`ppairs_lens.interventions.ablation.ablate` and
:func:`ppairs_lens.interventions.steering.steer`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from jaxtyping import Float
from safetensors.torch import load_file, save_file
from torch import Tensor

from ppairs_lens.errors import ProbeError
from ppairs_lens.io.atomic import atomic_write_text
from ppairs_lens.probes.estimators import PairProbe, make_probe
from ppairs_lens.probes.hub import resolve_saved
from ppairs_lens.probes.model_card import write_model_card
from ppairs_lens.probes.sweep import SweepProbes

__all__ = ["FORMAT_VERSION", "ProbeMetadata", "metadata_from_store", "check_metadata",
           "save_probe", "load_probe", "save_sweep", "load_sweep", "save_direction",
           "load_direction", "read_metadata"]

FORMAT_VERSION = 1
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

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ProbeMetadata:
        raw = json.loads(text)
        known = {f.name for f in fields(cls)}
        kw = {k: v for k, v in raw.items() if k in known}
        for k in ("kinds", "hook_names"):
            kw[k] = tuple(kw.get(k, ()))
        kw["layers"] = tuple(int(v) for v in kw.get("layers", ()))
        return cls(**kw)


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
    """Refuse ``meta`` where it differs from ``expected`` (None values are not checked).

    ``hook`` (one name) must be among ``meta.hook_names``; ``hook_names`` must equal them.
    The error names every field that differs, with the saved and the expected value.
    """
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
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    save_file({k: v.detach().cpu().contiguous() for k, v in tensors.items()},
              str(path / TENSORS))
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
        meta = ProbeMetadata.from_json(mfile.read_text())
    except (ValueError, TypeError) as e:
        raise ProbeError(f"{mfile} is corrupt: {e}") from e
    if meta.format_version > FORMAT_VERSION:
        raise ProbeError(f"{path} was saved in format {meta.format_version}; this version of "
                         f"ppairs-lens reads up to {FORMAT_VERSION}")
    return meta


def _read(path: str | Path, obj: str, expected: dict) -> tuple[dict[str, Tensor], ProbeMetadata]:
    path = resolve_saved(path)  # a folder, or a Hub repo id's snapshot
    meta = read_metadata(path)
    if meta.object != obj:
        raise ProbeError(f"{path} holds a saved {meta.object}, not a {obj}")
    check_metadata(meta, path, **expected)
    return load_file(str(Path(path) / TENSORS)), meta


# --------------------------------------------------------------------------------------------
# Single-layer probes
# --------------------------------------------------------------------------------------------

_PROBE_ARRAYS = ("mu_pos_", "mu_neg_", "coef_", "direction_")
_PROBE_SCALARS = ("scale_", "intercept_", "n_iter_", "sign_confidence_", "layer_", "ccs_loss_")


def save_probe(probe: PairProbe, path: str | Path, *, hook: str | None = None,
               split: str | None = None, n_train: int | None = None, **meta: Any) -> Path:
    """Save a fitted estimator of :mod:`ppairs_lens.probes.estimators` into folder ``path``.

    ``hook``: the read-out it was fitted at; ``meta``: other :class:`ProbeMetadata` fields
    (``**metadata_from_store(store)`` fills model, template and dataset fingerprints).
    """
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
    """The estimator saved in ``path``, fitted attributes restored (no refit).

    ``model`` / ``hook`` / ``template_hash`` / ``dataset_fingerprint`` / ``d_model``: refuse a
    probe saved for anything else (:func:`check_metadata`). ``probe.metadata_`` holds the
    :class:`ProbeMetadata`.
    """
    tensors, meta = _read(path, "probe", {"model": model, "hook": hook, **expected})
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


# --------------------------------------------------------------------------------------------
# Sweeps
# --------------------------------------------------------------------------------------------

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

    def group(name: str) -> dict[str, Tensor]:
        return {k: t[f"{name}.{k}"] for k in meta.kinds if f"{name}.{k}" in t}

    return SweepProbes(
        kinds=meta.kinds, layers=meta.layers, mu_pos=t["mu_pos"], mu_neg=t["mu_neg"],
        directions=group("directions"), scales=group("scales"),
        intercepts=group("intercepts"), degenerate=group("degenerate"),
        C=float(meta.C if meta.C is not None else 1.0), model_name=meta.model,
        n_train=int(meta.n_train or 0), n_iter=t.get("n_iter"), converged=t.get("converged"),
        standardize=bool(meta.standardize), sign_confidence=group("sign_confidence"))


# --------------------------------------------------------------------------------------------
# Directions
# --------------------------------------------------------------------------------------------

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
    return t["direction"], meta
