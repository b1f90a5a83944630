"""C2LLM: a Qwen2 backbone with a Pooling-by-Multihead-Attention (PMA) head (arXiv 2512.21332).

- `PMAPooling` (from `pooling_c2llm.py`, the project's one PMA implementation): what the published C2LLM
  model's PMA computes (the projected query added back), masked so that only real tokens are attended to.
- `C2LLMModel`: `Qwen2Model` (no LM head: it is never used for embeddings) followed by the pooling
  head; returns the token states and the pooled `sentence_embedding`. Attention runs through the
  transformers attention interface, so `attn_implementation` is the user's choice (sdpa by default,
  eager, or flash_attention_2 when flash-attn is installed).
- Padded batches (any padding side) and flattened, unpadded batches (flash-attn varlen, as
  sentence-transformers sends them) are both pooled per sequence.
- `C2LLMModel.encode(texts)`: batch, tokenize, embed and normalize in one call, for users of
  `AutoModel.from_pretrained(path, trust_remote_code=True)`.

This file is loaded from the Hub with `trust_remote_code=True`: it imports only torch and
transformers, reads weights only through transformers (safetensors), and makes no network calls.
"""

from dataclasses import dataclass

import torch
import torch.nn.functional as F
import transformers
from torch import nn
from transformers import Qwen2Model
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.modeling_outputs import ModelOutput
from transformers.models.qwen2.modeling_qwen2 import Qwen2PreTrainedModel
from transformers.utils import logging

logger = logging.get_logger(__name__)

try:  # Hub loading: transformers copies these sibling files next to this one inside a package.
    from .configuration_c2llm import C2LLMConfig
    from .pooling_c2llm import PMAPooling
except ImportError:  # Plain import from the repository (tests, scripts).
    from configuration_c2llm import C2LLMConfig
    from pooling_c2llm import PMAPooling

try:  # transformers >= 5: init functions that skip weights already loaded from a checkpoint.
    from transformers import initialization as weight_init
except ImportError:  # transformers 4.x initialises only missing weights, so torch's functions are safe.
    weight_init = nn.init

# transformers 5 names the load dtype `dtype`; 4.x calls it `torch_dtype`.
DTYPE_ARGUMENT = "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"
# Longer inputs are truncated by `encode`: the length the published model's own `encode` and mteb's C2LLM
# entry embed with (training used 1,024, paper section 4.1).
DEFAULT_MAX_LENGTH = 2048
# Keys of flattened (padding-free) batches that the flash-attn varlen kernels read.
FLASH_VARLEN_KEYS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k", "seq_idx")
# The attention C2LLMModel runs when sdpa is asked for (transformers >= 4.53): sdpa itself for padded batches and,
# for flattened ones (cu_seq_lens_q given), one causal sdpa call per sequence, the CPU counterpart of flash-attn's
# varlen kernel. It is chosen once when the model is built, so no forward pass changes the shared config and one
# model can serve several threads; registered under its own name, so no other model's attention changes.
PACKED_SDPA = "c2llm_sdpa"


def packed_sdpa_attention(module, query, key, value, attention_mask, dropout=0.0, scaling=None,
                          cu_seq_lens_q=None, **kwargs):
    """transformers' sdpa, or exact causal attention sequence by sequence for a flattened batch.

    Flattened: query (1, heads, total, head_dim), key/value (1, kv_heads, total, head_dim) hold the sequences
    back to back, cut by cu_seq_lens_q (n + 1,). A block-diagonal mask over the row would cost total^2 per
    layer; this costs sum(length^2). Returns ((1, total, heads, head_dim), None), as sdpa_attention_forward.
    """
    if cu_seq_lens_q is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    bounds = cu_seq_lens_q.tolist()
    per_sequence = [
        F.scaled_dot_product_attention(query[:, :, start:end], key[:, :, start:end], value[:, :, start:end],
                                       dropout_p=dropout, is_causal=True, scale=scaling, enable_gqa=True)
        for start, end in zip(bounds[:-1], bounds[1:])
    ]  # each (1, heads, length, head_dim)
    return torch.cat(per_sequence, dim=2).transpose(1, 2).contiguous(), None


