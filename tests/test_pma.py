"""The PMA head against a direct transcription of its equations, in both readings of the residual, and its masking."""

import math

import pytest
import torch

from configuration_c2llm import C2LLMConfig
from modeling_c2llm import C2LLMModel
from packing_c2llm import PackedBatch
from pooling_c2llm import PMAPooling

HIDDEN, EMBEDDING_DIM, HEADS = 48, 32, 4


def make_head(scale: str = "embedding_dim", layer_norm: bool = True, seed: int = 0,
              residual: str = "projected_query", query_dim: int | None = None) -> PMAPooling:
    config = C2LLMConfig(vocab_size=100, hidden_size=HIDDEN, intermediate_size=96, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, pma_dim=EMBEDDING_DIM, pma_num_heads=HEADS,
                         pma_attention_scale=scale, pma_layer_norm=layer_norm, pma_residual=residual,
                         pma_query_dim=query_dim)
    torch.manual_seed(seed)
    head = PMAPooling.from_config(config)
    with torch.no_grad():  # non-trivial LayerNorm parameters, so that a wrong norm is caught
        for parameter in head.parameters():
            parameter.normal_(0.0, 0.3)
    return head.eval()


def equations_1_to_6(head: PMAPooling, states: torch.Tensor, scale_width: int) -> torch.Tensor:
    """One sequence (l, d_LLM) of real tokens only -> (d,), head by head. (5) adds Q = qW_q ("projected_query",
    the published model and the paper) or the learnable query q itself ("query", CodeFuse-CGE)."""
    layer_norm = lambda x, norm: torch.nn.functional.layer_norm(x, (EMBEDDING_DIM,), norm.weight, norm.bias, norm.eps)
    q = head.query.reshape(1, -1)  # (1, query_dim)
    Q = q @ head.q_proj.weight.T + head.q_proj.bias  # (1)
    K = states @ head.k_proj.weight.T + head.k_proj.bias  # (2)
    V = states @ head.v_proj.weight.T + head.v_proj.bias  # (3)
    width = EMBEDDING_DIM // HEADS
    O = torch.cat(
        [torch.softmax(Q[:, h * width:(h + 1) * width] @ K[:, h * width:(h + 1) * width].T / math.sqrt(scale_width),
                       dim=-1)
         @ V[:, h * width:(h + 1) * width] for h in range(HEADS)],
        dim=-1,
    )  # (4)
    O_tilde = layer_norm(O + (q if head.residual == "query" else Q), head.attention_norm)  # (5)
    E = layer_norm(torch.relu(O_tilde @ head.o_proj.weight.T + head.o_proj.bias) + O_tilde, head.output_norm)  # (6)
    return E.squeeze(0)


