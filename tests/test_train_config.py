"""Recipe files: the shipped configs load, every option has help; unknown keys, wrongly typed values, broken files
fail clearly before any work (property-based with hypothesis for the parser)."""

import json
import re
import types
import typing
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from train import args as recipe_args
from train import recipe as recipe_reader
from train.args import ConfigError
from train.recipe import load_recipe

CONFIG_DIR = Path(__file__).resolve().parents[1] / "train" / "configs"


@pytest.mark.parametrize("name", ["c2llm-0.5b.yaml", "c2llm-7b.yaml", "cpu-smoke.yaml"])
def test_shipped_recipes_load(name):
    recipe = load_recipe(CONFIG_DIR / name)
    assert recipe.data.datasets


def test_paper_recipes_follow_section_4_1():
    for name, base in [
        ("c2llm-0.5b.yaml", "Qwen2.5-Coder-0.5B-Instruct"),
        ("c2llm-7b.yaml", "Qwen2.5-Coder-7B-Instruct"),
    ]:
        recipe = load_recipe(CONFIG_DIR / name)
        assert recipe.model.base_model == f"Qwen/{base}"
        assert recipe.model.config_overrides["pma_num_heads"] == 32
        assert (recipe.lora.r, recipe.lora.alpha) == (64, 32)
        assert (recipe.training.num_train_epochs, recipe.training.learning_rate) == (3, 1e-4)
        assert recipe.model.max_seq_length == 1024 and recipe.loss.scale == 20
        assert recipe.mining.num_negatives == 7 and recipe.merge.num_checkpoints == 4
        names = {spec.name for spec in recipe.data.datasets}
        assert names == {
            "codesearchnet", "codesearchnet_ccr", "coir_codesearchnet", "apps", "codefeedback_st", "codefeedback_mt",
            "codeeditsearch", "cosqa", "stackoverflowqa", "synthetic_text2sql", "codetransocean_contest",
            "codetransocean_dl",
        }  # fmt: skip


def test_every_option_has_help_text():
    sections = [cls for cls, _ in recipe_args.SECTIONS.values() if cls is not recipe_args.TrainingSection]
    for cls in [recipe_args.DatasetSpec, recipe_args.RecipeTrainingArguments, *sections]:
        for name, info in cls.__pydantic_fields__.items():
            assert info.description, f"{cls.__name__}.{name} has no help text"
    listing = recipe_reader.describe_options()
    assert "lora.r (default: 64)" in listing and "data.datasets[].loss_weight" in listing
    # the training section is the library's own arguments class, listed with its defaults and help
    assert "training.head_learning_rate (default: None)" in listing
    assert "training.learning_rate (default: 5e-05)\n      The initial learning rate" in listing
    assert "training.batch_sampler" in listing and "Recipe: 'no_duplicates'." in listing
    assert "training.output_dir" not in listing  # set by the recipe: --output-dir


def test_the_training_section_goes_to_the_library_as_written(tmp_path):
    """Library fields reach SentenceTransformerTrainingArguments unchanged; the recipe fills in only what the file
    leaves out, and the recipe's own values (output folder, head learning rate, checkpoint rotation) always win."""
    from sentence_transformers import SentenceTransformerTrainingArguments

    from train.train import training_arguments

    recipe = load_recipe(
        CONFIG_DIR / "cpu-smoke.yaml",
        ["training.adam_beta2=0.98", "training.lr_scheduler_type=cosine", "training.batch_sampler=batch_sampler"],
    )
    args = training_arguments(recipe, tmp_path / "run", has_evaluator=True)
    assert isinstance(args, SentenceTransformerTrainingArguments)
    assert (args.adam_beta2, args.lr_scheduler_type, args.batch_sampler) == (0.98, "cosine", "batch_sampler")
    assert (args.learning_rate, args.warmup_steps, args.max_steps, args.report_to) == (1e-4, 0.1, 40, ["tensorboard"])
    assert args.output_dir == str(tmp_path / "run") and args.save_total_limit is None
    assert recipe.training.save_total_limit == 2  # applied by the checkpoint-completion callback instead
    assert args.learning_rate_mapping == {r"(^|\.)pma\.": 1e-3}
    assert (args.eval_strategy, args.eval_steps, args.per_device_eval_batch_size) == ("steps", 20, 16)
    defaults = training_arguments(load_recipe(CONFIG_DIR / "cpu-smoke.yaml"), tmp_path / "run", has_evaluator=False)
    assert (defaults.batch_sampler, defaults.eval_strategy, defaults.adam_beta2) == ("no_duplicates", "no", 0.999)
    # what only the library checks still fails as a ConfigError, before the run folder is written to
    both = load_recipe(
        CONFIG_DIR / "cpu-smoke.yaml", ["training.fp16=true", "training.bf16=true", "training.use_cpu=true"]
    )
    with pytest.raises(ConfigError, match="training: At most one of fp16 and bf16"):
        training_arguments(both, tmp_path / "run", has_evaluator=False)
    unknown_scheduler = load_recipe(CONFIG_DIR / "cpu-smoke.yaml", ["training.lr_scheduler_type=cosinus"])
    with pytest.raises(ConfigError, match="training: cosinus is not a valid SchedulerType, please select one of"):
        training_arguments(unknown_scheduler, tmp_path / "run", has_evaluator=False)
    assert not (tmp_path / "run").exists()


