"""C2LLM (arXiv 2512.21332): `Qwen2Model` (no LM head) + a pooling head (`pooling_c2llm`; last-token / mean for
ablations) on padded batches and packed rows (`packing_c2llm`); loading rules (safetensors only, bfloat16 where the
hardware computes it, errors instead of random or damaged weights); `encode` for AutoModel users. No network calls."""

import functools
import warnings
from dataclasses import dataclass

import torch
import torch.nn.functional as F
import transformers
from torch import nn
from tqdm.auto import tqdm  # a dependency of transformers
from transformers import AutoTokenizer, Qwen2Model
from transformers.modeling_outputs import ModelOutput
from transformers.models.qwen2.modeling_qwen2 import Qwen2PreTrainedModel

try:  # Hub loading: transformers copies these sibling files next to this one inside a package.
    from .configuration_c2llm import C2LLMConfig
    from .packing_c2llm import PACKED_SDPA, PACKED_SDPA_AVAILABLE, PackedBatch
    from .pooling_c2llm import PMAPooling, positive_int
except ImportError:  # Plain import from the repository (tests, scripts).
    from configuration_c2llm import C2LLMConfig
    from packing_c2llm import PACKED_SDPA, PACKED_SDPA_AVAILABLE, PackedBatch
    from pooling_c2llm import PMAPooling, positive_int

try:  # transformers >= 5: init functions that skip weights already loaded from a checkpoint.
    from transformers import initialization as weight_init
except ImportError:  # transformers 4.x initialises only missing weights, so torch's functions are safe.
    weight_init = nn.init

DTYPE_ARGUMENT = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"  # its 4.x name
DEFAULT_MAX_LENGTH = 2048  # `encode` truncates to it, as the published model and mteb's C2LLM entry (training: 1,024)


@dataclass
class C2LLMOutput(ModelOutput):
    """sentence_embedding (batch, embedding_dim): pooled, unnormalized, float32 (all front doors normalize the same
    numbers). last_hidden_state: the last layer in the caller's layout, (batch, seq, hidden) or (1, total, hidden)."""

    sentence_embedding: torch.FloatTensor | None = None
    last_hidden_state: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None


def preferred_dtype(device: str | None = None) -> torch.dtype:
    """bfloat16 where `device` ("cuda" or "cpu"; default: cuda if available) computes it natively (cosine > 0.999
    to float32, benchmarks/encode_speed.py), else float32. Never float16: Qwen2's activations can overflow it."""
    if device == "cuda" or (device is None and torch.cuda.is_available()):
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    return torch.bfloat16 if cpu_computes_bfloat16() else torch.float32


def cpu_computes_bfloat16(cpuinfo: str = "/proc/cpuinfo") -> bool:
    """Whether the CPU has bfloat16 instructions (x86 AVX512-BF16 or AMX-BF16: emulated bfloat16 is slower than
    float32), read from the flags Linux lists; False elsewhere. torch has no public probe for it."""
    try:
        with open(cpuinfo) as handle:
            return bool({"avx512_bf16", "amx_bf16"} & set(next((line for line in handle if line.startswith("flags")),
                                                               "").split()))
    except OSError:
        return False


