"""The sentence-transformers side of C2LLM: the modules named in `modules.json`.

    modules.json:  C2LLMTransformer (path "")  ->  C2LLMPooling (path "pooling")  ->  Normalize

- `C2LLMTransformer` is sentence-transformers' own `Transformer` (tokenizer, max_seq_length, saving,
  loading) with one change: it keeps the pooled `sentence_embedding` that `C2LLMModel` computes,
  instead of only its token states.
- `C2LLMPooling` hands that embedding on and reports its dimension. It holds no weights: the PMA
  head lives in `pooling_c2llm.PMAPooling` and its weights in the root `model.safetensors`, so
  `SentenceTransformer(path)` and `AutoModel.from_pretrained(path)` run the same code on the same
  weights and give the same vectors.

`PMAPoolingHead` puts the same PMA on top of any other sentence-transformers backbone (weights in its
own folder), for experiments such as PMA on a BERT-style encoder.

Works with sentence-transformers 5.x and 6.x. Loaded from the Hub with `trust_remote_code=True`,
so it imports only torch, transformers and sentence-transformers.
"""

import inspect
import shutil
from pathlib import Path

import torch

try:  # Hub loading: transformers copies this sibling file next to this one inside a package.
    from .pooling_c2llm import PMAPooling
except ImportError:  # Plain import from the repository (tests, scripts).
    from pooling_c2llm import PMAPooling

try:  # sentence-transformers >= 6
    from sentence_transformers.base.modules.module import Module
    from sentence_transformers.base.modules.transformer import Transformer
except ImportError:  # sentence-transformers 5.x
    from sentence_transformers.models import Module, Transformer

# Inputs that `C2LLMModel.forward` reads: padded batches, or flattened (padding-free) ones.
MODEL_INPUT_KEYS = (
    "input_ids",
    "attention_mask",
    "position_ids",
    "cu_seq_lens_q",
    "cu_seq_lens_k",
    "max_length_q",
    "max_length_k",
    "seq_idx",
)
POOLED_FEATURE = "c2llm_sentence_embedding"


class C2LLMTransformer(Transformer):
    """sentence-transformers `Transformer` for C2LLM: runs `C2LLMModel` once and keeps both outputs.

    Adds to `features`: `token_embeddings` (batch, seq, hidden), as the stock module does, and
    `c2llm_sentence_embedding` (batch, embedding_dim), the model's pooled embedding.
    """

    def forward(self, features: dict[str, torch.Tensor], **kwargs) -> dict[str, torch.Tensor]:
        model_inputs = {key: features[key] for key in MODEL_INPUT_KEYS if key in features}
        outputs = self.auto_model(**model_inputs, **kwargs, return_dict=True)
        features["token_embeddings"] = outputs.last_hidden_state
        features[POOLED_FEATURE] = outputs.sentence_embedding
        return features

    def preprocess(self, inputs, *args, **kwargs):  # sentence-transformers >= 6
        self.auto_model.check_unicode(inputs, indexed=False)  # a length-sorted batch
        return super().preprocess(inputs, *args, **kwargs)

    def tokenize(self, texts, *args, **kwargs):  # sentence-transformers 5.x
        self.auto_model.check_unicode(texts, indexed=False)  # a length-sorted batch
        return super().tokenize(texts, *args, **kwargs)

    def get_embedding_dimension(self) -> int:
        """The model's embedding size (`config.embedding_dim`): the one source sentence-transformers reports."""
        return self.auto_model.config.embedding_dim

    get_sentence_embedding_dimension = get_embedding_dimension  # the sentence-transformers 5.x name

    def save(self, output_path: str, *args, **kwargs) -> None:
        """Save as the stock module does, then make sure the model's code sits at the folder root.

        Loading looks for `modeling_c2llm.py` and friends at the root only, and transformers 4.x does not
        always copy remote code when saving; without this a saved model would not load again.
        """
        super().save(output_path, *args, **kwargs)
        code_files = {inspect.getfile(type(self.auto_model)), inspect.getfile(type(self.auto_model.config)),
                      inspect.getfile(PMAPooling), __file__}
        for source in code_files:
            target = Path(output_path) / Path(source).name
            if not target.exists():
                shutil.copyfile(source, target)


