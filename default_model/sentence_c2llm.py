"""The sentence-transformers (5.x, 6.x) modules of C2LLM: C2LLMTransformer -> C2LLMPooling -> Normalize runs the PMA
inside the model (the AutoModel route's code and weights); `PMAPoolingHead` puts it on any other backbone."""

import inspect
import shutil
from pathlib import Path

import torch

try:  # Hub loading: transformers copies this sibling file next to this one inside a package.
    from .pooling_c2llm import PMAPooling, positive_int
except ImportError:  # Plain import from the repository (tests, scripts).
    from pooling_c2llm import PMAPooling, positive_int

try:  # sentence-transformers >= 6
    from sentence_transformers.base.modules.module import Module
    from sentence_transformers.base.modules.transformer import Transformer
except ImportError:  # sentence-transformers 5.x
    from sentence_transformers.models import Module, Transformer

MODEL_INPUT_KEYS = ("input_ids", "attention_mask", "position_ids", "cu_seq_lens_q", "cu_seq_lens_k", "max_length_q",
                    "max_length_k", "seq_idx")  # what C2LLMModel reads: padded, or packed with flash-attn's keys
POOLED_FEATURE = "c2llm_sentence_embedding"


class C2LLMTransformer(Transformer):
    """The stock `Transformer`, also keeping the model's pooled output, `POOLED_FEATURE` (batch, embedding_dim)."""

    def forward(self, features: dict[str, torch.Tensor], **kwargs) -> dict[str, torch.Tensor]:
        model_inputs = {key: features[key] for key in MODEL_INPUT_KEYS if key in features}
        outputs = self.auto_model(**model_inputs, **kwargs, return_dict=True)
        features["token_embeddings"] = outputs.last_hidden_state
        features[POOLED_FEATURE] = outputs.sentence_embedding
        return features

    def preprocess(self, inputs, *args, **kwargs):  # sentence-transformers >= 6
        self.auto_model.check_texts(inputs)  # a length-sorted batch: the error quotes the text
        return super().preprocess(inputs, *args, **kwargs)

    def tokenize(self, texts, *args, **kwargs):  # sentence-transformers 5.x
        self.auto_model.check_texts(texts)
        return super().tokenize(texts, *args, **kwargs)

    def get_embedding_dimension(self) -> int:  # the model config's `embedding_dim`: the one source reported
        return self.auto_model.config.embedding_dim

    get_sentence_embedding_dimension = get_embedding_dimension  # the sentence-transformers 5.x name

    def save(self, output_path: str, *args, **kwargs) -> None:
        """Save as the stock module, then copy the model's code files to the folder root (transformers 4.x may not)."""
        super().save(output_path, *args, **kwargs)
        for source in {*Path(inspect.getfile(type(self.auto_model))).parent.glob("*_c2llm.py"), Path(__file__)}:
            if not (Path(output_path) / source.name).exists():
                shutil.copyfile(source, Path(output_path) / source.name)


class C2LLMPooling(Module):
    """The model's PMA output as `sentence_embedding`; its dimension is the model config's, checked on every batch."""

    config_keys: list[str] = ["embedding_dimension"]

    def __init__(self, embedding_dimension: int, **unknown):
        super().__init__()
        if unknown or not positive_int(embedding_dimension):
            raise ValueError(f'pooling/config.json must be {{"embedding_dimension": N}}, N a positive integer (the '
                             f"model's embedding_dim), got {dict(embedding_dimension=embedding_dimension, **unknown)}.")
        self.embedding_dimension = embedding_dimension

    @classmethod
    def load_config(cls, model_name_or_path: str, subfolder: str = "", config_filename: str | None = None,
                    **kwargs) -> dict:
        """The stock reading, which gives {} for a missing file (then a TypeError from __init__): refused, named."""
        config = super().load_config(model_name_or_path, subfolder, config_filename, **kwargs)
        if not config:
            filename = config_filename or cls.config_file_name
            name = "/".join(part for part in (str(model_name_or_path), subfolder, filename) if part)
            raise ValueError(f'{name} is missing or empty: write {{"embedding_dimension": N}} there, N the model\'s '
                             "embedding dimension (pma_dim in config.json), or copy the folder's pooling/ from the "
                             "release again.")
        return config

    def forward(self, features: dict[str, torch.Tensor], **kwargs) -> dict[str, torch.Tensor]:
        if POOLED_FEATURE not in features:
            raise ValueError("C2LLMPooling needs the pooled output of C2LLMTransformer: the first entry of "
                             "modules.json must have type 'sentence_c2llm.C2LLMTransformer'.")
        pooled = features.pop(POOLED_FEATURE)  # (batch, d)
        if pooled.shape[-1] != self.embedding_dimension:
            raise ValueError(f"pooling/config.json says embedding_dimension={self.embedding_dimension}, but the model "
                             f"produces {pooled.shape[-1]}-dimensional embeddings: set it to {pooled.shape[-1]}.")
        features["sentence_embedding"] = pooled
        return features

    def save(self, output_path: str, *args, safe_serialization: bool = True, **kwargs) -> None:
        self.save_config(output_path)


class PMAPoolingHead(Module):
    """`PMAPooling` on any sentence-transformers backbone (`Transformer -> PMAPoolingHead -> Normalize`)."""

    config_keys: list[str] = ["hidden_size", "embedding_dimension", "num_heads", "layer_norm", "attention_scale",
                              "residual", "query_dim", "matryoshka_dims"]

    def __init__(self, hidden_size: int, embedding_dimension: int | None = None, num_heads: int = 32,
                 layer_norm: bool = True, attention_scale: str = "embedding_dim", residual: str = "projected_query",
                 query_dim: int | None = None, matryoshka_dims: list[int] | None = None):
        super().__init__()
        self.hidden_size, self.num_heads, self.layer_norm = hidden_size, num_heads, layer_norm
        self.embedding_dimension = embedding_dimension = embedding_dimension or hidden_size
        self.query_dim = query_dim = query_dim or embedding_dimension
        self.attention_scale, self.residual, self.matryoshka_dims = attention_scale, residual, matryoshka_dims
        self.pma = PMAPooling(hidden_size, embedding_dimension, num_heads, layer_norm, attention_scale, residual,
                              query_dim)

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
    def load(cls, model_name_or_path: str, subfolder: str = "", **kwargs) -> "PMAPoolingHead":
        """From safetensors only (never a pickled pytorch_model.bin: unpickling can run code), refusing NaN or inf."""
        hub_keys = ("token", "cache_folder", "revision", "local_files_only")
        hub_kwargs = {"subfolder": subfolder, **{key: kwargs[key] for key in hub_keys if key in kwargs}}
        module = cls(**cls.load_config(model_name_or_path=model_name_or_path, **hub_kwargs))
        if cls.load_file_path(model_name_or_path, filename="model.safetensors", **hub_kwargs) is None:
            raise ValueError(f"{model_name_or_path}/{subfolder}: no model.safetensors for the PMA head (a pickled "
                             "pytorch_model.bin is never loaded); save the module with model.save().")
        cls.load_torch_weights(model_name_or_path=model_name_or_path, model=module, **hub_kwargs)
        damaged = [name for name, tensor in module.state_dict().items() if not bool(torch.isfinite(tensor).all())]
        if damaged:
            raise ValueError(f"{model_name_or_path}/{subfolder}: the PMA head's {', '.join(damaged)} hold NaN or "
                             "infinite values (damaged weights): download or save the model again.")
        return module