@pytest.mark.parametrize("residual, query_dim, query_width", [
    ("projected_query", None, EMBEDDING_DIM),  # the published layout (the default)
    ("projected_query", HIDDEN, HIDDEN),  # a hidden-wide query, as the paper's (1) allows
    ("query", None, EMBEDDING_DIM),
])
@pytest.mark.parametrize("scale, scale_width", [("embedding_dim", EMBEDDING_DIM), ("head_dim", EMBEDDING_DIM // HEADS)])
def test_pma_matches_the_equations_and_ignores_padding(scale, scale_width, residual, query_dim, query_width):
    head = make_head(scale, residual=residual, query_dim=query_dim)
    assert head.query.shape == (1, 1, query_width)
    torch.manual_seed(1)
    lengths = [5, 2, 7]
    states = torch.randn(len(lengths), max(lengths), HIDDEN) * 3
    mask = torch.zeros(len(lengths), max(lengths), dtype=torch.long)
    for row, length in enumerate(lengths):
        mask[row, -length:] = 1  # left padding
    with torch.no_grad():
        pooled = head(states, mask)
        expected = torch.stack([equations_1_to_6(head, states[row, -length:], scale_width)
                                for row, length in enumerate(lengths)])
    torch.testing.assert_close(pooled, expected, atol=1e-5, rtol=1e-5)
    assert pooled.shape == (3, EMBEDDING_DIM)


def test_the_default_residual_is_the_projected_seed_and_a_raw_seed_needs_a_d_wide_query():
    assert make_head().residual == "projected_query"
    with pytest.raises(ValueError,
                       match="pma_query_dim must equal pma_dim=32, got 48; use pma_residual='projected_query'"):
        make_head(residual="query", query_dim=HIDDEN)
    with pytest.raises(ValueError, match="query_dim must equal embedding_dim=32, got 48"):
        PMAPooling(HIDDEN, EMBEDDING_DIM, HEADS, residual="query", query_dim=HIDDEN)
    with pytest.raises(ValueError, match="choose one of projected_query, query"):
        PMAPooling(HIDDEN, EMBEDDING_DIM, HEADS, residual="seed")


def test_padding_content_and_side_do_not_matter():
    head = make_head()
    torch.manual_seed(2)
    real = torch.randn(1, 4, HIDDEN)
    left = torch.cat([torch.randn(1, 3, HIDDEN) * 100, real], dim=1)
    right = torch.cat([real, torch.randn(1, 3, HIDDEN) * 100], dim=1)
    with torch.no_grad():
        alone = head(real, torch.ones(1, 4))
        padded_left = head(left, torch.tensor([[0, 0, 0, 1, 1, 1, 1]]))
        padded_right = head(right, torch.tensor([[1, 1, 1, 1, 0, 0, 0]]))
    torch.testing.assert_close(padded_left, alone, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(padded_right, alone, atol=1e-6, rtol=1e-5)


def test_a_float32_head_pools_bfloat16_states_in_float32():
    """The published code casts the hidden states to float32 when its query is not bfloat16."""
    head = make_head()
    torch.manual_seed(6)
    states = torch.randn(2, 5, HIDDEN).to(torch.bfloat16)
    mask = torch.ones(2, 5, dtype=torch.long)
    with torch.no_grad():
        pooled = head(states, mask)
        expected = head(states.float(), mask)
    assert pooled.dtype == torch.float32
    torch.testing.assert_close(pooled, expected, atol=0, rtol=0)


def test_layer_norms_can_be_switched_off():
    head = make_head(layer_norm=False)
    assert not any(isinstance(m, torch.nn.LayerNorm) for m in head.modules())


def test_flattened_batch_pools_like_the_padded_batch():
    """Flash-attn varlen batches arrive as one row with cu_seq_lens: same masking, same result."""
    head = make_head()
    torch.manual_seed(3)
    lengths = [3, 6, 1]
    sequences = [torch.randn(length, HIDDEN) for length in lengths]
    flat = torch.cat(sequences).unsqueeze(0)  # (1, 10, hidden)
    cu_seq_lens = torch.tensor([0, 3, 9, 10], dtype=torch.int32)
    position_ids = torch.cat([torch.arange(length) for length in lengths]).unsqueeze(0)
    packed = PackedBatch.of_row(position_ids=position_ids)
    assert torch.equal(packed.cu_seq_lens, cu_seq_lens)
    padded, mask = packed.unpack(flat), packed.real_tokens
    with torch.no_grad():
        from_flat = head(padded, mask)
        one_by_one = torch.cat([head(seq.unsqueeze(0), torch.ones(1, len(seq))) for seq in sequences])
    torch.testing.assert_close(from_flat, one_by_one, atol=1e-6, rtol=1e-5)


def test_model_forward_on_a_flattened_batch_matches_padded(tiny_model):
    """End to end on CPU: transformers builds a block-diagonal mask from restarting position ids
    (the sdpa analogue of flash-attn varlen); the model must pool each packed sequence separately."""
    import transformers

    if int(transformers.__version__.split(".")[0]) < 5:
        pytest.skip("packed sequences without flash-attn need transformers 5")
    torch.manual_seed(4)
    lengths = [4, 7, 2]
    ids = [torch.randint(0, 1000, (length,)) for length in lengths]
    with torch.no_grad():
        separately = torch.cat([
            tiny_model(input_ids=x[None], attention_mask=torch.ones(1, len(x), dtype=torch.long)).sentence_embedding
            for x in ids])
        flat = tiny_model(
            input_ids=torch.cat(ids)[None],
            position_ids=torch.cat([torch.arange(length) for length in lengths])[None],
        ).sentence_embedding
    torch.testing.assert_close(flat, separately, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("pooling", ["last_token", "mean"])
def test_ablation_poolings_use_real_tokens_only(pooling):
    config = C2LLMConfig(vocab_size=100, hidden_size=HIDDEN, intermediate_size=96, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2, pma_num_heads=4, pooling=pooling)
    torch.manual_seed(5)
    model = C2LLMModel(config).eval()
    assert model.pma is None
    ids = torch.randint(1, 100, (1, 5))
    padded_ids = torch.cat([torch.zeros(1, 3, dtype=torch.long), ids], dim=1)
    with torch.no_grad():
        alone = model(input_ids=ids, attention_mask=torch.ones(1, 5, dtype=torch.long)).sentence_embedding
        padded = model(input_ids=padded_ids, attention_mask=torch.tensor([[0, 0, 0, 1, 1, 1, 1, 1]])).sentence_embedding
    torch.testing.assert_close(padded, alone, atol=1e-5, rtol=1e-4)