def write(tmp_path, text):
    path = tmp_path / "recipe.yaml"
    path.write_text(text)
    return path


def test_unknown_keys_name_the_closest_valid_one(tmp_path):
    with pytest.raises(
        ConfigError, match=r"Unknown config key lora\.rank.*Did you mean lora\.'r'|Unknown config key lora\.'rank'"
    ):
        load_recipe(write(tmp_path, "lora:\n  rank: 8\n"))
    with pytest.raises(
        ConfigError, match="Unknown config key training.'learning_rte'. Did you mean training.'learning_rate'"
    ):
        load_recipe(write(tmp_path, "training:\n  learning_rte: 0.1\n"))
    with pytest.raises(ConfigError, match="Unknown config section 'trainig'. Did you mean 'training'"):
        load_recipe(write(tmp_path, "trainig: {}\n"))
    with pytest.raises(ConfigError, match=r"data\.datasets\[0\]\.'nmae'"):
        load_recipe(write(tmp_path, "data:\n  datasets:\n    - nmae: apps\n"))


def test_overrides_are_parsed_as_yaml(tmp_path):
    recipe = load_recipe(
        write(tmp_path, "data:\n  datasets:\n    - name: apps\n"),
        ["training.max_steps=7", "training.learning_rate=3e-4", "lora.target_modules=[q_proj, v_proj]"],
    )
    assert recipe.training.max_steps == 7 and recipe.training.learning_rate == 3e-4
    assert recipe.lora.target_modules == ["q_proj", "v_proj"]
    with pytest.raises(ConfigError, match="section.key=value"):
        load_recipe(write(tmp_path, "{}\n"), ["max_steps=3"])


def test_inconsistent_values_fail_before_training(tmp_path):
    with pytest.raises(ConfigError, match="exactly one of `name` or `path`"):
        load_recipe(write(tmp_path, "data:\n  datasets:\n    - {name: apps, path: x.jsonl}\n"))
    with pytest.raises(ConfigError, match="keeps fewer checkpoints than merge needs"):
        load_recipe(write(tmp_path, "training: {save_total_limit: 2}\nmerge: {num_checkpoints: 4}\n"))
    with pytest.raises(ConfigError, match="merge.weights has 2 entries for 4 checkpoints"):
        load_recipe(write(tmp_path, "merge: {weights: [1, 2]}\n"))
    with pytest.raises(ConfigError, match="a c2llm recipe exports in the release layout"):
        load_recipe(write(tmp_path, "export: {layout: sentence_transformers}\n"))


def test_command_line_reports_config_errors_without_a_traceback(tmp_path, capsys):
    from train.train import main

    with pytest.raises(SystemExit) as stopped:
        main([str(write(tmp_path, "lora:\n  rnak: 8\n")), "--output-dir", str(tmp_path / "out")])
    assert stopped.value.code == 2
    assert "Unknown config key lora.'rnak'" in capsys.readouterr().err
    main(["--list-options"])
    assert "mining.num_negatives (default: 7)" in capsys.readouterr().out


# ----------------------------------------------------------------------------------------------------------------
# Types, not only values: a wrong type fails naming the file, the field, the value and the expected type (pydantic's
# words for it).


