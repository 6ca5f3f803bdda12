"""A model's tokenizer, on its own so that every loader can import it (no import circle)."""

from __future__ import annotations

from ppairs_lens.models.embedded import embedded_model_dir

__all__ = ["load_tokenizer"]


def load_tokenizer(name: str | None = None):
    """The tokenizer of ``name`` (default: the embedded model), offline where cached."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(embedded_model_dir()) if name is None else name)
