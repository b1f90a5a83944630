"""Cheap guards of the structural speed and memory wins that benchmarks/encode_speed.py measures.

Against the published implementation's approach (causal LM with its LM head, all hidden states, eager attention),
the encoder must keep: no vocabulary-sized output, no per-layer states requested or returned, sdpa attention by
default, no autograd graph while encoding, length-sorted batches, and per-sequence pooling of flattened
(flash-attn varlen) batches. test_encode.py already checks that no parameter is named lm_head and that the output
carries no hidden_states; test_pma.py checks PMA masking of padded and flattened batches.
"""

import pytest
import torch
from torch import nn


def tensors_in(value) -> list[torch.Tensor]:
    """Every tensor inside a module output (tensor, tuple, dict or ModelOutput)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, (tuple, list)):
        return [t for item in value for t in tensors_in(item)]
    return []


class BackboneCalls:
    """Records, for every call of the backbone (`Qwen2Model`), its keyword arguments, grad mode and output."""

    def __init__(self, model: nn.Module):
        self.calls: list[dict] = []
        self._handles = [
            model.model.register_forward_pre_hook(self._before, with_kwargs=True),
            model.model.register_forward_hook(self._after, with_kwargs=True),
        ]

    def _before(self, _module, _args, kwargs):
        self.calls.append({"kwargs": dict(kwargs), "grad_enabled": torch.is_grad_enabled()})

    def _after(self, _module, _args, _kwargs, output):
        self.calls[-1]["output"] = output

    def remove(self) -> None:
        for handle in self._handles:
            handle.remove()


def test_no_module_produces_a_vocabulary_sized_or_all_layer_tensor(tiny_model):
    """Peak working memory is set by the largest activation: it must be (batch, seq, intermediate) at most, never
    the (batch, seq, vocab) logits of an LM head (1.2 GB at 8 x 256 for the 0.5B model) or a stack of layers."""
    config = tiny_model.config
    assert not any(isinstance(m, nn.Linear) and m.out_features == config.vocab_size for m in tiny_model.modules())
    batch, seq = 3, 11
    largest = {"numel": 0}

    def record(module, _args, output):
        largest["numel"] = max([largest["numel"], *(t.numel() for t in tensors_in(output))])

    handles = [module.register_forward_hook(record) for module in tiny_model.modules()]
    try:
        with torch.no_grad():
            tiny_model(input_ids=torch.randint(0, 1000, (batch, seq)),
                       attention_mask=torch.ones(batch, seq, dtype=torch.long))
    finally:
        for handle in handles:
            handle.remove()
    assert largest["numel"] <= batch * seq * max(config.intermediate_size, config.hidden_size)


@pytest.mark.parametrize("route", ["automodel", "sentence_transformers"])
def test_encoding_requests_no_hidden_states_no_cache_and_no_gradients(route, tiny_model, tiny_sentence_model):
    model = tiny_model if route == "automodel" else tiny_sentence_model[0].auto_model
    calls = BackboneCalls(model)
    try:
        if route == "automodel":
            tiny_model.encode(["def f(x):\n    return x", "sort a list"])
        else:
            tiny_sentence_model.encode(["def f(x):\n    return x", "sort a list"])
    finally:
        calls.remove()
    assert calls.calls
    for call in calls.calls:
        assert not call["kwargs"].get("output_hidden_states"), "all-layer hidden states requested"
        assert not call["kwargs"].get("output_attentions"), "attention maps requested"
        assert call["kwargs"].get("use_cache") is False, "a KV cache is built for a single forward pass"
        assert call["output"].hidden_states is None and call["output"].past_key_values is None
        assert not call["grad_enabled"], "encode builds an autograd graph"


def test_sdpa_attention_is_the_default(tiny_model, tiny_sentence_model):
    """Eager attention materialises (batch, heads, seq, seq) scores per layer; sdpa does not. Where transformers
    allows it, sdpa runs as packed_sdpa_attention (sdpa, plus per-sequence calls for flattened batches)."""
    from modeling_c2llm import PACKED_SDPA, PACKED_SDPA_AVAILABLE

    expected = PACKED_SDPA if PACKED_SDPA_AVAILABLE else "sdpa"
    assert tiny_model.config._attn_implementation == expected
    assert tiny_sentence_model[0].auto_model.config._attn_implementation == expected


def test_encode_batches_texts_sorted_by_length(tiny_model):
    """Length-sorted batching: the longest texts share a batch, so short texts are not padded to long ones."""
    texts = ["x" * n for n in (3, 40, 7, 90, 1, 55, 20, 65)]
    calls = BackboneCalls(tiny_model)
    try:
        tiny_model.encode(texts, batch_size=3)
    finally:
        calls.remove()
    padded_lengths = [call["kwargs"]["input_ids"].shape[1] for call in calls.calls]
    assert len(padded_lengths) == 3 and padded_lengths == sorted(padded_lengths, reverse=True)


def test_flattened_batch_with_flash_varlen_keys_pools_each_sequence(tiny_model):
    """The kwargs sentence-transformers sends with flash-attn (cu_seq_lens_q/k, max_length_q/k, position_ids, no
    mask): the model must pool by cu_seq_lens_q, one row per sequence. On CPU, sdpa ignores the varlen keys and
    masks across sequences from the restarting position ids."""
    import transformers

    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("packed sequences without flash-attn need transformers 5")
    torch.manual_seed(0)
    lengths = [5, 2, 8]
    ids = [torch.randint(0, 1000, (n,)) for n in lengths]
    cu_seq_lens = torch.tensor([0, 5, 7, 15], dtype=torch.int32)
    with torch.no_grad():
        one_by_one = torch.cat([
            tiny_model(input_ids=x[None], attention_mask=torch.ones(1, len(x), dtype=torch.long)).sentence_embedding
            for x in ids
        ])
        flat = tiny_model(
            input_ids=torch.cat(ids)[None],
            position_ids=torch.cat([torch.arange(n) for n in lengths])[None],
            cu_seq_lens_q=cu_seq_lens, cu_seq_lens_k=cu_seq_lens, max_length_q=max(lengths), max_length_k=max(lengths),
        ).sentence_embedding
    assert flat.shape == (len(lengths), tiny_model.config.embedding_dim)
    torch.testing.assert_close(flat, one_by_one, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("attn_implementation", ["sdpa", "eager"])
@pytest.mark.parametrize("pooling", ["pma", "mean", "last_token"])
@pytest.mark.parametrize("inputs", ["input_ids", "inputs_embeds"])
def test_packed_batches_give_the_padded_results(attn_implementation, pooling, inputs):
    """config.pack_sequences must give what the padded batch gives, for every pooling: with sdpa (transformers
    >= 4.53) all real tokens run as one flattened row with per-sequence attention (packed_sdpa_attention), with
    no mask built; eager runs the padded batch."""
    from configuration_c2llm import C2LLMConfig
    from modeling_c2llm import PACKED_SDPA, PACKED_SDPA_AVAILABLE, C2LLMModel

    torch.manual_seed(0)
    config = C2LLMConfig(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, pma_num_heads=4, pooling=pooling,
                         attn_implementation=attn_implementation)
    model = C2LLMModel(config).eval()
    flattens = attn_implementation == "sdpa" and PACKED_SDPA_AVAILABLE
    expected_attention = PACKED_SDPA if flattens else attn_implementation
    lengths = [30, 25, 7, 3, 1]
    input_ids = torch.randint(1, 100, (len(lengths), max(lengths)))
    attention_mask = torch.zeros_like(input_ids)
    for row, length in enumerate(lengths):  # left padding
        attention_mask[row, max(lengths) - length:] = 1
    batch = ({"input_ids": input_ids} if inputs == "input_ids"
             else {"inputs_embeds": model.model.embed_tokens(input_ids)})
    calls = BackboneCalls(model)
    with torch.no_grad():
        packed_out = model(**batch, attention_mask=attention_mask)
        assert model.config._attn_implementation == expected_attention  # chosen once, never switched per call
        model.config.pack_sequences = False
        padded_out = model(**batch, attention_mask=attention_mask)
    calls.remove()
    packed_call, padded_call = calls.calls
    assert padded_call["kwargs"][inputs].shape[:2] == (len(lengths), max(lengths))
    if flattens:
        assert packed_call["kwargs"][inputs].shape[:2] == (1, sum(lengths))  # 66 positions instead of 150
        assert all(mask is None for mask in packed_call["kwargs"]["attention_mask"].values())  # no mask built
        assert packed_call["kwargs"]["cu_seq_lens_q"].tolist() == [0, 30, 55, 62, 65, 66]
    else:
        assert packed_call["kwargs"][inputs].shape[:2] == (len(lengths), max(lengths))
    torch.testing.assert_close(packed_out.sentence_embedding, padded_out.sentence_embedding, atol=1e-5, rtol=1e-4)
    real = attention_mask.bool()
    torch.testing.assert_close(packed_out.last_hidden_state[real], padded_out.last_hidden_state[real],
                               atol=1e-5, rtol=1e-4)
    if flattens:
        assert not packed_out.last_hidden_state[~real].any()  # padding positions hold zeros


def test_threads_sharing_one_model_get_the_sequential_vectors():
    """A serving process shares one model between threads: no forward pass may change shared state."""
    from concurrent.futures import ThreadPoolExecutor

    from configuration_c2llm import C2LLMConfig
    from modeling_c2llm import C2LLMModel

    torch.manual_seed(0)
    config = C2LLMConfig(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, pma_num_heads=4)
    model = C2LLMModel(config).eval()
    generator = torch.Generator().manual_seed(1)
    batches = []
    for _ in range(24):  # padded batches (flattened inside) and unpadded ones, interleaved
        lengths = torch.randint(1, 40, (4,), generator=generator)
        if len(batches) % 3 == 0:
            lengths[:] = 40
        mask = (torch.arange(40)[None, :] >= 40 - lengths[:, None]).long()
        batches.append((torch.randint(1, 100, (4, 40), generator=generator), mask))

    def embed(batch):
        with torch.no_grad():
            return model(input_ids=batch[0], attention_mask=batch[1]).sentence_embedding

    sequential = [embed(batch) for batch in batches]
    with ThreadPoolExecutor(max_workers=3) as pool:
        concurrent = list(pool.map(embed, batches * 4))
    for index, vectors in enumerate(concurrent):
        torch.testing.assert_close(vectors, sequential[index % len(batches)], atol=1e-5, rtol=1e-4)


def test_benchmark_counts_attention_per_sequence_in_flattened_rows():
    """benchmarks/encode_speed.py's FLOP and padding counts: a flattened (varlen) row is one attention span per
    sequence and no padding; a padded batch is one span of its full length per row."""
    from benchmarks.encode_speed import PaddingCounter
    from configuration_c2llm import C2LLMConfig
    from modeling_c2llm import PACKED_SDPA_AVAILABLE, C2LLMModel

    config = C2LLMConfig(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, pma_num_heads=4, attn_implementation="sdpa")
    model = C2LLMModel(config).eval()
    lengths = [12, 5, 2]
    attention_mask = (torch.arange(12)[None, :] >= 12 - torch.tensor(lengths)[:, None]).long()  # left padding
    input_ids = torch.randint(1, 100, attention_mask.shape)
    counter = PaddingCounter(model)
    with torch.no_grad():
        model(input_ids=input_ids, attention_mask=attention_mask)
        packed_spans, packed_padding = counter.computed_sequence_lengths(), counter.padding_fraction()
        counter.reset()
        model.config.pack_sequences = False
        model(input_ids=input_ids, attention_mask=attention_mask)
    if PACKED_SDPA_AVAILABLE:
        assert packed_spans == lengths
        assert packed_padding == 0.0
    else:  # transformers < 4.53: the padded batch
        assert packed_spans == [12, 12, 12]
    assert counter.computed_sequence_lengths() == [12, 12, 12]
    assert counter.padding_fraction() == pytest.approx(1 - 19 / 36)


def test_packed_training_with_gradient_checkpointing_gives_the_padded_gradients():
    """Gradient checkpointing recomputes each layer in backward, with the layer's saved inputs (the sequence bounds
    included): a packed training step must give the padded batch's loss and gradients."""
    from configuration_c2llm import C2LLMConfig
    from modeling_c2llm import PACKED_SDPA_AVAILABLE, C2LLMModel

    if not PACKED_SDPA_AVAILABLE:
        pytest.skip("flattened batches need transformers >= 4.53")
    torch.manual_seed(0)
    config = C2LLMConfig(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, pma_num_heads=4, attn_implementation="sdpa")
    model = C2LLMModel(config).train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    lengths = [20, 9, 4, 1]
    input_ids = torch.randint(1, 100, (len(lengths), max(lengths)))
    attention_mask = (torch.arange(max(lengths))[None, :] >= max(lengths) - torch.tensor(lengths)[:, None]).long()

    def loss_and_gradients(pack: bool):
        model.config.pack_sequences = pack
        model.zero_grad()
        loss = model(input_ids=input_ids, attention_mask=attention_mask).sentence_embedding.square().sum()
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    calls = BackboneCalls(model)
    packed_loss, packed_grads = loss_and_gradients(pack=True)
    calls.remove()
    padded_loss, padded_grads = loss_and_gradients(pack=False)
    assert calls.calls[0]["kwargs"]["input_ids"].shape == (1, sum(lengths))  # it did flatten
    torch.testing.assert_close(packed_loss, padded_loss, atol=1e-5, rtol=1e-4)
    assert packed_grads.keys() == padded_grads.keys() and len(packed_grads) > 10
    for name, grad in padded_grads.items():
        torch.testing.assert_close(packed_grads[name], grad, atol=1e-4, rtol=1e-3, msg=name)
