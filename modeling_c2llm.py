"""C2LLM (arXiv 2512.21332): what it adds to transformers' `Qwen2Model` (kept without its LM head).

- the pooling head (`pooling_c2llm.PMAPooling`; last-token / mean for ablations), applied once per forward to
  padded batches (any padding side) and packed rows (`packing_c2llm`) alike;
- loading rules: safetensors only, bfloat16 where the hardware computes it, errors instead of random or damaged
  weights; attention through the transformers interface (sdpa by default, eager, flash_attention_2);
- `encode(texts)` for `AutoModel.from_pretrained(path, trust_remote_code=True)` users.
Imports only torch and transformers; no network calls.
"""

import functools
from dataclasses import dataclass

import torch
import torch.nn.functional as F
import transformers
from torch import nn
from transformers import AutoTokenizer, Qwen2Model
from transformers.modeling_outputs import ModelOutput
from transformers.models.qwen2.modeling_qwen2 import Qwen2PreTrainedModel
from transformers.utils import logging

try:  # Hub loading: transformers copies these sibling files next to this one inside a package.
    from .configuration_c2llm import C2LLMConfig
    from .packing_c2llm import PACKED_SDPA, PACKED_SDPA_AVAILABLE, PackedBatch
    from .pooling_c2llm import PMAPooling
except ImportError:  # Plain import from the repository (tests, scripts).
    from configuration_c2llm import C2LLMConfig
    from packing_c2llm import PACKED_SDPA, PACKED_SDPA_AVAILABLE, PackedBatch
    from pooling_c2llm import PMAPooling

try:  # transformers >= 5: init functions that skip weights already loaded from a checkpoint.
    from transformers import initialization as weight_init
except ImportError:  # transformers 4.x initialises only missing weights, so torch's functions are safe.
    weight_init = nn.init

logger = logging.get_logger(__name__)
# transformers 5 names the load dtype `dtype`; 4.x calls it `torch_dtype`.
DTYPE_ARGUMENT = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
# `encode` truncates to it, as the published model's `encode` and mteb's C2LLM entry (training: 1,024).
DEFAULT_MAX_LENGTH = 2048


@dataclass
class C2LLMOutput(ModelOutput):
    """sentence_embedding (batch, embedding_dim): pooled, not normalized. last_hidden_state: the backbone's last
    layer in the layout the caller sent, (batch, seq, hidden) or a packed row (1, total, hidden). hidden_states,
    attentions: as in `Qwen2Model`, when requested."""

    sentence_embedding: torch.FloatTensor | None = None
    last_hidden_state: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bfloat16 in hardware (AVX512-BF16, AMX); emulated bf16 is slower than fp32."""
    probe = getattr(torch.cpu, "_is_avx512_bf16_supported", lambda: False)  # private helper, hence the guard
    try:
        return bool(probe())
    except RuntimeError:
        return False


def preferred_dtype() -> torch.dtype:
    """bfloat16 where the GPU or CPU computes it natively (cosine > 0.999 to float32, benchmarks/encode_speed.py),
    else float32. Never float16: Qwen2's activations can overflow it."""
    if torch.cuda.is_available():
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    return torch.bfloat16 if cpu_has_native_bf16() else torch.float32


def name_some(names: list[str], shown: int = 5) -> str:
    """The first `shown` names, then how many more: for errors about many tensors."""
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