@pytest.mark.parametrize(
    "override, message",
    [
        ("training.max_steps=10.5", "training.max_steps: Input should be a valid integer, got a number with a "
         "fractional part (got 10.5, float)."),
        ("training.max_steps=[10]", "training.max_steps: Input should be a valid integer (got [10], list)."),
        ("training.save_total_limit=2.5", "training.save_total_limit: Input should be a valid integer"),
        ("lora.target_modules=q_proj", "lora.target_modules: Input should be a valid list (got 'q_proj', str)."),
        ("lora.target_modules=[q_proj, 3]", "lora.target_modules[1]: Input should be a valid string (got 3, int)."),
        ("mining.use_faiss=maybe", "mining.use_faiss: Input should be a valid boolean, unable to interpret input "
         "(got 'maybe', str)."),
        ("training.bf16=2", "training.bf16: Input should be a valid boolean, unable to interpret input (got 2, int)."),
        ("training.eval_steps=[1]", "training.eval_steps: Input should be a valid number (got [1], list)."),
        ("training.learning_rate_mapping={pma: x}", "training.learning_rate_mapping.pma: Input should be a valid "
         "number, unable to parse string as a number (got 'x', str)."),
        ("training.report_to=3", "training.report_to: Input should be a valid string or a valid list (got 3, int)."),
        ("training.output_dir=elsewhere", "training.output_dir is set by the recipe itself: the run folder"),
        ("training.lr_scheduler_kwargs={min_lr: .inf}", "training.lr_scheduler_kwargs: Input should be plain JSON "
         "values (no NaN or infinity"),
        ("model.base_model=.inf", "model.base_model: Input should be plain JSON values (no NaN or infinity"),
        ("training.head_learning_rate=[1]", "training.head_learning_rate: Input should be a valid number (got [1]"),
        ("training.learning_rate=fast", "training.learning_rate: Input should be a valid number, unable to parse "
         "string as a number (got 'fast', str)."),
        ("model.config_overrides=[1]", "model.config_overrides: Input should be a valid dictionary (got [1], list)."),
        ("data.datasets=[{name: apps, max_rows: 1.5}]", "data.datasets[0].max_rows: Input should be a valid integer"),
        ("data.datasets=[apps]", "data.datasets[0]: Input should be a dictionary or an instance of DatasetSpec "
         "(got 'apps', str)."),
        ("export.model_name=123", "export.model_name: Input should be a valid string (got 123, int)."),
    ],
)  # fmt: skip
def test_a_value_of_the_wrong_type_is_named_with_the_expected_type(override, message):
    with pytest.raises(ConfigError) as error:
        load_recipe(CONFIG_DIR / "cpu-smoke.yaml", [override])
    assert str(error.value).startswith(f"{CONFIG_DIR / 'cpu-smoke.yaml'} with --set {override}: ")
    assert message in str(error.value)


