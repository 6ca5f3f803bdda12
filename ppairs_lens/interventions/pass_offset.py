"""Where a forward pass starts in its sequence: the positions a key-value cache holds before it.

``generate`` with a key-value cache runs the prompt once, then one pass per new token that sees
only that token; a hook that steers "from position ``p`` on" must know that token's position in
the whole sequence. Block 0's attention scores have one key per cached or new position and one
query per new one, so ``keys - queries`` is the pass's first position: on a TransformerBridge
and a HookedTransformer alike, read through hook points only (no attribute of the model or its
cache). ``hook_embed``, the first hook point of every pass, clears it, so a hook point that
fires before block 0's attention gets ``None``, never the previous pass's offset.
"""

from __future__ import annotations

from collections.abc import Callable

from jaxtyping import Float
from torch import Tensor

__all__ = ["PassOffset", "OFFSET_HOOK"]

#: Where the offset is read: keys (cached + new) minus queries (new).
OFFSET_HOOK = "blocks.0.attn.hook_attn_scores"
#: The first hook point of every forward pass (clears the offset).
PASS_START_HOOK = "hook_embed"


class PassOffset:
    """The current forward pass's first position (``value``; None before block 0's attention).

    Add :meth:`hooks` to the same ``model.hooks(...)`` as the hooks that read :attr:`value`.
    """

    def __init__(self) -> None:
        self.value: int | None = None

    def _clear(self, x: Tensor, hook=None) -> Tensor:
        self.value = None
        return x

    def _record(self, scores: Float[Tensor, "batch head query key"], hook=None) -> Tensor:
        self.value = int(scores.shape[-1] - scores.shape[-2])
        return scores

    def hooks(self) -> list[tuple[str, Callable]]:
        """``[(hook name, fn)]`` that keep :attr:`value` up to date, pass by pass."""
        return [(PASS_START_HOOK, self._clear), (OFFSET_HOOK, self._record)]