class C2LLMModel(Qwen2PreTrainedModel):
    """C2LLM embedding model: `Qwen2Model` (causal attention kept) + pooling head. Training starts from a Qwen2
    checkpoint with `C2LLMModel.from_pretrained(qwen_path, config=..., new_pooling_head=True)`.

        >>> model = AutoModel.from_pretrained("path/to/c2llm", trust_remote_code=True)
        >>> embeddings = model.encode(["def add(a, b): return a + b"])  # (1, embedding_dim), normalized
    """

    config_class = C2LLMConfig
    # A Qwen2ForCausalLM checkpoint carries an LM head that an embedding model never uses.
    _keys_to_ignore_on_load_unexpected = [r"^lm_head\.", r"^model\.lm_head\."]
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
        """`PreTrainedModel.from_pretrained` in `preferred_dtype()` unless `dtype` (4.x: `torch_dtype`) is given, from
        safetensors only, refusing missing backbone tensors, NaN weights and, unless `new_pooling_head=True`
        (starting training from a backbone), a checkpoint without PMA weights."""
        if "dtype" not in kwargs and "torch_dtype" not in kwargs:
            kwargs[DTYPE_ARGUMENT] = preferred_dtype()
        kwargs.setdefault("use_safetensors", True)  # never unpickle a pytorch_model.bin: it can run code on load
        wants_loading_info = kwargs.pop("output_loading_info", False)
        model, loading_info = super().from_pretrained(pretrained_model_name_or_path, *model_args,
                                                      output_loading_info=True, **kwargs)
        source, missing = pretrained_model_name_or_path, sorted(loading_info["missing_keys"])
        missing_head = [key for key in missing if key.startswith("pma.")]
        missing_backbone = [key for key in missing if not key.startswith("pma.")]
        damaged = [name for name, tensor in model.state_dict().items()
                   if tensor.is_floating_point() and tensor.device.type != "meta"  # offloaded: not loaded here
                   and not bool(torch.isfinite(tensor).all())]
        if missing_head and not new_pooling_head:
            raise ValueError(f"{source} has no weights for the PMA pooling head ({', '.join(missing_head)}), so its "
                             "embeddings would be random. Load a C2LLM checkpoint, or pass new_pooling_head=True to "
                             "start training from this backbone with a freshly initialised head.")
        if missing_backbone:
            raise ValueError(f"{source} lacks {len(missing_backbone)} backbone tensors ({name_some(missing_backbone)})"
                             ": they would load as random layers. The checkpoint is incomplete (an interrupted "
                             "download or save?): download or export it again.")
        if damaged:
            raise ValueError(f"{source} holds NaN or infinite values in {name_some(damaged)}: the weights are damaged "
                             "and every embedding would be NaN. Download or export the checkpoint again.")
        if missing_head:
            logger.warning("Created a new, untrained PMA head (%d tensors) on %s: train it before use.",
                           len(missing_head), source)
        return (model, loading_info) if wants_loading_info else model

    def __init__(self, config: C2LLMConfig):
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
                             "tokens (empty text?). Every input needs at least one token: drop empty strings or give "
                             "them a prompt.")
        backbone_inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": position_ids,
                           "inputs_embeds": inputs_embeds}
        packs_here = self._packs(attention_mask, position_ids, output_hidden_states, output_attentions)
        packed = None  # the sequences as one row, when the batch runs or arrived packed
        if packs_here:
            packed = PackedBatch(attention_mask.bool())
            layer_types = getattr(self.config, "layer_types", None) or ["full_attention"]
            backbone_inputs = {"input_ids": packed.pack(input_ids), "inputs_embeds": packed.pack(inputs_embeds),
                               **packed.backbone_inputs(layer_types)}
        elif attention_mask is None:
            packed = PackedBatch.of_row(kwargs.get("cu_seq_lens_q"), position_ids)
        outputs = self.model(**backbone_inputs, use_cache=False, output_hidden_states=output_hidden_states,
                             output_attentions=output_attentions, return_dict=True, **kwargs)
        token_states = outputs.last_hidden_state  # (batch, seq, hidden), or (1, total, hidden) for a packed row
        padded_states = packed.unpack(token_states) if packed is not None else token_states  # (n, width, hidden)
        mask = packed.real_tokens if packed is not None else attention_mask  # (n, width), None: no padding
        mask = torch.ones(padded_states.shape[:2], device=padded_states.device) if mask is None else mask
        output = C2LLMOutput(sentence_embedding=self.pool(padded_states, mask),
                             last_hidden_state=padded_states if packs_here else token_states,
                             hidden_states=outputs.hidden_states, attentions=outputs.attentions)
        return output if return_dict is not False else output.to_tuple()

    def _packs(self, attention_mask, position_ids, output_hidden_states, output_attentions) -> bool:
        """Whether a padded batch runs as one row (`config.pack_sequences`): with `packed_sdpa_attention`, padding
        to drop, and nothing asked that needs the padded layout (own positions, per-layer states or attentions)."""
        wants_layers = self.config.output_hidden_states if output_hidden_states is None else output_hidden_states
        wants_attentions = self.config.output_attentions if output_attentions is None else output_attentions
        return (self.config.pack_sequences and self.config._attn_implementation == PACKED_SDPA
                and attention_mask is not None and attention_mask.dim() == 2 and position_ids is None
                and not wants_layers and not wants_attentions and not bool(attention_mask.all()))

    @torch.inference_mode()
    def encode(self, sentences: str | list[str], tokenizer=None, batch_size: int = 32,
               max_length: int = DEFAULT_MAX_LENGTH, prompt: str | None = None, normalize: bool = True,
               show_progress_bar: bool = False) -> torch.Tensor:
        """(n,) strings -> (n, embedding_dim) float32 CPU tensor, as sentence-transformers encodes with this model:
        `prompt` (e.g. a query instruction of config_sentence_transformers.json) prepended, longest texts batched
        first, truncated to `max_length` tokens, unit length unless `normalize=False`."""
        for name, value in (("batch_size", batch_size), ("max_length", max_length)):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}.")
        if prompt is not None and not isinstance(prompt, str):
            raise TypeError(f"prompt must be a string or None, got {type(prompt).__name__}.")
        if not isinstance(sentences, (str, list, tuple)):
            raise TypeError(f"sentences must be a string or a list of strings, got {type(sentences).__name__}.")
        texts = [sentences] if isinstance(sentences, str) else list(sentences)
        self.check_texts([prompt or ""], label="prompt")
        self.check_texts(texts, label="sentences[{index}]")
        embeddings = torch.empty(len(texts), self.config.embedding_dim)
        texts = [(prompt or "") + text for text in texts]
        tokenizer = self.saved_tokenizer if tokenizer is None and texts else tokenizer
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # longest first: little padding
        starts = range(0, len(texts), batch_size)
        if show_progress_bar:
            from tqdm.auto import tqdm  # a dependency of transformers
            starts = tqdm(starts, desc="Encoding", unit="batch")
        for start in starts:
            batch = order[start : start + batch_size]
            inputs = tokenizer([texts[i] for i in batch], padding=True, truncation=True, max_length=max_length,
                               return_tensors="pt").to(self.device)
            pooled = self(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"])
            pooled = pooled.sentence_embedding.float()  # (batch, embedding_dim)
            embeddings[batch] = (F.normalize(pooled, dim=-1) if normalize else pooled).cpu()
        return embeddings

    @staticmethod
    def check_texts(texts: list, label: str | None = None) -> None:
        """Refuse a non-string or a text no tokenizer can read (a lone surrogate such as "\\ud800"), naming it by
        `label` (e.g. "sentences[{index}]"); without one (the sentence-transformers route's reordered, prompted
        batch), skip non-strings and quote the text around the bad character."""
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
        if not self.config._name_or_path:
            raise ValueError("This model was not loaded from a folder or Hub repo, so it has no saved tokenizer: "
                             "pass tokenizer=AutoTokenizer.from_pretrained(...) to encode().")
        # Our config keeps AutoTokenizer from re-reading config.json (it would ask again to trust the code).
        return AutoTokenizer.from_pretrained(self.config._name_or_path, config=self.config, padding_side="left")