try:  # transformers >= 4.53: attention and mask builders are looked up by name (masking_utils)
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    from transformers.modeling_utils import AttentionInterface

    AttentionInterface.register(PACKED_SDPA, packed_sdpa_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(PACKED_SDPA, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])  # padded: sdpa's mask
    PACKED_SDPA_AVAILABLE = True
except ImportError:  # older versions: padded batches, plain sdpa
    PACKED_SDPA_AVAILABLE = False


@dataclass
class C2LLMOutput(ModelOutput):
    """Output of `C2LLMModel`.

    Args:
        sentence_embedding (`torch.FloatTensor` of shape `(batch_size, embedding_dim)`): pooled embedding
            (not normalized; normalize it for cosine similarity).
        last_hidden_state (`torch.FloatTensor` of shape `(batch_size, sequence_length, hidden_size)`):
            token states of the backbone's last layer.
        hidden_states, attentions: as in `Qwen2Model`, when requested.
    """

    sentence_embedding: torch.FloatTensor | None = None
    last_hidden_state: torch.FloatTensor | None = None
    hidden_states: tuple[torch.FloatTensor, ...] | None = None
    attentions: tuple[torch.FloatTensor, ...] | None = None


def unflatten_packed_sequences(
    token_states: torch.Tensor, cu_seq_lens: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Re-pad a flattened batch so that every pooling method sees one row per sequence.

    token_states (1, total_tokens, hidden) holds sequences back to back; cu_seq_lens (n + 1,) are
    their cumulative lengths, as flash-attn varlen kernels take them.
    Returns (n, max_len, hidden) right-padded states and their (n, max_len) mask.
    """
    lengths = (cu_seq_lens[1:] - cu_seq_lens[:-1]).long()  # (n,)
    max_len = int(lengths.max())
    positions = torch.arange(max_len, device=token_states.device)  # (max_len,)
    mask = positions[None, :] < lengths[:, None]  # (n, max_len)
    token_index = (cu_seq_lens[:-1, None].long() + positions[None, :]).clamp(max=token_states.shape[1] - 1)
    padded = token_states[0][token_index] * mask[..., None]  # (n, max_len, hidden)
    return padded, mask.long()


def cu_seq_lens_from_position_ids(position_ids: torch.Tensor) -> torch.Tensor:
    """Sequence boundaries of a flattened batch, found where position ids restart at 0."""
    starts = torch.nonzero(position_ids[0] == 0).flatten()  # (n,)
    total = torch.tensor([position_ids.shape[1]], device=position_ids.device)
    return torch.cat([starts, total]).to(torch.int32)


@dataclass
class FlattenedBatch:
    """The real tokens of a padded batch back to back in one row, for `packed_sdpa_attention`."""

    input_ids: torch.Tensor | None  # (1, total), or None when flattening inputs_embeds
    inputs_embeds: torch.Tensor | None  # (1, total, hidden)
    position_ids: torch.Tensor  # (1, total): restart at 0 for every sequence
    cu_seq_lens: torch.Tensor  # (batch + 1,) int32: where each sequence starts and ends in the row
    max_length: int  # longest sequence
    real_tokens: torch.Tensor  # (batch, seq) bool: where the real tokens were in the padded batch

    def backbone_inputs(self, layer_types) -> dict:
        """Keyword arguments for `Qwen2Model`: the row, its positions, and the sequence bounds that reach every
        attention call. The mask mapping holds None for each layer type, so no (total x total) mask is built: the
        bounds are the mask."""
        return {"input_ids": self.input_ids, "inputs_embeds": self.inputs_embeds, "position_ids": self.position_ids,
                "attention_mask": {layer_type: None for layer_type in layer_types},
                "cu_seq_lens_q": self.cu_seq_lens, "cu_seq_lens_k": self.cu_seq_lens,
                "max_length_q": self.max_length, "max_length_k": self.max_length}

    def unflatten(self, flat_states: torch.Tensor) -> torch.Tensor:
        """(1, total, hidden) -> (batch, seq, hidden) in the padded layout, zeros on padding."""
        padded = flat_states.new_zeros(*self.real_tokens.shape, flat_states.shape[-1])
        padded[self.real_tokens] = flat_states[0]
        return padded


def flatten_padded_batch(
    attention_mask: torch.Tensor,
    input_ids: torch.Tensor | None = None,
    inputs_embeds: torch.Tensor | None = None,
) -> FlattenedBatch:
    """All real tokens of a padded batch in one row (1, total), whatever the padding side.

    No padding and no cross-sequence attention is computed: matmuls run on the real tokens only and
    attention on each sequence alone. Position ids restart at 0 per sequence.
    """
    real_tokens = attention_mask.bool()  # (batch, seq)
    lengths = real_tokens.sum(dim=1)  # (batch,)
    rank = real_tokens.long().cumsum(dim=1) - 1  # (batch, seq): index of each real token in its sequence
    return FlattenedBatch(
        input_ids=input_ids[real_tokens][None] if input_ids is not None else None,
        inputs_embeds=inputs_embeds[real_tokens][None] if inputs_embeds is not None else None,
        position_ids=rank[real_tokens][None],
        cu_seq_lens=F.pad(lengths.cumsum(0), (1, 0)).to(torch.int32),
        max_length=int(lengths.max()),
        real_tokens=real_tokens,
    )


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bfloat16 in hardware (x86 AVX512-BF16; AMX CPUs have it too).

    Without it, bfloat16 matmuls are emulated and slower than float32. Other architectures answer
    False (float32), the safe side.
    """
    probe = getattr(torch.cpu, "_is_avx512_bf16_supported", None)  # private helper, hence the guard
    try:
        return bool(probe()) if probe is not None else False
    except RuntimeError:
        return False


def name_some(names: list[str], shown: int = 5) -> str:
    """The first `shown` names, then how many more: for errors about many tensors."""
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


def preferred_dtype() -> torch.dtype:
    """The dtype C2LLM loads in when the caller names none: the fastest one that is safe here.

    bfloat16 on a GPU or CPU that computes it natively (embeddings agree with float32 to cosine
    > 0.999, see benchmarks/encode_speed.py), float32 elsewhere. float16 is never chosen: Qwen2's
    activations can overflow it.
    """
    if torch.cuda.is_available():
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    return torch.bfloat16 if cpu_has_native_bf16() else torch.float32


def last_token_pool(token_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """State of each sequence's last real token (works for left and right padding) -> (batch, hidden)."""
    positions = torch.arange(token_states.shape[1], device=token_states.device)  # (seq,)
    last_index = (attention_mask.long() * positions).argmax(dim=1)  # (batch,)
    return token_states[torch.arange(token_states.shape[0], device=token_states.device), last_index]


def mean_pool(token_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
    """Average of the real tokens' states -> (batch, hidden)."""
    mask = attention_mask.to(token_states.dtype).unsqueeze(-1)  # (batch, seq, 1)
    return (token_states * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1)


class C2LLMPreTrainedModel(Qwen2PreTrainedModel):
    """Qwen2's pretrained-model plumbing (attention backends, checkpointing) with the C2LLM config."""

    config_class = C2LLMConfig
    # A Qwen2ForCausalLM checkpoint carries an LM head that an embedding model never uses.
    _keys_to_ignore_on_load_unexpected = [r"^lm_head\.", r"^model\.lm_head\."]

    def _init_weights(self, module: nn.Module) -> None:
        super()._init_weights(module)
        if isinstance(module, PMAPooling):
            weight_init.normal_(module.query, mean=0.0, std=self.config.initializer_range)
        elif isinstance(module, nn.LayerNorm):  # transformers 4.x leaves LayerNorms to torch's defaults
            weight_init.ones_(module.weight)
            weight_init.zeros_(module.bias)


class C2LLMModel(C2LLMPreTrainedModel):
    """C2LLM embedding model: `Qwen2Model` (causal attention kept) + pooling head.

    Load it with `AutoModel.from_pretrained(path_or_repo_id, trust_remote_code=True)`; start training
    from a Qwen2/Qwen2.5(-Coder) checkpoint with `C2LLMModel.from_pretrained(qwen_path, config=...)`:
    the backbone weights load under `model.`, the LM head is skipped and the PMA head starts fresh.

    Example:
        >>> model = AutoModel.from_pretrained("path/to/c2llm", trust_remote_code=True)
        >>> embeddings = model.encode(["def add(a, b): return a + b"])  # (1, embedding_dim), normalized
    """

    # No LM head, so nothing to tie (a dict, as transformers 5 expects; empty is valid for 4.x too).
    _tied_weights_keys = {}

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, new_pooling_head: bool = False,
                        **kwargs) -> "C2LLMModel":
        """`PreTrainedModel.from_pretrained`, with two differences:

        - loads in `preferred_dtype()` unless `dtype` (or the older `torch_dtype`) is given: bfloat16 where the
          hardware computes it, else float32. Pass `dtype=torch.float32` for full precision (`torch_dtype=` on
          transformers 4.x);
        - weights load from safetensors only (`use_safetensors=True` unless you say otherwise);
        - a checkpoint without PMA weights is an error (a random head would give different vectors on every
          load), unless `new_pooling_head=True`: starting training from a backbone checkpoint (Qwen2) is the one
          place a fresh head is right.
        """
        if "dtype" not in kwargs and "torch_dtype" not in kwargs:
            kwargs[DTYPE_ARGUMENT] = preferred_dtype()
        kwargs.setdefault("use_safetensors", True)  # never unpickle a pytorch_model.bin: it can run code on load
        wants_loading_info = kwargs.pop("output_loading_info", False)
        model, loading_info = super().from_pretrained(pretrained_model_name_or_path, *model_args,
                                                      output_loading_info=True, **kwargs)
        missing_head = sorted(key for key in loading_info["missing_keys"] if key.startswith("pma."))
        if missing_head and not new_pooling_head:
            raise ValueError(
                f"{pretrained_model_name_or_path} has no weights for the PMA pooling head ({', '.join(missing_head)}), "
                "so its embeddings would be random. Load a C2LLM checkpoint, or pass new_pooling_head=True to start "
                "training from this backbone with a freshly initialised head."
            )
        missing_backbone = sorted(key for key in loading_info["missing_keys"] if not key.startswith("pma."))
        if missing_backbone:
            raise ValueError(
                f"{pretrained_model_name_or_path} lacks {len(missing_backbone)} backbone tensors "
                f"({name_some(missing_backbone)}): they would load as random layers. The checkpoint is incomplete "
                "(an interrupted download or save?): download or export it again."
            )
        if missing_head:
            logger.warning("Created a new, untrained PMA head (%d tensors) on %s: train it before use.",
                           len(missing_head), pretrained_model_name_or_path)
        damaged = [name for name, tensor in model.state_dict().items()
                   if tensor.is_floating_point() and tensor.device.type != "meta"  # offloaded: not loaded here
                   and not bool(torch.isfinite(tensor).all())]
        if damaged:
            raise ValueError(
                f"{pretrained_model_name_or_path} holds NaN or infinite values in {name_some(damaged)}: the weights "
                "are damaged and every embedding would be NaN. Download or export the checkpoint again."
            )
        return (model, loading_info) if wants_loading_info else model

    def __init__(self, config: C2LLMConfig):
        super().__init__(config)
        self.model = Qwen2Model(config)
        self.pma = PMAPooling.from_config(config) if config.pooling == "pma" else None
        if PACKED_SDPA_AVAILABLE and config._attn_implementation == "sdpa":
            config._attn_implementation = PACKED_SDPA  # sdpa, plus per-sequence attention for flattened batches
        self.post_init()

    def get_input_embeddings(self) -> nn.Embedding:
        return self.model.embed_tokens

    def set_input_embeddings(self, value: nn.Embedding) -> None:
        self.model.embed_tokens = value

    def pool(self, token_states: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(batch, seq, hidden) token states and (batch, seq) mask -> (batch, embedding_dim)."""
        if self.config.pooling == "pma":
            return self.pma(token_states, attention_mask)
        if self.config.pooling == "last_token":
            return last_token_pool(token_states, attention_mask)
        return mean_pool(token_states, attention_mask)

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        inputs_embeds: torch.FloatTensor | None = None,
        output_hidden_states: bool | None = None,
        output_attentions: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> C2LLMOutput | tuple:
        """Embed a batch. Inputs are those of `Qwen2Model`; flattened batches (batch size 1 with
        `cu_seq_lens_q` or restarting `position_ids`, and no attention mask) are pooled per sequence."""
        if attention_mask is not None:
            token_counts = attention_mask.sum(dim=-1)
            if bool((token_counts == 0).any()):
                empty_rows = torch.nonzero(token_counts == 0).flatten().tolist()
                raise ValueError(
                    f"Batch rows {empty_rows} have no tokens (empty text?). Every input needs at least one "
                    "token: drop empty strings or give them a prompt."
                )
        flattened = None
        if self._flattens(attention_mask, position_ids, output_hidden_states, output_attentions):
            flattened = flatten_padded_batch(attention_mask, input_ids=input_ids, inputs_embeds=inputs_embeds)
            backbone_inputs = flattened.backbone_inputs(getattr(self.config, "layer_types", None) or ["full_attention"])
        else:
            backbone_inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "position_ids": position_ids,
                               "inputs_embeds": inputs_embeds}
        outputs = self.model(**backbone_inputs, use_cache=False, output_hidden_states=output_hidden_states,
                             output_attentions=output_attentions, return_dict=True, **kwargs)
        token_states = outputs.last_hidden_state  # (batch, seq, hidden), or (1, total, hidden) when flattened
        if flattened is not None:
            token_states = flattened.unflatten(token_states)  # (batch, seq, hidden), zeros on padding
        if attention_mask is not None:
            pooled = self.pool(token_states, attention_mask)
        else:
            cu_seq_lens = kwargs.get("cu_seq_lens_q")
            if cu_seq_lens is None and position_ids is not None and token_states.shape[0] == 1:
                cu_seq_lens = cu_seq_lens_from_position_ids(position_ids)
            if cu_seq_lens is not None:  # a caller's flattened batch: one row per packed sequence
                padded_states, padded_mask = unflatten_packed_sequences(token_states, cu_seq_lens)
                pooled = self.pool(padded_states, padded_mask)
            else:  # no padding at all
                full_mask = torch.ones(token_states.shape[:2], dtype=torch.long, device=token_states.device)
                pooled = self.pool(token_states, full_mask)
        output = C2LLMOutput(
            sentence_embedding=pooled,
            last_hidden_state=token_states,
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )
        return output if return_dict is not False else output.to_tuple()

    def _flattens(self, attention_mask, position_ids, output_hidden_states, output_attentions) -> bool:
        """Whether to run a padded batch as one row of its real tokens (`config.pack_sequences`): only with
        `packed_sdpa_attention`, when there is padding to drop, and when the caller asked for nothing that
        needs the padded layout (its own positions, per-layer states or attention weights)."""
        if output_hidden_states is None:
            output_hidden_states = self.config.output_hidden_states
        if output_attentions is None:
            output_attentions = self.config.output_attentions
        return (
            self.config.pack_sequences
            and self.config._attn_implementation == PACKED_SDPA
            and attention_mask is not None
            and attention_mask.dim() == 2
            and position_ids is None
            and not output_hidden_states
            and not output_attentions
            and not bool(attention_mask.all())
        )

    @torch.inference_mode()
    def encode(
        self,
        sentences: str | list[str],
        tokenizer=None,
        batch_size: int = 32,
        max_length: int = DEFAULT_MAX_LENGTH,
        prompt: str | None = None,
        normalize: bool = True,
        show_progress_bar: bool = False,
    ) -> torch.Tensor:
        """Embed texts: (n,) strings -> (n, embedding_dim) float32 tensor on the CPU.

        Args:
            sentences: a string or a list of strings. An empty list gives a (0, embedding_dim) tensor.
            tokenizer: defaults to the tokenizer saved with the model (left padding).
            batch_size: texts per forward pass; texts are sorted by length first to limit padding.
            max_length: longer inputs are truncated to this many tokens (prompt included).
            prompt: text put before every input, e.g. a query instruction from
                `config_sentence_transformers.json` (sentence-transformers applies those by name).
            normalize: return unit-length vectors, so a dot product is the cosine similarity.
            show_progress_bar: show a tqdm bar over batches.
        """
        for name, value in (("batch_size", batch_size), ("max_length", max_length)):
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"{name} must be a positive integer, got {value!r}.")
        if prompt is not None and not isinstance(prompt, str):
            raise TypeError(f"prompt must be a string or None, got {type(prompt).__name__}.")
        if prompt:
            self.check_unicode([prompt], name="prompt")
        if sentences is None or not isinstance(sentences, (str, list, tuple)):
            raise TypeError(f"sentences must be a string or a list of strings, got {type(sentences).__name__}.")
        texts = [sentences] if isinstance(sentences, str) else list(sentences)
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"sentences[{index}] is {type(text).__name__}, not str: pass a list of strings.")
        self.check_unicode(texts)
        if not texts:
            return torch.empty(0, self.config.embedding_dim)
        tokenizer = tokenizer if tokenizer is not None else self._saved_tokenizer()
        if prompt:
            texts = [prompt + text for text in texts]
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        batches = range(0, len(texts), batch_size)
        if show_progress_bar:
            from tqdm.auto import tqdm  # a dependency of transformers

            batches = tqdm(batches, desc="Encoding", unit="batch")
        embeddings = torch.empty(len(texts), self.config.embedding_dim)
        for start in batches:
            batch_ids = order[start : start + batch_size]
            inputs = tokenizer(
                [texts[i] for i in batch_ids],
                padding=True,
                truncation=True,
                max_length=max_length,
                return_tensors="pt",
            ).to(self.device)
            pooled = self(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).sentence_embedding
            pooled = F.normalize(pooled.float(), dim=-1) if normalize else pooled.float()
            embeddings[batch_ids] = pooled.cpu()
        return embeddings

    @staticmethod
    def check_unicode(texts: list, indexed: bool = True, name: str = "sentences") -> None:
        """Refuse a text that no tokenizer can read (e.g. a lone surrogate such as "\\ud800"), naming it.

        Shared by `encode` and the sentence-transformers module. `indexed=False` quotes the text around the bad
        character instead of giving an index, for callers that see a reordered, possibly prompted batch
        (sentence-transformers sorts by length; 5.x prepends the prompt before tokenizing).
        """
        for index, text in enumerate(texts):
            if not isinstance(text, str):
                continue
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as error:
                around = text[max(0, error.start - 20) : error.start + 20]
                item = f"the text around {around!r}" if not indexed else name if name != "sentences" else (
                    f"sentences[{index}]")
                raise ValueError(f"{item} is not valid Unicode ({error.reason} at position {error.start}): "
                                 "decode the source text with errors='replace'.") from None

    def _saved_tokenizer(self):
        """The tokenizer stored beside the weights, loaded once, left padding enforced."""
        if getattr(self, "_tokenizer", None) is None:
            from transformers import AutoTokenizer

            source = self.config._name_or_path
            if not source:
                raise ValueError(
                    "This model was not loaded from a folder or Hub repo, so it has no saved tokenizer: "
                    "pass tokenizer=AutoTokenizer.from_pretrained(...) to encode()."
                )
            # Passing our config keeps AutoTokenizer from re-reading config.json, which would ask
            # again whether to trust this repository's code.
            self._tokenizer = AutoTokenizer.from_pretrained(source, config=self.config, padding_side="left")
        return self._tokenizer


__all__ = ["C2LLMModel", "C2LLMPreTrainedModel", "PMAPooling", "C2LLMOutput"]
