"""The tokenizer of a model, on its own so that every loader can import it (no import circle
between :mod:`ppairs_lens.models.loading` and :mod:`ppairs_lens.models.hooked`)."""

from __future__ import annotations

from ppairs_lens.models.embedded import embedded_model_dir

__all__ = ["load_tokenizer"]


def load_tokenizer(name: str | None = None):
    """The tokenizer of ``name`` (default: the embedded model), offline where cached."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(embedded_model_dir()) if name is None else name)
