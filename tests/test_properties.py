"""Property-based tests (hypothesis): encode is invariant to batching and order, and the config parser either
builds a valid config or raises ValueError for any field values, never another exception or a silent coercion."""

import math

import pytest
import torch

hypothesis = pytest.importorskip("hypothesis", reason='needs hypothesis: pip install ".[dev]"')
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from configuration_c2llm import C2LLMConfig  # noqa: E402

TINY = dict(vocab_size=100, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
            num_key_value_heads=2)
NUMBERS = st.one_of(st.integers(-3, 200), st.floats(width=32), st.just(float("nan")), st.just(float("inf")),
                    st.just(1e30))
ANY_VALUE = st.one_of(st.none(), st.booleans(), NUMBERS, st.text(max_size=12), st.lists(st.integers(0, 4), max_size=3),
                      st.dictionaries(st.sampled_from(["rope_theta", "rope_type", "factor"]), NUMBERS, max_size=2))
# Every field a saved C2LLM config holds (the backbone's too), and the published configs' names for ours.
CONFIG_FIELDS = sorted({*C2LLMConfig(**TINY).to_dict(), "keep_max_layer", "compressed_dim", "pma_ln",
                        "embedding_method"} - {"model_type", "transformers_version"})
# Texts a user may embed: code-like characters, unicode, whitespace; never empty (that is its own, tested, error).
TEXTS = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(field=st.sampled_from(CONFIG_FIELDS), value=ANY_VALUE)
def test_config_fields_are_valid_or_a_value_error(field, value):
    """Any value in any field (the backbone's too): a ValueError, or a config whose every number is finite and in
    range, with C2LLM's own fields of the right type."""
    from configuration_c2llm import NUMBER_RANGES, numbers

    try:
        config = C2LLMConfig(**{**TINY, field: value})
    except ValueError:
        return
    for name, number in numbers(vars(config)):
        low, high = NUMBER_RANGES.get(name.rpartition(".")[2], (-math.inf, math.inf))
        assert math.isfinite(number) and low <= number < high, (name, number)
    if field in ("pma_layer_norm", "pack_sequences"):
        assert isinstance(getattr(config, field), bool) and getattr(config, field) is value  # no "false" -> True
    if field in ("pma_num_heads", "pma_dim", "pma_query_dim") and not (field != "pma_num_heads" and value is None):
        # None: hidden size (pma_dim) or pma_dim (pma_query_dim)
        assert isinstance(value, int) and not isinstance(value, bool) and value > 0
        assert config.pma_dim % config.pma_num_heads == 0
    if field == "matryoshka_dims" and value is not None:
        assert len(set(value)) == len(value) and all(type(dim) is int and 1 <= dim <= config.embedding_dim
                                                     for dim in value)


@pytest.fixture(scope="module")
def encoder(tiny_model_dir):
    """The tiny release folder's model, float32, with its own (left-padding) tokenizer."""
    from transformers import AutoTokenizer

    from modeling_c2llm import DTYPE_ARGUMENT, C2LLMModel

    model = C2LLMModel.from_pretrained(tiny_model_dir, **{DTYPE_ARGUMENT: torch.float32}).eval()
    return model, AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=st.lists(TEXTS, min_size=1, max_size=7), batch_size=st.integers(1, 8), seed=st.randoms())
def test_encode_is_invariant_to_batching_and_order(encoder, texts, batch_size, seed):
    model, tokenizer = encoder
    one_by_one = torch.cat([model.encode([text], tokenizer=tokenizer) for text in texts])
    batched = model.encode(texts, tokenizer=tokenizer, batch_size=batch_size)
    order = list(range(len(texts)))
    seed.shuffle(order)
    shuffled = model.encode([texts[i] for i in order], tokenizer=tokenizer, batch_size=batch_size)
    torch.testing.assert_close(batched, one_by_one, atol=2e-5, rtol=1e-4)
    torch.testing.assert_close(shuffled, batched[order], atol=2e-5, rtol=1e-4)


OPTION_VALUES = st.one_of(st.text(max_size=12), st.integers(-5, 5).map(str), st.just("0"), st.just("-1"))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(pairs=st.lists(st.text(max_size=20), max_size=3))
def test_prompt_task_overrides_parse_or_fail_clearly(pairs):
    """`--prompt-task FOLDER=Task`: a mapping of known tasks, or a ValueError saying what is expected."""
    from c2llm_data.tasks import MTEB_CODE_TASKS, parse_prompt_task_overrides

    try:
        overrides = parse_prompt_task_overrides(pairs)
    except ValueError as error:
        assert "FOLDER=MTEBTask" in str(error) or "Unknown MTEB-Code task" in str(error), error
        return
    assert set(overrides.values()) <= set(MTEB_CODE_TASKS)


@settings(max_examples=60, deadline=None)
@given(option=st.sampled_from(["--max-queries", "--max-corpus", "--batch-size", "--top-k-does-not-exist"]),
       value=OPTION_VALUES)
def test_mteb_runner_arguments_are_checked_before_any_work(option, value):
    """Any value for a numeric option: accepted (and then at least 1) or a usage error (exit 2) with a message."""
    from evaluation.mteb_code import build_parser, check_arguments

    parser = build_parser()
    try:
        args = parser.parse_args(["--model", "minilm", "--mock", option, value])
        check_arguments(parser, args)
    except SystemExit as stopped:
        assert stopped.code == 2
        return
    number = getattr(args, option.removeprefix("--").replace("-", "_"))
    assert isinstance(number, int) and number >= 1
