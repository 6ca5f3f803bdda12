"""The model as a judge, read from its answers rather than its hidden state: zero-shot
comparison, direct scoring, G-Eval, and the comparators that ranking drives."""