@pytest.mark.parametrize(
    "override, message",
    [
        ("loss.matryoshka_dims=[true]", "loss.matryoshka_dims[0]: Input should be a number, not a boolean (got True)"),
        ("training.max_steps=true", "training.max_steps: Input should be a number, not a boolean"),
        ("training.head_learning_rate=true", "training.head_learning_rate: Input should be a number, not a boolean"),
        ("data.datasets=[{name: apps, max_rows: true}]", "data.datasets[0].max_rows: Input should be a number"),
        ("model.max_seq_length=true", "model.max_seq_length: Input should be a number, not a boolean"),
    ],
)
def test_a_boolean_is_not_read_as_a_number(override, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_recipe(CONFIG_DIR / "cpu-smoke.yaml", [override])


def test_nested_keys_can_be_overridden():
    recipe = load_recipe(CONFIG_DIR / "cpu-smoke.yaml", ["model.config_overrides.pma_dim=32",
                                                         "model.config_overrides.rope_parameters.rope_theta=1000.0"])
    assert recipe.model.config_overrides["pma_dim"] == 32 and recipe.model.config_overrides["pma_num_heads"] == 4
    assert recipe.model.config_overrides["rope_parameters"] == {"rope_theta": 1000.0}
    with pytest.raises(ConfigError, match=r"Cannot override 'model.max_seq_length.x': model.max_seq_length is not a"):
        load_recipe(CONFIG_DIR / "cpu-smoke.yaml", ["model.max_seq_length.x=1"])


def test_pydantic_reads_what_a_recipe_file_means():
    """YAML 1.1 leaves 3e-4 a string, a quoted 'false' is false: pydantic's lax reading, which recipe.json keeps."""
    recipe = load_recipe(CONFIG_DIR / "cpu-smoke.yaml", ["mining.use_faiss='false'", "training.bf16=0",
                                                         "training.save_total_limit=2.0"])  # fmt: skip
    assert recipe.mining.use_faiss is False and recipe.training.bf16 is False
    assert recipe.training.save_total_limit == 2 and isinstance(recipe.training.save_total_limit, int)


def test_numbers_written_as_strings_still_load(tmp_path):
    recipe = load_recipe(write(tmp_path, "training:\n  learning_rate: 3e-4\n  max_steps: '12'\n"))
    assert recipe.training.learning_rate == 3e-4 and recipe.training.max_steps == 12


def test_syntax_errors_name_the_file_and_line(tmp_path):
    broken = write(tmp_path, "training:\n  max_steps: 3\n  lr: [1, 2\n")
    with pytest.raises(ConfigError, match=rf"{broken}: invalid YAML at line 4, column 1"):
        load_recipe(broken)
    (tmp_path / "recipe.json").write_text('{"training": {"max_steps": 3,}}')
    with pytest.raises(ConfigError, match=rf"{tmp_path / 'recipe.json'}: invalid JSON at line 1, column 30"):
        load_recipe(tmp_path / "recipe.json")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_recipe(write(tmp_path, "{}\n"), ["training.max_steps=[1,"])


def test_a_recipe_that_is_not_utf8_names_the_file(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("export:\n  model_name: caf\u00e9\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=rf"{path}: not UTF-8 text \(line 2, byte 25: b'\\xe9'\)"):
        load_recipe(path)
    with pytest.raises(ConfigError, match="does not exist or is not a file"):
        load_recipe(tmp_path)


# ----------------------------------------------------------------------------------------------------------------
# Property-based: whatever a recipe file or override holds, the parser answers with a recipe or a ConfigError.

YAML_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
def section_annotations(section: str) -> dict[str, typing.Any]:
    """Name -> declared type of every key the section accepts (training: the recipe's own and the library's)."""
    cls = recipe_args.SECTIONS[section][0]
    if cls is recipe_args.TrainingSection:
        from sentence_transformers import SentenceTransformerTrainingArguments

        library = typing.get_type_hints(SentenceTransformerTrainingArguments)
        own = recipe_args.RecipeTrainingArguments.__pydantic_fields__
        return {**{name: info.annotation for name, info in own.items()},
                **{name: library[name] for name in recipe_args.trainer_fields()}}  # fmt: skip
    return {name: info.annotation for name, info in cls.__pydantic_fields__.items()}


FIELDS = [(section, name) for section in recipe_args.SECTIONS for name in section_annotations(section)]
@pytest.mark.parametrize(
    "override, message",
    [
        ("loss.scale=1e30", "loss.scale: Input should be less than or equal to 100 (got '1e30', str)"),
        ("loss.scale=0", "loss.scale: Input should be greater than 0"),
        ("training.learning_rate=2e5", "training.learning_rate: Input should be less than or equal to 1"),  # for 2e-5
        ("training.learning_rate=-1e-4", "training.learning_rate: Input should be greater than or equal to 0"),
        ("training.head_learning_rate=10", "training.head_learning_rate: Input should be less than or equal to 1"),
        ("training.learning_rate_mapping={pma: 1e+30}",
         "training.learning_rate_mapping.pma: Input should be less than or equal to 1"),
        ("training.per_device_train_batch_size=0",
         "training.per_device_train_batch_size: Input should be greater than or equal to 1"),
        ("training.gradient_accumulation_steps=0", "training.gradient_accumulation_steps: Input should be greater"),
        ("training.num_train_epochs=-1", "training.num_train_epochs: Input should be greater than 0"),
        ("training.warmup_ratio=2", "training.warmup_ratio: Input should be less than or equal to 1"),
        ("training.warmup_steps=1000", "training.warmup_steps=1000 exceeds training.max_steps=40"),
        ("training.adam_beta2=1", "training.adam_beta2: Input should be less than 1"),
        ("training.weight_decay=-0.1", "training.weight_decay: Input should be greater than or equal to 0"),
        ("training.seed=-1", "training.seed: Input should be greater than or equal to 0"),
        ("mining.num_negatives=200", "mining.range_min=0 to range_max=100 holds fewer than num_negatives=200"),
        ("mining.relative_margin=-0.5", "mining.relative_margin: Input should be greater than or equal to 0"),
        ("mining.max_score=2", "mining.max_score: Input should be less than or equal to 1"),
        ("data.datasets=[{name: apps, loss_weight: 1.0e+30}]",
         "data.datasets[0].loss_weight: Input should be less than or equal to 100"),
        ("loss.matryoshka_weights=[1.0e+30]", "loss.matryoshka_weights[0]: Input should be less than or equal to 100"),
        ("loss.matryoshka_dims=[0]", "loss.matryoshka_dims[0]: Input should be greater than or equal to 1"),
        ("merge.checkpoint_steps=[-5]", "merge.checkpoint_steps[0]: Input should be greater than or equal to 1"),
        ("model.max_seq_length=1000000000", "model.max_seq_length: Input should be less than or equal to 131072"),
    ],
)  # fmt: skip
def test_a_number_out_of_its_range_is_named_with_the_range(override, message):
    """Out-of-range numbers (loss.scale=1e30 trained and exported garbage) stop before any work, naming the key."""
    with pytest.raises(ConfigError, match=re.escape(message)):
        load_recipe(CONFIG_DIR / "cpu-smoke.yaml", [override])


FUZZ = settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def loads_or_config_error(raw):
    """The recipe, or None after a ConfigError; any other exception fails the test."""
    try:
        return recipe_reader.recipe_from_dict(raw)
    except ConfigError:
        return None


@FUZZ
@given(field=st.sampled_from(FIELDS), value=YAML_VALUES)
def test_any_value_in_any_field_loads_or_fails_clearly(field, value):
    section, name = field
    recipe = loads_or_config_error({section: {name: value}})
    if recipe is not None:  # what recipe.json stores reads back as the same recipe (the resume check relies on it)
        assert recipe_reader.recipe_from_dict(json.loads(json.dumps(recipe.to_dict()))) == recipe


# Values that pydantic's lax reading of each type refuses ("yes" is a boolean, "12" an integer: not here).
WRONG_FOR = {
    int: st.floats(allow_nan=False, allow_infinity=False).filter(lambda x: not float(x).is_integer())
    | st.lists(st.integers(), max_size=2) | st.text(alphabet="abcxyz", min_size=1),
    float: st.lists(st.floats(allow_nan=False, allow_infinity=False), max_size=2)
    | st.text(alphabet="abcxyz", min_size=1),
    bool: st.text(alphabet="abcxz", min_size=2, max_size=5) | st.integers(2, 1000)
    | st.lists(st.booleans(), max_size=2),
    list[str]: st.text(min_size=1, max_size=8) | st.integers() | st.lists(st.integers(), min_size=1),
    str: st.integers() | st.booleans() | st.lists(st.text(), max_size=2) | st.floats(allow_nan=False),
    dict: st.text(max_size=5) | st.integers() | st.lists(st.integers(), min_size=1),
}


def plain_kind(annotation):
    """int, float, bool, str, list[str] or dict when ``annotation`` is one of them (or it or None), else None."""
    members = [typing.get_args(member)[0] if typing.get_origin(member) is typing.Annotated else member
               for member in typing.get_args(annotation) if member is not type(None)]  # ranged: the type itself
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(members) == 1:
        annotation = members[0]
    if typing.get_origin(annotation) is dict:
        return dict
    return annotation if annotation in WRONG_FOR else None


@FUZZ
@given(data=st.data())
def test_a_wrongly_typed_value_names_its_field_and_the_expected_type(data):
    section, name = data.draw(st.sampled_from(FIELDS))
    kind = plain_kind(section_annotations(section)[name])
    if kind is None:  # list of datasets, choices, unions of several kinds: covered by the examples above
        return
    value = data.draw(WRONG_FOR[kind])
    with pytest.raises(ConfigError) as error:
        recipe_reader.recipe_from_dict({section: {name: value}})
    message = str(error.value)  # the field, or the element of a list field, named with what it must be
    assert message.startswith((f"{section}.{name}: Input should be", f"{section}.{name}[")), message
    assert "should be" in message


@FUZZ
@given(
    content=st.binary(max_size=200) | st.text(max_size=200).map(str.encode),
    suffix=st.sampled_from([".yaml", ".json"]),
)
def test_any_file_content_loads_or_fails_naming_the_file(tmp_path_factory, content, suffix):
    path = tmp_path_factory.mktemp("fuzz") / f"recipe{suffix}"
    path.write_bytes(content)
    try:
        load_recipe(path)
    except ConfigError as error:
        message = str(error)
        if "invalid" in message or "UTF-8" in message or "must contain a mapping" in message:
            assert str(path) in message


@FUZZ
@given(override=st.text(max_size=40))
def test_any_override_loads_or_fails_clearly(tmp_path_factory, override):
    path = tmp_path_factory.mktemp("fuzz") / "recipe.yaml"
    path.write_text("{}\n")
    try:
        load_recipe(path, [override])
    except ConfigError as error:  # anything else escaping is a failure of the property
        key = override.partition("=")[0].strip()
        section = key.split(".")[0]
        message = str(error)
        # a name may be quoted with escapes (repr) when it holds unprintable characters
        named = [text for name in (key, section) if name for text in (name, repr(name)[1:-1])]
        assert repr(override) in message or any(text in message for text in named), message


@pytest.mark.parametrize("override", [".0=", "model.=1", " .max_steps=3", "training.  =3"])
def test_an_override_with_an_empty_section_or_key_is_named(tmp_path, override):
    path = tmp_path / "recipe.yaml"
    path.write_text("{}\n")
    with pytest.raises(ConfigError, match="must look like section.key=value") as error:
        load_recipe(path, [override])
    assert repr(override) in str(error.value)


@pytest.mark.parametrize(
    "override, message",
    [
        ("model.tokenizer=../no/such/tokenizer", "model.tokenizer: the folder"),
        ("data.datasets=[{path: ../no/such.jsonl, task: CosQA}]", "Fix the path, or mark the entry `optional: true`"),
        ("model.config_overrides={pma_num_heads: 5}", "model.config_overrides: pma_num_heads=5 must be"),
        ("model.config_overrides.pma_dim=128", "model.config_overrides.pma_dim=128 is wider than the start model's "
         "hidden size 64"),
    ],
)
def test_a_run_that_fails_its_checks_leaves_nothing_behind(tmp_path, capsys, override, message):
    from train.train import main

    output_dir = tmp_path / "run"
    with pytest.raises(SystemExit) as stopped:
        main([str(CONFIG_DIR / "cpu-smoke.yaml"), "--output-dir", str(output_dir), "--set", override])
    assert stopped.value.code == 2 and message in capsys.readouterr().err
    assert not output_dir.exists()


def test_the_start_model_is_checked_before_the_run_writes_anything_even_with_decontamination(tmp_path, capsys, caplog):
    """The start model's paths are checked with everything else in step 1, whatever else the recipe asks for: no
    step starts and DIR is never made (not made and then removed again)."""
    import logging

    from train.train import main

    caplog.set_level(logging.INFO)

    benchmark = tmp_path / "benchmark"
    benchmark.mkdir()
    for name in ("queries.jsonl", "corpus.jsonl"):
        (benchmark / name).write_text('{"_id": "1", "text": "a"}\n')
    (benchmark / "qrels.tsv").write_text("query-id\tcorpus-id\tscore\n1\t1\t1\n")
    output_dir = tmp_path / "run"
    overrides = ["--set", "model.base_model=/nonexistent/qwen", "--set", f"data.decontaminate=[{benchmark}]"]
    with pytest.raises(SystemExit) as stopped:
        main([str(CONFIG_DIR / "cpu-smoke.yaml"), "--output-dir", str(output_dir), *overrides])
    captured = capsys.readouterr()
    assert stopped.value.code == 2 and "model.base_model: the folder /nonexistent/qwen does not exist" in captured.err
    assert "step 1" not in caplog.text and "removing" not in caplog.text and not output_dir.exists()


@pytest.mark.parametrize(
    "name, content, message",
    [
        ("empty.jsonl", b"", "holds no rows"),
        ("blank.jsonl", b"\n\n", "holds no rows"),
        ("broken.jsonl", b'{"query": "a", "positive": "b"}\n{"query": \n', "broken.jsonl:2: not a JSON line"),
        ("latin1.jsonl", '{"query": "caf\u00e9"}\n'.encode("latin-1"), "latin1.jsonl:1 is not UTF-8"),
        ("array.json", b'[{"query": "a"},\n {"query": }]', "array.json:2: not JSON"),
        ("broken.parquet", b"PAR1 not really", "is not a readable Parquet file"),
        ("pairs.csv", b"query,positive\n", "neither a .jsonl, .json or .parquet file"),
        # found once the data is loaded, after the start model is made: DIR is emptied again (the schema's other
        # errors, test_train_data.py's test_schema_mismatch_names_the_missing_columns, take the same path)
        ("renamed.jsonl", b'{"question": "a", "answer": "b"}\n', "Missing columns: ['query', 'positive'"),
    ],
)
def test_unreadable_data_files_are_named_before_the_run_writes_anything(tmp_path, capsys, name, content, message):
    from train.train import main

    (tmp_path / name).write_bytes(content)
    output_dir = tmp_path / "run"
    override = f"data.datasets=[{{path: {tmp_path / name}, task: CosQA}}]"
    with pytest.raises(SystemExit) as stopped:
        main([str(CONFIG_DIR / "cpu-smoke.yaml"), "--output-dir", str(output_dir), "--set", override])
    assert stopped.value.code == 2 and message in capsys.readouterr().err
    assert not output_dir.exists()


def test_a_missing_optional_source_is_left_out_with_a_warning(tmp_path, caplog):
    from train.data import check_sources

    specs = load_recipe(
        write(tmp_path, "data:\n  datasets:\n    - {name: python_docstrings, modules: [json]}\n"
                        "    - {path: ../no/such.jsonl, task: CosQA, optional: true}\n")
    ).data.datasets
    assert [spec.name for spec in check_sources(specs, tmp_path)] == ["python_docstrings"]
    assert "skipping optional source ../no/such.jsonl" in caplog.text
    with pytest.raises(ConfigError, match="every source is optional and missing"):
        check_sources(specs[1:], tmp_path)


@pytest.mark.parametrize("existed", [False, True])
def test_a_run_that_fails_building_its_start_model_leaves_nothing_behind(tmp_path, capsys, monkeypatch, existed):
    """Checks that need the start model itself (step 2) come after recipe.json is written: it is removed again,
    and an empty folder the user gave as DIR stays, empty."""
    from train.start_models import C2LLMStart
    from train.train import main

    def unusable_base_model(*args, **kwargs):
        raise ConfigError("model.base_model is not a Qwen2 checkpoint C2LLM can start from")

    monkeypatch.setattr(C2LLMStart, "prepare", unusable_base_model)
    output_dir = tmp_path / "run"
    if existed:
        output_dir.mkdir()
    with pytest.raises(SystemExit):
        main([str(CONFIG_DIR / "cpu-smoke.yaml"), "--output-dir", str(output_dir)])
    assert "is not a Qwen2 checkpoint" in capsys.readouterr().err
    assert output_dir.is_dir() == existed and not (existed and any(output_dir.iterdir()))


@pytest.mark.parametrize("config", sorted(CONFIG_DIR.glob("*.yaml")), ids=lambda path: path.name)
def test_every_shipped_recipe_mines_only_installed_modules_it_may_mine(config):
    """A `python_docstrings`/`python_topics` module that the requirements no longer install, or (for a recipe with
    `data.exclude_repositories`) one from an excluded upstream, would stop the recipe at its checks."""
    import importlib.util

    from train.data import check_sources
    from train.recipe import load_recipe as load
    from train.train import REPO_ROOT, recipe_exclusions

    if "name: python_" not in config.read_text():  # accelerate's and DeepSpeed's files are not recipes
        pytest.skip("no python_docstrings or python_topics source")
    recipe = load(config)
    specs = [spec for spec in recipe.data.datasets if spec.name in ("python_docstrings", "python_topics")]
    modules = [name for spec in specs for name in spec.modules]
    assert [name for name in modules if importlib.util.find_spec(name) is None] == []
    assert check_sources(specs, REPO_ROOT, recipe_exclusions(recipe)) == specs