class C2LLMModel(Qwen2PreTrainedModel):
    """C2LLM embedding model: `Qwen2Model` (causal attention kept) + pooling head. Encoding, (n, d) unit vectors:
        >>> AutoModel.from_pretrained("path/to/c2llm", trust_remote_code=True).encode(["def add(a, b): ..."])"""

    config_class = C2LLMConfig
    _keys_to_ignore_on_load_unexpected = [r"^lm_head\.", r"^model\.lm_head\."]  # a Qwen2ForCausalLM's, never used
    _tied_weights_keys = {}  # no LM head, nothing to tie (a dict, as transformers 5 expects; valid for 4.x)

    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, PMAPooling):
            weight_init.normal_(module.query, mean=0.0, std=self.config.initializer_range)
        elif isinstance(module, nn.LayerNorm):  # transformers 4.x leaves LayerNorms to torch's defaults
            weight_init.ones_(module.weight)
            weight_init.zeros_(module.bias)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, new_pooling_head: bool = False,
                        **kwargs) -> "C2LLMModel":
        """`PreTrainedModel.from_pretrained` in `preferred_dtype()` unless a dtype is given, safetensors only, refusing
        missing backbone tensors, NaN weights, missing PMA weights (`new_pooling_head=True`: a new head, to train)."""
        if "dtype" not in kwargs and "torch_dtype" not in kwargs:
            kwargs[DTYPE_ARGUMENT] = preferred_dtype()
        kwargs.setdefault("use_safetensors", True)  # never unpickle a pytorch_model.bin: it can run code on load
        wants_loading_info = kwargs.pop("output_loading_info", False)
        model, loading_info = super().from_pretrained(pretrained_model_name_or_path, *model_args,
                                                      output_loading_info=True, **kwargs)
        source, missing = pretrained_model_name_or_path, sorted(loading_info["missing_keys"])
        missing_head = [key for key in missing if key.startswith("pma.")]
        missing_base = [key for key in missing if not key.startswith("pma.")]
        damaged = [name for name, tensor in model.state_dict().items() if tensor.is_floating_point()  # meta: offloaded
                   and tensor.device.type != "meta" and not bool(torch.isfinite(tensor).all())]
        if missing_head and not new_pooling_head:
            raise ValueError(f"{source} has no weights for the PMA pooling head ({', '.join(missing_head)}): its "
                             "embeddings would be random. Load a C2LLM checkpoint or pass new_pooling_head=True.")
        if missing_base:
            raise ValueError(f"{source} lacks {len(missing_base)} backbone tensors ({', '.join(missing_base[:5])}"
                             ", ...): they would load as random layers; download or export the checkpoint again.")
        if damaged:
            raise ValueError(f"{source} holds NaN or infinite values in {', '.join(damaged[:5])}: the weights are "
                             "damaged and every embedding would be NaN. Download or export the checkpoint again.")
        return (model, loading_info) if wants_loading_info else model

    def __init__(self, config: C2LLMConfig):
        config.check_backbone()  # again: from_pretrained(..., field=value) sets fields after the config's own checks
        super().__init__(config)
        self.model = Qwen2Model(config)
        self.pma = PMAPooling.from_config(config) if config.pooling == "pma" else None
        if PACKED_SDPA_AVAILABLE and config._attn_implementation == "sdpa":
            config._attn_implementation = PACKED_SDPA  # sdpa, plus per-sequence attention for packed rows
        self.post_init()

    def pool(self, token_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(batch, seq, hidden) token states and (batch, seq) mask -> (batch, embedding_dim), real tokens only."""
        if self.config.pooling == "pma":
            return self.pma(token_states, attention_mask)
        if self.config.pooling == "mean":
            mask = attention_mask.to(token_states.dtype).unsqueeze(-1)  # (batch, seq, 1)
            return (token_states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        positions = torch.arange(token_states.shape[1], device=token_states.device)  # (seq,)
        last = (attention_mask.long() * positions).argmax(dim=1)  # (batch,): last real token, any padding side
        return token_states[torch.arange(token_states.shape[0], device=token_states.device), last]

    def forward(self, input_ids: torch.LongTensor | None = None, attention_mask: torch.Tensor | None = None,
                position_ids: torch.LongTensor | None = None, inputs_embeds: torch.FloatTensor | None = None,
                output_hidden_states: bool | None = None, output_attentions: bool | None = None,
                return_dict: bool | None = None, **kwargs) -> C2LLMOutput | tuple:
        """Embed a batch. Inputs are those of `Qwen2Model`: a padded batch with its attention mask, or a packed
        row (batch 1, no mask) cut by `cu_seq_lens_q` (flash-attn varlen) or by restarting `position_ids`."""
        if attention_mask is not None and not bool(attention_mask.any(dim=-1).all()):
            raise ValueError(f"Batch rows {torch.nonzero(~attention_mask.any(dim=-1)).flatten().tolist()} have no "
                             "tokens (empty texts?): drop empty strings or give them a prompt.")
        backbone_inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": position_ids,
                           "inputs_embeds": inputs_embeds}
        wants_layers = self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        wants_attentions = self.config.output_attentions if output_attentions is None else output_attentions
        # Packed into one row where there is padding to drop and nothing asked needs the padded layout.
        packs_here = (self.config.pack_sequences and self.config._attn_implementation == PACKED_SDPA
                      and attention_mask is not None and attention_mask.dim() == 2 and position_ids is None
                      and not wants_layers and not wants_attentions and not bool(attention_mask.all()))
        packed = None  # the sequences as one row, when the batch runs or arrived packed
        if packs_here:
            packed = PackedBatch(attention_mask.bool())
            backbone_inputs = {"input_ids": packed.pack(input_ids), "inputs_embeds": packed.pack(inputs_embeds),
                               **packed.backbone_inputs(getattr(self.config, "layer_types", None))}
        elif attention_mask is None:
            packed = PackedBatch.of_row(kwargs.get("cu_seq_lens_q"), position_ids)
        outputs = self.model(**backbone_inputs, use_cache=False, output_hidden_states=output_hidden_states,
                             output_attentions=output_attentions, return_dict=True, **kwargs)
        token_states = outputs.last_hidden_state  # (batch, seq, hidden), or (1, total, hidden) for a packed row
        padded_states = packed.unpack(token_states) if packed is not None else token_states  # (n, width, hidden)
        mask = packed.real_tokens if packed is not None else attention_mask  # (n, width), None: no padding
        mask = torch.ones(padded_states.shape[:2], device=padded_states.device) if mask is None else mask
        output = C2LLMOutput(sentence_embedding=self.pool(padded_states, mask).float(),
                             last_hidden_state=padded_states if packs_here else token_states,
                             hidden_states=outputs.hidden_states, attentions=outputs.attentions)
        return output if return_dict is not False else output.to_tuple()

    def encode(self, sentences: str | list[str], tokenizer=None, batch_size: int = 32,
               max_length: int = DEFAULT_MAX_LENGTH, prompt: str | None = None, normalize: bool = True,
               show_progress_bar: bool = False, truncate_dim: int | None = None) -> torch.Tensor:
        """(n,) strings -> (n, truncate_dim or d) float32 CPU tensor as sentence-transformers encodes: `prompt` first,
        longest texts first, cut at `max_length`, `truncate_dim` coordinates (untrained widths warn), unit length."""
        for name, value in (("batch_size", batch_size), ("max_length", max_length)):
            if not positive_int(value):
                raise ValueError(f"{name} must be a positive integer, got {value!r}.")
        width, trained = self.config.embedding_dim, self.config.matryoshka_dims or []
        if truncate_dim is not None and (not positive_int(truncate_dim) or truncate_dim > width):
            raise ValueError(f"truncate_dim must be an integer in 1..{width} (the embedding dimension) or None, got "
                             f"{truncate_dim!r}.")
        if truncate_dim not in (None, width, *trained):  # stacklevel 2 (encode has no decorator): the caller's line
            warnings.warn(f"truncate_dim={truncate_dim}: this model was trained for the widths {[width, *trained]} "
                          "(config.matryoshka_dims); the quality of other truncations is unmeasured.", stacklevel=2)
        if prompt is not None and not isinstance(prompt, str):
            raise TypeError(f"prompt must be a string or None, got {type(prompt).__name__}.")
        if not isinstance(sentences, (str, list, tuple)):
            raise TypeError(f"sentences must be a string or a list of strings, got {type(sentences).__name__}.")
        texts = [sentences] if isinstance(sentences, str) else list(sentences)
        self.check_texts([prompt or ""], label="prompt")
        self.check_texts(texts, label="sentences[{index}]")
        embeddings = torch.empty(len(texts), truncate_dim or width)
        texts = [(prompt or "") + text for text in texts]
        tokenizer = self.saved_tokenizer if tokenizer is None and texts else tokenizer
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # longest first: little padding
        for start in tqdm(range(0, len(texts), batch_size), "Encoding", unit="batch", disable=not show_progress_bar):
            batch = order[start : start + batch_size]
            inputs = tokenizer([texts[i] for i in batch], padding=True, truncation=True, max_length=max_length,
                               return_tensors="pt").to(self.device)
            with torch.inference_mode():
                pooled = self(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
            pooled = pooled.sentence_embedding[:, :truncate_dim]  # (batch, truncate_dim or embedding_dim)
            embeddings[batch] = (F.normalize(pooled, dim=-1) if normalize else pooled).cpu()
        return embeddings

    @staticmethod
    def check_texts(texts: list, label: str | None = None) -> None:
        """Refuse a non-string or unreadable text (a lone surrogate), named by `label`, else quoted (a batch)."""
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                if label:
                    raise TypeError(f"{label.format(index=index)} is {type(text).__name__}, not str: pass a list "
                                    "of strings.")
                continue
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:
                around = text[max(0, error.start - 20) : error.start + 20]
                item = label.format(index=index) if label else f"the text around {around!r}"
                raise ValueError(f"{item} is not valid Unicode ({error.reason} at position {error.start}): "
                                 "decode the source text with errors='replace'.") from None

    @functools.cached_property
    def saved_tokenizer(self):
        """The tokenizer stored beside the weights, left padding enforced (loaded on first use)."""
        if not self.config.name_or_path:
            raise ValueError("This model was not loaded from a folder or Hub repo, so it has no saved tokenizer: "
                             "pass tokenizer=AutoTokenizer.from_pretrained(...) to encode().")
        # Our config keeps AutoTokenizer from re-reading config.json (it would ask again to trust the code).
        return AutoTokenizer.from_pretrained(self.config.name_or_path, config=self.config, padding_side="left")

