"""From records to stored activations: prompts and contrast pairs, prefix sharing, the harvest,
the store on disk, and the pipeline that ties them together."""
