"""Where activations are kept: one folder per (model, dataset, template).

Layout::

    store/
      metadata.json          what was harvested: model, read-outs, d_model, dtype, template,
                             dataset fingerprint, shard size, package version, creation time
                             (read as a ``StoreMeta``: ``store.meta.dataset``)
      pairs.jsonl            one line per pair: id, label, context and item ids, gold scores
                             (each a ``PairInfo``: ``store.pairs()[0].group_id``)
      shards/shard-00003.safetensors   tensors "layer_00" .. "layer_NN", each [n, 2, d_model],
                                       and "judge_logodds" [n] (float64) where the harvest
                                       read the prompted judge's answer
      shards/shard-00003.json          written last: pair range and a sha256 per tensor

A shard counts only once its sidecar JSON exists; both files are written to a temporary name
and renamed, so a crash never leaves a half shard that is read later, and a restarted harvest
redoes only the missing shards. Per-tensor checksums let a reader verify exactly the layers it
reads, without reading the whole store.

``judge_logodds`` is the zero-shot judge's log-odds on each pair's prompt (items in their
order), read by the harvest at the prompt's last token (:func:`ppairs_lens.activations.harvest.
harvest_with_judge`): the judges take it from here instead of running that prompt again.
Stores written before it (or by a backend that cannot read it) simply lack it
(:meth:`ActivationStore.judge_logodds` is None) and stay readable.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from jaxtyping import Float, Int
from safetensors import safe_open
from torch import Tensor

from ppairs_lens import __version__
from ppairs_lens.activations.pair_info import PairInfo
from ppairs_lens.activations.store_meta import IDENTITY_FIELDS, REQUIRED_FIELDS, StoreMeta
from ppairs_lens.errors import StoreError
from ppairs_lens.io.atomic import atomic_save_tensors, atomic_write_text
from ppairs_lens.io.checksums import tensor_sha256
from ppairs_lens.io.json_fields import array_of, check_fields, is_int, json_object, optional

__all__ = ["ActivationStore", "IDENTITY_FIELDS"]


#: The shard tensor holding the judge's log-odds per pair (float64).
JUDGE_KEY = "judge_logodds"

_WHOLE = (lambda v: is_int(v) and v >= 0, "a whole number >= 0")
#: JSON types of the fields a reader of the store's files relies on (others pass as written).
_META_TYPES = {"hook_names": array_of(lambda v: isinstance(v, str), "strings"),
               "d_model": (lambda v: is_int(v) and v > 0, "a positive whole number"),
               "shard_size": (lambda v: is_int(v) and v > 0, "a positive whole number"),
               "n_pairs": optional(_WHOLE),
               **{k: (lambda v: isinstance(v, str), "a string")
                  for k in ("model", "dataset", "dataset_fingerprint", "template_hash")}}
_PAIR_TYPES = {"label": (lambda v: v in (0, 1, 2) and not isinstance(v, bool), "0, 1 or 2")}
_SIDECAR_TYPES = {"bytes": _WHOLE, "start": _WHOLE, "stop": _WHOLE,
                  "sha256": ((lambda v: isinstance(v, dict)
                              and all(isinstance(h, str) for h in v.values())),
                             "a JSON object of hex strings")}


class ActivationStore:
    """An activation store on disk. Use :meth:`create` to start or resume, :meth:`open` to read."""

    def __init__(self, path: Path, meta: StoreMeta):
        self.path = Path(path)
        self.meta = meta

    # ---- creation and opening -------------------------------------------------------------
    @classmethod
    def create(cls, path: str | Path, meta: StoreMeta, pairs: Sequence[PairInfo]
               ) -> ActivationStore:
        """Start a store, or reopen one whose identity fields all match ``meta``.

        A store for another model, template or dataset is refused with the fields that differ.
        """
        path = Path(path)
        # Normalise through JSON (tuples become lists) so the comparison below sees what a
        # reader of metadata.json sees.
        want = json.loads(json.dumps(replace(meta, n_pairs=len(pairs)).to_json()))
        if (path / "metadata.json").exists():
            store = cls.open(path)
            have = store.meta.to_json()
            diffs = [f"{k}: store has {have.get(k)!r}, this harvest has {want.get(k)!r}"
                     for k in IDENTITY_FIELDS if have.get(k) != want.get(k)]
            if diffs:
                raise StoreError(f"{path} holds a different harvest; differing fields: "
                                 + "; ".join(diffs)
                                 + ". Use another output folder, or delete this one.")
            return store
        full = StoreMeta.from_json({**want, "package_version": __version__,
                                    "created": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
        atomic_write_text(path / "pairs.jsonl",
                          "".join(json.dumps(p.to_json()) + "\n" for p in pairs))
        atomic_write_text(path / "metadata.json", json.dumps(full.to_json(), indent=2))
        return cls(path, full)

    @classmethod
    def open(cls, path: str | Path) -> ActivationStore:
        path = Path(path)
        mfile = path / "metadata.json"
        if not mfile.is_file():
            raise StoreError(f"{path} is not an activation store (no metadata.json)")
        try:
            text = mfile.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise StoreError(f"{mfile} is corrupt: {e}") from e
        meta = json_object(text, mfile, StoreError)
        missing = [k for k in REQUIRED_FIELDS if k not in meta]
        if missing:
            raise StoreError(f"{mfile} lacks fields {missing}")
        check_fields(meta, _META_TYPES, mfile, StoreError)
        return cls(path, StoreMeta.from_json(meta))

    # ---- shape and per-pair information ------------------------------------------------------
    @property
    def n_pairs(self) -> int:
        return int(self.meta.n_pairs)

    @property
    def hook_names(self) -> list[str]:
        return list(self.meta.hook_names)

    @property
    def n_readouts(self) -> int:
        """Number of stored read-outs: every block's resid_post plus the final norm's output."""
        return len(self.meta.hook_names)

    @property
    def d_model(self) -> int:
        return int(self.meta.d_model)

    def pairs(self) -> list[PairInfo]:
        pfile = self.path / "pairs.jsonl"
        try:
            lines = pfile.read_text("utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as e:
            raise StoreError(f"{pfile} cannot be read: {e}") from None
        out = []
        for i, line in enumerate(lines, 1):
            if line:
                row = json_object(line, f"{pfile} line {i}", StoreError)
                check_fields(row, _PAIR_TYPES, f"{pfile} line {i}", StoreError,
                             required=("pair_id", "label"))
                out.append(PairInfo.from_json(row))
        return out

    def labels(self) -> Int[Tensor, " pair"]:
        return torch.tensor([p.label for p in self.pairs()], dtype=torch.long)

    # ---- shards -----------------------------------------------------------------------------
    @property
    def n_shards(self) -> int:
        return -(-self.n_pairs // int(self.meta.shard_size))

    def shard_range(self, i: int) -> tuple[int, int]:
        size = int(self.meta.shard_size)
        return i * size, min((i + 1) * size, self.n_pairs)

    def _shard_paths(self, i: int) -> tuple[Path, Path]:
        base = self.path / "shards" / f"shard-{i:05d}"
        return base.with_suffix(".safetensors"), base.with_suffix(".json")

    def shard_done(self, i: int) -> bool:
        return self._shard_paths(i)[1].is_file()

    def missing_shards(self) -> list[int]:
        return [i for i in range(self.n_shards) if not self.shard_done(i)]

    @property
    def complete(self) -> bool:
        return not self.missing_shards()

    def pairs_written_since(self, t: float) -> int:
        """Pairs in shards finished at or after ``t`` (``time.time()``): what a harvest that
        started then computed, as opposed to reused (a rate counts those alone)."""
        return sum(hi - lo for i in range(self.n_shards) if self.shard_done(i)
                   and self._shard_paths(i)[1].stat().st_mtime >= t
                   for lo, hi in [self.shard_range(i)])

    def fingerprint(self) -> str:
        """A digest of what the store holds: its metadata, pairs and every shard's sidecar
        (which carries the sha256 of each tensor), so equal fingerprints mean equal data."""
        h = hashlib.sha256()
        for f in [self.path / "metadata.json", self.path / "pairs.jsonl",
                  *(self._shard_paths(i)[1] for i in range(self.n_shards))]:
            h.update(f.name.encode() + b"\0" + (f.read_bytes() if f.is_file() else b"missing"))
        return h.hexdigest()

    def write_shard(self, i: int, acts: Float[Tensor, "pair side layer d_model"],
                    judge_logodds: Float[np.ndarray, " pair"] | None = None) -> None:
        """Shard ``i``'s activations, and (when given) the judge's log-odds of its pairs."""
        start, stop = self.shard_range(i)
        expect = (stop - start, 2, self.n_readouts, self.d_model)
        if tuple(acts.shape) != expect:
            raise StoreError(f"shard {i} of {self.path}: got shape {tuple(acts.shape)}, "
                             f"expected {expect}")
        dtype = getattr(torch, self.meta.dtype)
        tensors = {f"layer_{l:02d}": acts[:, :, l].to(dtype).contiguous()
                   for l in range(self.n_readouts)}
        if judge_logodds is not None:
            if np.shape(judge_logodds) != (stop - start,):
                raise StoreError(f"shard {i} of {self.path}: got {np.shape(judge_logodds)} "
                                 f"judge log-odds, expected ({stop - start},)")
            tensors[JUDGE_KEY] = torch.as_tensor(np.asarray(judge_logodds, dtype=np.float64))
        data_path, side_path = self._shard_paths(i)
        atomic_save_tensors(data_path, tensors, {"start": str(start), "stop": str(stop)})
        side = {"start": start, "stop": stop, "bytes": data_path.stat().st_size,
                "sha256": {k: tensor_sha256(v) for k, v in tensors.items()}}
        atomic_write_text(side_path, json.dumps(side))  # the shard counts from here on

    def judge_logodds(self, verify: bool = True) -> Float[np.ndarray, " pair"] | None:
        """The zero-shot judge's log-odds per pair (store order, float64; NaN where the
        harvest could not read it, or in a shard written without them: a store resumed
        across versions keeps the rest), or None when no shard has them (an older store)."""
        missing = self.missing_shards()
        if missing:
            raise StoreError(f"{self.path} is incomplete: shards {missing[:10]} of "
                             f"{self.n_shards} are missing; re-run the harvest to finish it")
        parts, kept = [], False
        for i in range(self.n_shards):
            side = json_object(self._shard_paths(i)[1].read_text("utf-8"),
                               self._shard_paths(i)[1], StoreError)
            check_fields(side, _SIDECAR_TYPES, self._shard_paths(i)[1], StoreError)
            if JUDGE_KEY in side.get("sha256", {}):
                parts.append(self._read_shard(i, [JUDGE_KEY], verify)[0].numpy())
                kept = True
            else:
                start, stop = self.shard_range(i)
                parts.append(np.full(stop - start, np.nan))
        if not kept:
            return None if self.n_shards else np.zeros(0)
        return np.concatenate(parts)

    def _read_shard(self, i: int, layers: Sequence[int | str], verify: bool) -> list[Tensor]:
        data_path, side_path = self._shard_paths(i)
        try:
            side = json_object(side_path.read_text("utf-8"), side_path, StoreError)
        except (OSError, UnicodeDecodeError) as e:
            raise StoreError(f"shard sidecar {side_path} is unreadable: {e}") from e
        check_fields(side, _SIDECAR_TYPES, side_path, StoreError, required=("bytes", "sha256"))
        if not data_path.is_file() or data_path.stat().st_size != side["bytes"]:
            size = data_path.stat().st_size if data_path.is_file() else "missing"
            raise StoreError(f"shard {data_path} is truncated or missing (size {size}, expected "
                             f"{side['bytes']} bytes); delete it and its .json and re-run the "
                             "harvest to redo this shard")
        try:
            with safe_open(str(data_path), framework="pt") as f:
                out = []
                for l in layers:
                    key = l if isinstance(l, str) else f"layer_{l:02d}"
                    t = f.get_tensor(key)
                    if verify and tensor_sha256(t) != side["sha256"][key]:
                        raise StoreError(f"shard {data_path} is corrupt: checksum of {key} "
                                         "differs; delete the shard and its .json and re-run "
                                         "the harvest to redo it")
                    out.append(t)
        except StoreError:
            raise
        except Exception as e:  # the safetensors header itself is damaged
            raise StoreError(f"shard {data_path} is corrupt: {e}") from e
        return out

    def load(
        self,
        layers: Sequence[int] | int | None = None,
        *,
        dtype: torch.dtype = torch.float32,
        verify: bool = True,
    ) -> Float[Tensor, "pair side layer d_model"]:
        """Activations ``[n_pairs, 2, len(layers), d_model]``; only the asked layers are read.

        ``layers`` indexes read-outs (negative counts from the end: -1 is the final norm's
        output, -2 the last block's resid_post); an int returns ``[n_pairs, 2, d_model]``.
        """
        single = isinstance(layers, int)
        idx = list(range(self.n_readouts)) if layers is None else ([layers] if single else list(layers))
        idx = [l % self.n_readouts if -self.n_readouts <= l < self.n_readouts else l for l in idx]
        bad = [l for l in idx if not 0 <= l < self.n_readouts]
        if bad:
            raise StoreError(f"{self.path} has read-outs 0..{self.n_readouts - 1}; asked for {bad}")
        missing = self.missing_shards()
        if missing:
            raise StoreError(f"{self.path} is incomplete: shards {missing[:10]} of {self.n_shards} "
                             "are missing; re-run the harvest to finish it")
        out = torch.empty(self.n_pairs, 2, len(idx), self.d_model, dtype=dtype)
        for i in range(self.n_shards):
            start, stop = self.shard_range(i)
            for j, t in enumerate(self._read_shard(i, idx, verify)):
                out[start:stop, :, j] = t.to(dtype)
        return out[:, :, 0] if single else out
