"""ppairs-lens: PPairS (pairwise preference search with linear probing) on TransformerLens."""

__version__ = "0.1.0"
