"""Stand-alone tools built on the product, run by hand: ``convert_published`` (a published C2LLM checkpoint in this
repository's release layout) and ``parity_check`` (its vectors against the published ones). Nothing in the model
files, train/ or evaluation/ imports this package."""