class C2LLMPooling(Module):
    """Pooling step of the C2LLM pipeline: exposes the model's PMA output as `sentence_embedding`.

    Why a module of its own rather than sentence-transformers' stock `Transformer` alone: from 6.x the stock
    module can emit a model output under another name (`modality_config` + `module_output_name`), but 5.x
    cannot, and one `modules.json` serves both majors. The PMA itself stays inside the model, so AutoModel
    and SentenceTransformer run the same head on the same weights.

    It reports no dimension of its own: sentence-transformers then asks `C2LLMTransformer`, which reads the
    model config, so the reported size cannot disagree with the vectors.

    Args:
        embedding_dimension: the size d written beside the pipeline for readers of the folder; checked
            against the model's output on the first batch (a folder that misstates it fails loudly).
    """

    config_keys: list[str] = ["embedding_dimension"]

    def __init__(self, embedding_dimension: int):
        super().__init__()
        self.embedding_dimension = embedding_dimension

    def forward(self, features: dict[str, torch.Tensor], **kwargs) -> dict[str, torch.Tensor]:
        if POOLED_FEATURE not in features:
            raise ValueError(
                "C2LLMPooling needs the pooled output of C2LLMTransformer: the first entry of modules.json "
                "must have type 'sentence_c2llm.C2LLMTransformer'."
            )
        pooled = features.pop(POOLED_FEATURE)  # (batch, d)
        if pooled.shape[-1] != self.embedding_dimension:  # sentence-transformers would report the wrong size
            raise ValueError(
                f"pooling/config.json says embedding_dimension={self.embedding_dimension}, but the model produces "
                f"{pooled.shape[-1]}-dimensional embeddings: set it to {pooled.shape[-1]} (the config's pma_dim)."
            )
        features["sentence_embedding"] = pooled
        return features

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.save_config(output_path)


class PMAPoolingHead(Module):
    """A trainable PMA pooling step for any sentence-transformers backbone (BERT-style or other).

    C2LLM keeps its PMA inside the model (see `C2LLMPooling`); this module is for pipelines whose
    backbone is a stock `Transformer`, e.g. `Transformer(all-MiniLM-L6-v2) -> PMAPoolingHead -> Normalize`.
    It wraps the same `pooling_c2llm.PMAPooling` and stores its weights in its own folder.

    Args:
        hidden_size: width of the backbone's token embeddings.
        embedding_dimension: output size d; must be divisible by `num_heads`.
        num_heads: attention heads of the pooling (the paper uses 32).
        layer_norm: apply the two LayerNorms of equations (5) and (6).
        attention_scale: "embedding_dim" (scores / sqrt(d)) or "head_dim" (scores / sqrt(d / heads)).
        residual: "projected_query" (the published C2LLM model and the paper's equation (5): the projected
            learnable query is added back) or "query" (CodeFuse-CGE: the learnable query itself).
        query_dim: width of the learnable query; defaults to `embedding_dimension` (the published layout).
    """

    config_keys: list[str] = ["hidden_size", "embedding_dimension", "num_heads", "layer_norm", "attention_scale",
                              "residual", "query_dim"]

    def __init__(
        self,
        hidden_size: int,
        embedding_dimension: int | None = None,
        num_heads: int = 32,
        layer_norm: bool = True,
        attention_scale: str = "embedding_dim",
        residual: str = "projected_query",
        query_dim: int | None = None,
    ):
        super().__init__()
        self.hidden_size = hidden_size
        self.embedding_dimension = embedding_dimension or hidden_size
        self.num_heads = num_heads
        self.layer_norm = layer_norm
        self.attention_scale = attention_scale
        self.residual = residual
        self.query_dim = query_dim or self.embedding_dimension
        self.pma = PMAPooling(hidden_size, self.embedding_dimension, num_heads, layer_norm, attention_scale, residual,
                              self.query_dim)

    def forward(self, features: dict[str, torch.Tensor], **kwargs) -> dict[str, torch.Tensor]:
        # (batch, seq, hidden) token embeddings + (batch, seq) mask -> (batch, d)
        features["sentence_embedding"] = self.pma(features["token_embeddings"], features["attention_mask"])
        return features

    def get_embedding_dimension(self) -> int:
        return self.embedding_dimension

    get_sentence_embedding_dimension = get_embedding_dimension  # the sentence-transformers 5.x name

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.save_config(output_path)
        self.save_torch_weights(output_path, safe_serialization=safe_serialization)

    @classmethod
    def load(cls, model_name_or_path: str, subfolder: str = "", token=None, cache_folder=None, revision=None,
             local_files_only: bool = False, **kwargs) -> "PMAPoolingHead":
        hub_kwargs = dict(subfolder=subfolder, token=token, cache_folder=cache_folder, revision=revision,
                          local_files_only=local_files_only)
        module = cls(**cls.load_config(model_name_or_path=model_name_or_path, **hub_kwargs))
        # Weights from safetensors only: sentence-transformers would fall back to a pickled pytorch_model.bin,
        # and unpickling a file from a model folder can run code.
        if cls.load_file_path(model_name_or_path, filename="model.safetensors", **hub_kwargs) is None:
            raise ValueError(f"{model_name_or_path}/{subfolder}: no model.safetensors for the PMA head (a pickled "
                             "pytorch_model.bin is never loaded); save the module with model.save().")
        cls.load_torch_weights(model_name_or_path=model_name_or_path, model=module, **hub_kwargs)
        damaged = [name for name, tensor in module.state_dict().items() if not bool(torch.isfinite(tensor).all())]
        if damaged:
            raise ValueError(f"{model_name_or_path}/{subfolder}: the PMA head's {', '.join(damaged)} hold NaN or "
                             "infinite values (damaged weights): download or save the model again.")
        return module
