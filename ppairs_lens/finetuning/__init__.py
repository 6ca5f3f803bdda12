"""A judge finetuned on the probe's own training comparisons: LoRA (through ``peft``) or full
finetuning of a *copy* of the model's weights, read like the prompted judge."""
