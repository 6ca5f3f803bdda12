"""Steered generation, side by side: ``ppairs-lens generate --probe DIR --alpha A ... --prompt P``.

A saved probe, sweep or direction (folder or Hub repo id) gives a unit direction and its hook
point; each prompt is continued greedily with ``alpha`` times it added there, beside a seeded
random direction of the same norm: any push of that size changes the text, the question is
whether the probe's changes it differently. ``alpha`` is in units of the median activation norm
at the hook over the prompts' tokens but the first (an outlier in most models), as ``ppairs-lens
steer`` measures its alphas; ``--raw-alpha`` adds ``alpha`` itself.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import torch
from jaxtyping import Float, Int
from torch import Tensor

from ppairs_lens.activations.prompts import chat_text
from ppairs_lens.errors import PPairsError
from ppairs_lens.interventions.directions import random_directions
from ppairs_lens.interventions.steering import check_alpha, steer
from ppairs_lens.models.loading import model_name
from ppairs_lens.probes.hub import CARD, read_model_card, resolve_saved
from ppairs_lens.probes.persistence import load_direction, load_probe, load_sweep, read_metadata

__all__ = ["SteeringSource", "steering_source", "norm_unit", "continuations", "side_by_side",
           "cli"]


@dataclass(frozen=True)
class SteeringSource:
    """A unit direction, the hook point to add it at, and what it is (for the header)."""

    direction: Float[Tensor, "d_model"]
    hook: str
    label: str


def _card_hook(folder, kind: str) -> str | None:
    """The read-out the model card records as chosen for ``kind`` (None without one)."""
    if not (Path(folder) / CARD).is_file():  # (a card that is there but broken is refused)
        return None
    metrics = (read_model_card(folder).get("ppairs_lens") or {}).get("metrics") or []
    return next((m["hook"] for m in metrics if m.get("kind") == kind and m.get("hook")), None)


def steering_source(bridge, source: str, *, kind: str | None = None,
                    hook: str | None = None) -> SteeringSource:
    """The direction saved at ``source`` for ``bridge`` (another model is refused)."""
    folder = resolve_saved(source)
    meta = read_metadata(folder)
    name = model_name(bridge)
    h = hook or (meta.hook_names[0] if meta.hook_names else None)  # a sweep's: set below
    if meta.object == "probe":
        probe = load_probe(folder, model=name, hook=hook)
        d, label = torch.as_tensor(probe.direction_).reshape(-1), f"{meta.kinds[0]} probe"
    elif meta.object == "direction":
        d, _ = load_direction(folder, model=name, hook=hook)
        if d.ndim == 2 and d.shape[0] != 1:
            raise PPairsError(f"{source} holds {d.shape[0]} directions; steering adds one")
        d, label = d.reshape(-1), f"{meta.kinds[0]} direction"
    else:
        sweep = load_sweep(folder, model=name)
        k = kind or "supervised"
        if k not in sweep.kinds:
            raise PPairsError(f"{source}: no {k} probe in this sweep; it has {list(sweep.kinds)}")
        h = hook or _card_hook(folder, k)
        if h is None or h not in meta.hook_names:
            raise PPairsError(f"{source}: name the read-out to steer at with --hook, one of "
                              f"{list(meta.hook_names)}" + (f" (not {h!r})" if h else ""))
        j = list(meta.hook_names).index(h)
        if bool(sweep.degenerate[k][j]):
            raise PPairsError(f"{source}: the {k} probe at {h} is degenerate (no direction)")
        d, label = sweep.directions[k][j], f"{k} probe"
    if h is None:
        raise PPairsError(f"{source} does not record its hook point: name it with --hook")
    d = d.detach().float()
    if not torch.isfinite(d).all() or float(d.norm()) == 0.0:
        raise PPairsError(f"{source}: the saved direction is not a finite non-zero vector")
    return SteeringSource(d / d.norm(), h, f"{label} at {h}")


def prompt_tokens(bridge, prompts: Sequence[str], chat: bool) -> list[Int[Tensor, "1 pos"]]:
    """Each prompt's tokens ``[1, pos]``: as the model's chat turn (``chat``) or plain text."""
    if not chat:
        return [bridge.to_tokens(p).cpu() for p in prompts]
    tok = bridge.tokenizer
    return [torch.tensor([tok(chat_text(tok, None, p), add_special_tokens=False)["input_ids"]],
                         dtype=torch.long) for p in prompts]


@torch.no_grad()
def norm_unit(bridge, tokens: Sequence[Tensor], hook: str) -> float:
    """The median activation norm at ``hook`` over every prompt token but the first."""
    norms = []

    def keep(x, hook=None):
        norms.append(x[0, 1:].float().norm(dim=-1).cpu())

    with bridge.hooks(fwd_hooks=[(hook, keep)]):
        for t in tokens:
            bridge(t, return_type=None)
    values = torch.cat(norms) if norms else torch.empty(0)
    if values.numel() == 0:
        raise PPairsError("the prompts need two tokens or more to measure the activation norm")
    return float(values.median())


def continuations(bridge, tokens: Int[Tensor, "1 pos"], direction: Tensor | None,
                  alphas: Sequence[float], hook: str, *, scale: float, max_new_tokens: int,
                  positions: str | int = "all") -> list[str]:
    """The greedy continuation of ``tokens`` under ``alpha * scale * direction`` at ``hook``,
    for each ``alpha`` (``0``, or no ``direction``: unsteered)."""
    n = tokens.shape[1]
    pos = n - 1 if positions == "new" else positions

    def run(a: float) -> str:
        with (nullcontext() if direction is None or a == 0
              else steer(bridge, direction, float(a) * scale, [hook], positions=pos)):
            out = bridge.generate(tokens, max_new_tokens=max_new_tokens, do_sample=False,
                                  verbose=False, use_past_kv_cache=True)
        return bridge.tokenizer.decode(out[0, n:], skip_special_tokens=True)

    return [run(a) for a in alphas]


def side_by_side(alphas: Sequence[float], columns: dict[str, list[str]], width: int = 48
                 ) -> str:
    """A table: one row per ``alpha``, one wrapped column per entry of ``columns``."""
    heads = ["alpha", *columns]
    widths = [7] + [width] * len(columns)
    lines = [" | ".join(h.ljust(w)[:w] for h, w in zip(heads, widths)),
             "-+-".join("-" * w for w in widths)]
    for i, a in enumerate(alphas):
        cells = [[f"{a:+g}"]] + [textwrap.wrap(" ".join(col[i].split()), width) or ["(nothing)"]
                                 for col in columns.values()]
        for r in range(max(len(c) for c in cells)):
            lines.append(" | ".join((c[r] if r < len(c) else "").ljust(w)
                                    for c, w in zip(cells, widths)).rstrip())
    return "\n".join(lines)


def cli(args, bridge) -> None:
    """``ppairs-lens generate``: the table for each prompt."""
    src = steering_source(bridge, args.probe, kind=args.kind, hook=args.hook)
    tokens = prompt_tokens(bridge, args.prompt, args.chat)
    median = norm_unit(bridge, tokens, src.hook)
    if not median > 0:
        raise PPairsError(f"the activations at {src.hook} have median norm {median:g} over the "
                          "prompts: no unit to measure a steering strength in; use --raw-alpha")
    scale = 1.0 if args.raw_alpha else median
    for a in args.alpha:  # a raw strength is bounded relative to the activations it is added to
        check_alpha(a / median if args.raw_alpha else a, "--alpha" + (
            f" {a:g} (raw; median norm {median:.3g} at {src.hook})" if args.raw_alpha else ""))
    rand = random_directions(1, src.direction.shape[-1], args.seed)[0]
    alphas = [0.0, *(a for a in args.alpha if a != 0)]
    unit = "raw" if args.raw_alpha else f"x median norm {scale:.3g} at {src.hook}"
    print(f"steering: {src.label}; alpha {unit}; random direction: seed {args.seed}, same norm")
    kw = {"scale": scale, "max_new_tokens": args.max_new_tokens, "positions": args.positions}
    for prompt, t in zip(args.prompt, tokens):
        probe = continuations(bridge, t, src.direction, alphas, src.hook, **kw)
        # alpha 0 is the same unsteered text in both columns: generated once
        rand_col = probe[:1] + continuations(bridge, t, rand, alphas[1:], src.hook, **kw)
        cols = {"probe direction": probe, "random direction": rand_col}
        print(f"\nprompt: {prompt!r}\n{side_by_side(alphas, cols, args.width)}")
