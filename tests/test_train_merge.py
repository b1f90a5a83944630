"""Step 7, the merge: LoRA folded into the start model with peft's public API, then a plain weighted average of the
checkpoints' weights, pinned against the same average computed by hand (tiny model, fp32)."""

import pytest
import torch

from tests.conftest import copy_sharing_tokenizer
from train.args import LoraArguments, MergeArguments, ModelArguments

TEXTS = ["def add(a, b): return a + b", "binary search", "public int Add(int a, int b) { return a + b; }"]
MODEL_ARGS = ModelArguments(max_seq_length=64, dtype="float32")


def trained_checkpoint(start, folder, seed):
    """A LoRA checkpoint as the trainer saves it (adapters on the backbone, the PMA head in full), after "training"."""
    from train.model import add_lora

    model = copy_sharing_tokenizer(start)
    add_lora(model, LoraArguments(r=4, alpha=8))
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.requires_grad:
                parameter.add_(0.05 * torch.randn(parameter.shape, generator=generator))
    model.save(str(folder))
    return model


def test_folding_lora_gives_the_adapter_models_embeddings(tiny_sentence_transformer, tiny_model_dir, tmp_path):
    from train.merge import load_checkpoint

    adapter_model = trained_checkpoint(tiny_sentence_transformer, tmp_path / "checkpoint-1", seed=0)
    assert (tmp_path / "checkpoint-1" / "adapter_config.json").is_file()
    folded = load_checkpoint(tmp_path / "checkpoint-1", tiny_model_dir, MODEL_ARGS)
    backbone = folded.transformers_model
    assert not getattr(backbone, "peft_config", None)
    assert not any("lora" in name or "modules_to_save" in name for name in folded.state_dict())
    assert folded.state_dict().keys() == tiny_sentence_transformer.state_dict().keys()
    with torch.no_grad():
        expected = adapter_model.encode(TEXTS, convert_to_tensor=True)
        torch.testing.assert_close(folded.encode(TEXTS, convert_to_tensor=True), expected, atol=1e-5, rtol=1e-5)
    # the head was trained in full: it comes back as trained, unwrapped
    head = {k: v for k, v in adapter_model.state_dict().items() if ".pma." in k and "modules_to_save" in k}
    assert head and all(
        torch.equal(tensor, folded.state_dict()[key.replace("modules_to_save.default.", "")])
        for key, tensor in head.items()
    )


@pytest.mark.slow  # folds two LoRA checkpoints twice (about 10 CPU-seconds): the folding and the average each have a
# fast test of their own (test_folding_lora_..., test_average_state_dicts_...)
def test_merge_is_the_weighted_average_of_the_folded_checkpoints(tiny_sentence_transformer, tiny_model_dir, tmp_path):
    from train.merge import load_checkpoint, merge_checkpoints

    checkpoints = [tmp_path / f"checkpoint-{step}" for step in (10, 20)]
    for seed, folder in enumerate(checkpoints):
        trained_checkpoint(tiny_sentence_transformer, folder, seed)
    weights = [1.0, 3.0]  # scaled to sum to 1 by the merge
    merge_args = MergeArguments(num_checkpoints=2, weights=weights)
    merged = merge_checkpoints(checkpoints, tiny_model_dir, merge_args, MODEL_ARGS)

    folded = [load_checkpoint(folder, tiny_model_dir, MODEL_ARGS).state_dict() for folder in checkpoints]
    reference = {
        key: sum(w / sum(weights) * state[key].double() for w, state in zip(weights, folded)).float()
        for key in folded[0]
    }
    state = merged.state_dict()
    assert state.keys() == reference.keys()
    for key, tensor in reference.items():
        assert state[key].dtype == folded[0][key].dtype
        torch.testing.assert_close(state[key], tensor, atol=1e-6, rtol=1e-6)
    assert not any(torch.equal(state["0.model.pma.query"], other["0.model.pma.query"]) for other in folded)

    reference_model = copy_sharing_tokenizer(tiny_sentence_transformer)
    reference_model.load_state_dict(reference)
    with torch.no_grad():
        torch.testing.assert_close(
            merged.encode(TEXTS, convert_to_tensor=True), reference_model.encode(TEXTS, convert_to_tensor=True),
            atol=1e-5, rtol=1e-5,
        )  # fmt: skip


def test_average_state_dicts_casts_back_and_refuses_mismatched_models():
    from train.merge import average_state_dicts

    first = {"w": torch.tensor([1.0, 2.0], dtype=torch.bfloat16), "steps": torch.tensor([3])}
    second = {"w": torch.tensor([3.0, 6.0], dtype=torch.bfloat16), "steps": torch.tensor([3])}
    averaged = average_state_dicts([first, second], weights=[1, 3])
    assert averaged["w"].dtype == torch.bfloat16 and averaged["w"].tolist() == [2.5, 5.0]
    assert averaged["steps"].tolist() == [3]
    assert average_state_dicts(iter([first, second]))["w"].tolist() == [2.0, 4.0]  # equal weights, one at a time
    with pytest.raises(ValueError, match=r"state dict 1 does not have the keys of the first: missing \['steps'\]"):
        average_state_dicts([first, {"w": second["w"]}])
    with pytest.raises(ValueError, match=r"state dict 1: w has shape \(3,\), the first has \(2,\)"):
        average_state_dicts([first, {"w": torch.zeros(3), "steps": torch.tensor([3])}])
    with pytest.raises(ValueError, match="steps is not a floating-point tensor and differs"):
        average_state_dicts([first, {"w": second["w"], "steps": torch.tensor([4])}])
    with pytest.raises(ValueError, match="2 merge weights for 3 state dicts|more state dicts than the 2"):
        average_state_dicts([first, second, first], weights=[1, 1])
    with pytest.raises(ValueError, match="non-negative with a positive sum"):
        average_state_dicts([first, second], weights=[1, -1])
