"""From records to stored activations: prompts and contrast pairs, prefix sharing, the model
runner (shared prefixes once, reads at branch tokens), the harvest, the store on disk, and the
pipeline that ties them together."""
