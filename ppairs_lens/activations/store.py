"""Where activations are kept: one folder per (model, dataset, template).

Layout::

    store/
      metadata.json          what was harvested (a ``StoreMeta``: ``store.meta.dataset``)
      pairs.jsonl            one line per pair (a ``PairInfo``: ``store.pairs()[0].group_id``)
      shards/shard-00003.safetensors   tensors "layer_00" .. "layer_NN", each [n, 2, d_model],
                                       and "judge_logodds" [n] (float64) where the harvest
                                       read the prompted judge's answer
      shards/shard-00003.json          written last: pair range and a sha256 per tensor

A shard counts only once its sidecar exists (both files written atomically), so a crash never
leaves a half shard and a restarted harvest redoes only the missing ones. Per-tensor checksums
let a reader verify exactly the layers it reads.

Shard ``k`` holds pairs ``k * shard_size`` up to the next shard's first, or fewer: a store of a
seeded order of a dataset (:func:`ppairs_lens.data.specs.subsample_by_context`) is harvested
only as far as the largest pair limit asked of it, and a larger one later extends the last
shard (rewritten whole: it stops counting until the new one is written). Each limit reads it as
a *view* (:meth:`ActivationStore.view`), so no pair is computed twice.

``judge_logodds`` is the zero-shot judge's log-odds on each pair's prompt (items in their
order), read at the prompt's last token, so the judges need not run that prompt again; a store
harvested by a HookedTransformer lacks it (:meth:`ActivationStore.judge_logodds` is None).
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

__all__ = ["ActivationStore", "IDENTITY_FIELDS", "check_comparable", "readout_index",
           "unique_names"]


#: The shard tensor holding the judge's log-odds per pair (float64).
JUDGE_KEY = "judge_logodds"

_WHOLE = (lambda v: is_int(v) and v >= 0, "a whole number >= 0")
#: JSON types of the fields a reader of the store's files relies on (others pass as written).
_META_TYPES = {"hook_names": array_of(lambda v: isinstance(v, str), "strings"),
               "d_model": (lambda v: is_int(v) and v > 0, "a positive whole number"),
               "shard_size": (lambda v: is_int(v) and v > 0, "a positive whole number"),
               "n_pairs": optional(_WHOLE),
               "sampling": optional((lambda v: isinstance(v, dict)
                                     and isinstance(v.get("file_order"), list), "a JSON object "
                                     "with a file_order list")),
               **{k: (lambda v: isinstance(v, str), "a string")
                  for k in ("model", "dataset", "dataset_fingerprint", "template_hash")}}
_PAIR_TYPES = {"label": (lambda v: v in (0, 1, 2) and not isinstance(v, bool), "0, 1 or 2")}
#: Keys every line of ``pairs.jsonl`` carries (the leak group and the items' text lengths).
_PAIR_FORMAT_KEYS = ("group_id", "len1", "len2")
_SIDECAR_TYPES = {"bytes": _WHOLE, "start": _WHOLE, "stop": _WHOLE,
                  "sha256": ((lambda v: isinstance(v, dict)
                              and all(isinstance(h, str) for h in v.values())),
                             "a JSON object of hex strings")}


class ActivationStore:
    """An activation store on disk: :meth:`create` starts or resumes one, :meth:`open` reads."""

    def __init__(self, path: Path, meta: StoreMeta, *, rows: Sequence[int] | None = None,
                 stored: StoreMeta | None = None):
        self.path = Path(path)
        self.meta = meta
        # A view's pairs are these positions among the stored ones (``stored`` is then the
        # metadata on disk; ``meta`` names the view's own dataset and count).
        self._stored = stored or meta
        self._rows = None if rows is None else np.asarray(rows, dtype=np.int64)

    @classmethod
    def create(cls, path: str | Path, meta: StoreMeta, pairs: Sequence[PairInfo]
               ) -> ActivationStore:
        """Start a store, or reopen one whose identity fields all match ``meta``."""
        path = Path(path)
        # Through JSON (tuples become lists): compared as a reader of metadata.json sees it.
        want = json.loads(json.dumps(replace(meta, n_pairs=len(pairs)).to_json()))
        if (path / "metadata.json").exists():
            store = cls.open(path, whole=True)
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
    def open(cls, path: str | Path, *, whole: bool = False) -> ActivationStore:
        """The store at ``path``; one in a pair limit's order (``meta.sampling``) opens as the
        pairs harvested so far (:meth:`harvested`), unless ``whole``."""
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
        order = (meta.get("sampling") or {}).get("file_order")
        if meta.get("sampling") is not None and sorted(order or []) != list(range(meta["n_pairs"])):
            raise StoreError(f"{mfile}: field 'sampling.file_order' must list each of the "
                             f"{meta['n_pairs']} pairs' places once")
        store = cls(path, StoreMeta.from_json(meta))
        if whole or store.meta.sampling is None:
            return store
        return store.harvested()

    def harvested(self) -> ActivationStore:
        """The view of a limit-ordered store's longest harvested prefix, in the file's order,
        named as :func:`ppairs_lens.data.specs.subsample_by_context` names that limit."""
        n = 0
        for i in range(self.n_shards):
            start, stop = self.shard_range(i)
            n = max(start, self.written_stop(i) or start)
            if n < stop:
                break
        sampling = self._stored.sampling or {}
        order = sampling.get("file_order") or list(range(int(self._stored.n_pairs)))
        rows = sorted(range(n), key=lambda r: order[r])
        cap = "" if sampling.get("per_context") is None else f"k{sampling['per_context']}"
        whole = n == int(self._stored.n_pairs) and not cap
        name = self._stored.dataset + ("" if whole else f"-n{n}{cap}s{sampling.get('seed', 0)}")
        return self.view(rows, dataset=name,
                         dataset_fingerprint=f"{self._stored.dataset_fingerprint}:{n}")

    def view(self, rows: Sequence[int], *, dataset: str, dataset_fingerprint: str
             ) -> ActivationStore:
        """The pairs at positions ``rows`` (in that order) as a store named ``dataset``."""
        rows = np.asarray(rows, dtype=np.int64)
        n = int(self._stored.n_pairs)
        if rows.ndim != 1 or (rows.size and (rows.min() < 0 or rows.max() >= n)) \
                or len(np.unique(rows)) != len(rows):
            raise StoreError(f"{self.path}: a view needs distinct pair positions in 0..{n - 1}")
        meta = replace(self._stored, dataset=dataset, dataset_fingerprint=dataset_fingerprint,
                       n_pairs=len(rows))
        return ActivationStore(self.path, meta, rows=rows, stored=self._stored)

    @property
    def is_view(self) -> bool:
        return self._rows is not None

    @property
    def n_pairs(self) -> int:
        return int(self.meta.n_pairs)

    @property
    def _needed(self) -> int:
        """Stored pairs this store reads: all of them, or a view's up to its last one."""
        if self._rows is None:
            return int(self._stored.n_pairs)
        return int(self._rows.max()) + 1 if self._rows.size else 0

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
                lacks = [k for k in _PAIR_FORMAT_KEYS if k not in row]
                if lacks:  # no released version wrote such lines: nothing to read them by
                    raise StoreError(
                        f"{pfile} line {i} lacks {', '.join(lacks)}: a store of a format this "
                        f"version does not read (ppairs-lens "
                        f"{self._stored.package_version or 'of unknown version'}); delete "
                        f"{self.path} and harvest again")
                out.append(PairInfo.from_json(row))
        return out if self._rows is None else [out[i] for i in self._rows]

    def labels(self) -> Int[Tensor, " pair"]:
        return torch.tensor([p.label for p in self.pairs()], dtype=torch.long)

    @property
    def n_shards(self) -> int:
        """Shards this store reads (a view: those up to its last pair)."""
        return -(-self._needed // int(self._stored.shard_size))

    def shard_range(self, i: int) -> tuple[int, int]:
        """The stored pairs shard ``i`` holds once whole."""
        size = int(self._stored.shard_size)
        return i * size, min((i + 1) * size, int(self._stored.n_pairs))

    def needed_range(self, i: int) -> tuple[int, int]:
        """The pairs of shard ``i`` this store reads (empty for a shard past a view's last)."""
        start, stop = self.shard_range(i)
        return start, max(start, min(stop, self._needed))

    def _shard_paths(self, i: int) -> tuple[Path, Path]:
        base = self.path / "shards" / f"shard-{i:05d}"
        return base.with_suffix(".safetensors"), base.with_suffix(".json")

    def _sidecar(self, i: int) -> dict | None:
        side_path = self._shard_paths(i)[1]
        try:
            text = side_path.read_text("utf-8")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as e:
            raise StoreError(f"shard sidecar {side_path} is unreadable: {e}") from e
        side = json_object(text, side_path, StoreError)
        check_fields(side, _SIDECAR_TYPES, side_path, StoreError)
        return side

    def written_stop(self, i: int) -> int | None:
        """Where shard ``i``'s written pairs end (None: not written)."""
        side = self._sidecar(i)
        if side is None:
            return None
        return int(side.get("stop", self.shard_range(i)[1]))

    def shard_done(self, i: int) -> bool:
        """Whether shard ``i`` holds every pair of it this store reads."""
        start, need = self.needed_range(i)
        written = self.written_stop(i)
        return need == start or (written is not None and written >= need)

    def missing_shards(self) -> list[int]:
        return [i for i in range(self.n_shards) if not self.shard_done(i)]

    @property
    def complete(self) -> bool:
        return not self.missing_shards()

    def pairs_written_since(self, t: float) -> int:
        """Pairs computed (not reused) into shards finished at or after ``t`` (``time.time()``)."""
        total = 0
        for i in range(self.n_shards):
            side_path = self._shard_paths(i)[1]
            if side_path.is_file() and side_path.stat().st_mtime >= t:
                side = self._sidecar(i) or {}
                total += int(side.get("stop", self.shard_range(i)[1])) - \
                    int(side.get("computed_from", side.get("start", self.shard_range(i)[0])))
        return total

    def fingerprint(self) -> str:
        """A digest of the metadata, pairs and shard sidecars (which carry each tensor's sha256).
        A view ending inside a shard digests the rows it reads instead of that sidecar, so a
        later extension of the shard keeps the view's fingerprint (the key of its cached steps)."""
        h = hashlib.sha256()
        shards = [i for i in range(self.n_shards) if self.needed_range(i)[1] > self.shard_range(i)[0]]
        for f in [self.path / "metadata.json", self.path / "pairs.jsonl"]:
            h.update(f.name.encode() + b"\0" + (f.read_bytes() if f.is_file() else b"missing"))
        for i in shards:
            (first, last), need = self.shard_range(i), self.needed_range(i)[1]
            side = self._shard_paths(i)[1]
            if need == last or not side.is_file():
                h.update(side.name.encode() + b"\0"
                         + (side.read_bytes() if side.is_file() else b"missing"))
                continue
            keys = sorted(self._sidecar(i)["sha256"])
            h.update(f"{side.name}[:{need - first}]".encode() + b"\0")
            for key, t in zip(keys, self._read_shard(i, keys, verify=True)):
                h.update(key.encode() + b"\0" + tensor_sha256(t[:need - first]).encode())
        if self._rows is not None:  # a view: which pairs, under which name
            h.update(json.dumps([self.meta.dataset, self.meta.dataset_fingerprint,
                                 self._rows.tolist()]).encode())
        return h.hexdigest()

    def write_shard(self, i: int, acts: Float[Tensor, "pair side layer d_model"],
                    judge_logodds: Float[np.ndarray, " pair"] | None = None, *,
                    start: int | None = None) -> None:
        """Shard ``i`` from stored pair ``start`` on; a later ``start`` extends the shard (it
        must hold the pairs before)."""
        first, last = self.shard_range(i)
        start = first if start is None else start
        stop = start + len(acts)
        if not first <= start <= stop <= last:
            raise StoreError(f"shard {i} of {self.path} holds pairs {first}..{last - 1}; got "
                             f"{len(acts)} from pair {start}")
        if start > first:
            acts, judge_logodds = self._extended(i, start, acts, judge_logodds)
        expect = (stop - first, 2, self.n_readouts, self.d_model)
        if tuple(acts.shape) != expect:
            raise StoreError(f"shard {i} of {self.path}: got shape {tuple(acts.shape)}, "
                             f"expected {expect}")
        dtype = getattr(torch, self._stored.dtype)
        tensors = {f"layer_{l:02d}": acts[:, :, l].to(dtype).contiguous()
                   for l in range(self.n_readouts)}
        if judge_logodds is not None:
            if np.shape(judge_logodds) != (stop - first,):
                raise StoreError(f"shard {i} of {self.path}: got {np.shape(judge_logodds)} "
                                 f"judge log-odds, expected ({stop - first},)")
            tensors[JUDGE_KEY] = torch.as_tensor(np.asarray(judge_logodds, dtype=np.float64))
        data_path, side_path = self._shard_paths(i)
        side_path.unlink(missing_ok=True)  # a rewritten shard stops counting until it is whole
        atomic_save_tensors(data_path, tensors, {"start": str(first), "stop": str(stop)})
        side = {"start": first, "stop": stop, "bytes": data_path.stat().st_size,
                "sha256": {k: tensor_sha256(v) for k, v in tensors.items()}}
        if start > first:
            side["computed_from"] = start
        atomic_write_text(side_path, json.dumps(side))  # the shard counts from here on

    def _extended(self, i: int, start: int, acts: Tensor, judge_logodds
                  ) -> tuple[Tensor, np.ndarray | None]:
        """Shard ``i``'s written pairs, then ``acts`` (log-odds NaN where a part lacks them)."""
        side = self._sidecar(i)
        if side is None or int(side["stop"]) != start:
            have = "nothing" if side is None else f"pairs up to {int(side['stop']) - 1}"
            raise StoreError(f"shard {i} of {self.path} holds {have}; cannot extend it from "
                             f"pair {start}")
        has_judge = JUDGE_KEY in side["sha256"]
        keys = [*range(self.n_readouts), *([JUDGE_KEY] if has_judge else [])]
        old = self._read_shard(i, keys, verify=True)
        acts = torch.cat([torch.stack(old[:self.n_readouts], dim=2).to(acts.dtype), acts])
        if not has_judge and judge_logodds is None:
            return acts, None
        n_old = start - self.shard_range(i)[0]
        before = old[-1].numpy() if has_judge else np.full(n_old, np.nan)
        after = (np.full(len(acts) - n_old, np.nan) if judge_logodds is None
                 else np.asarray(judge_logodds, dtype=np.float64))
        return acts, np.concatenate([before, after])

    def judge_logodds(self, verify: bool = True) -> Float[np.ndarray, " pair"] | None:
        """The zero-shot judge's log-odds per pair (float64; NaN where a shard lacks them), or
        None when no shard has them."""
        self._check_complete()
        out, kept = np.full(self._needed, np.nan), False
        for i in range(self.n_shards):
            start, stop = self.needed_range(i)
            if stop > start and JUDGE_KEY in (self._sidecar(i) or {}).get("sha256", {}):
                out[start:stop] = self._read_shard(i, [JUDGE_KEY], verify)[0].numpy()[:stop - start]
                kept = True
        if not kept:
            return None if self.n_pairs else np.zeros(0)
        return out if self._rows is None else out[self._rows]

    def _check_complete(self) -> None:
        missing = self.missing_shards()
        if missing:
            part = "" if self._rows is None else f" (the {self.n_pairs} pairs of {self.meta.dataset})"
            raise StoreError(f"{self.path} is incomplete{part}: shards {missing[:10]} of "
                             f"{self.n_shards} are missing; re-run the harvest to finish it")

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
        """Activations ``[n_pairs, 2, len(layers), d_model]`` (an int: ``[n_pairs, 2, d_model]``);
        -1 is the final norm's output, -2 the last block's resid_post."""
        single = isinstance(layers, int)
        idx = list(range(self.n_readouts)) if layers is None else ([layers] if single else list(layers))
        idx = [l % self.n_readouts if -self.n_readouts <= l < self.n_readouts else l for l in idx]
        bad = [l for l in idx if not 0 <= l < self.n_readouts]
        if bad:
            raise StoreError(f"{self.path} has read-outs 0..{self.n_readouts - 1}; asked for {bad}")
        self._check_complete()
        out = torch.empty(self._needed, 2, len(idx), self.d_model, dtype=dtype)
        for i in range(self.n_shards):
            start, stop = self.needed_range(i)
            if stop > start:
                for j, t in enumerate(self._read_shard(i, idx, verify)):
                    out[start:stop, :, j] = t[:stop - start].to(dtype)
        if self._rows is not None:
            out = out[torch.from_numpy(self._rows)]
        return out[:, :, 0] if single else out


def check_comparable(stores: Sequence[ActivationStore]) -> None:
    """Refuse fewer than two stores, or stores of different models, d_model or read-outs."""
    if len(stores) < 2:
        raise StoreError(f"cross-dataset transfer needs at least 2 stores, got {len(stores)}")
    first = stores[0]
    for s in stores[1:]:
        for key, what in (("model", "model"), ("d_model", "d_model"),
                          ("hook_names", "read-outs (hook_names)")):
            if getattr(s.meta, key) != getattr(first.meta, key):
                a, b = getattr(first.meta, key), getattr(s.meta, key)
                if key == "hook_names":
                    a, b = f"{len(a or [])} read-outs", f"{len(b or [])} read-outs"
                raise StoreError(
                    f"all stores must come from the same model with the same d_model and "
                    f"read-outs: {first.path} has {what} {a!r}, {s.path} has {b!r}. Directions "
                    f"and probes of different models live in different spaces")


def unique_names(stores: Sequence[ActivationStore]) -> list[str]:
    """Dataset names; the store folder name where two stores hold the same dataset name."""
    names = [s.meta.dataset for s in stores]
    return [s.path.name if names.count(n) > 1 else n for n, s in zip(names, stores)]


def readout_index(layer: int, n_readouts: int) -> int:
    """``layer`` as an index in ``0..n_readouts - 1`` (negative ones count from the end)."""
    if not -n_readouts <= layer < n_readouts:
        raise StoreError(f"the stores have read-outs 0..{n_readouts - 1} (or -{n_readouts}..-1); "
                         f"layer {layer} is out of range")
    return layer % n_readouts
