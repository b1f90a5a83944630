"""The module of a static twin folder (train/static_twin.py writes it): sentence-transformers' StaticEmbedding with
a length cap that can be set.

StaticEmbedding's `max_seq_length` is fixed at infinity and cannot be set, while callers that cap every model's
length before encoding (codesearch's `--max-seq-length`, c2llm_plumbing.models.load_model) set it on the first
module: here setting it truncates the tokenizer, so the twin reads what the full model would read. Copied into each
twin folder, which names it in modules.json as `static_twin.StaticTwinEmbedding` (loaded with trust_remote_code).
"""

from __future__ import annotations

import math

try:  # sentence-transformers >= 6
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding
except ImportError:  # sentence-transformers 5.x
    from sentence_transformers.models import StaticEmbedding


class StaticTwinEmbedding(StaticEmbedding):
    """A text's vector is the mean of its tokens' rows; `max_seq_length` (None or infinity: no cap) truncates."""

    @property
    def max_seq_length(self) -> int | float:
        truncation = self.tokenizer.truncation
        return truncation["max_length"] if truncation else math.inf

    @max_seq_length.setter
    def max_seq_length(self, value: int | float | None) -> None:
        if value is None or value == math.inf:
            self.tokenizer.no_truncation()
        else:
            self.tokenizer.enable_truncation(int(value))

    @classmethod
    def load(cls, model_name_or_path: str, **kwargs) -> "StaticTwinEmbedding":
        base = super().load(model_name_or_path, **kwargs)  # the base class's load returns a plain StaticEmbedding
        return cls(base.tokenizer, embedding_weights=base.embedding.weight.data)
