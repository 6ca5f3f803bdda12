"""Models: loading (embedded default, any HF id or folder), the tiny test model."""
