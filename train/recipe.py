"""Reading a recipe: a YAML or JSON file plus ``--set section.key=value`` overrides, into ``train.args.RecipeConfig``.

pydantic checks the sections (``train/args.py``); what is written here is how a problem is told: the file, the key,
the value and what it must be, an unknown key with the closest valid one, a syntax error with its line.

- ``load_recipe(path, overrides)``: read a file, apply overrides (values parsed as YAML), check every key and value.
- ``recipe_from_dict(raw)``: the same check of sections already read (``DIR/recipe.json``, tests).
- ``describe_options()``: every option with its default and help (``python -m train.train --list-options``).
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import json
import typing
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError

from train.args import (
    RECIPE_DERIVED_TRAINER_OPTIONS, RECIPE_SET_TRAINER_FIELDS, RECIPE_TRAINER_DEFAULTS, SECTIONS, TRAINER_FIELD_LIMITS,
    TRAINER_FIELD_TYPES, ConfigError, DataArguments, DatasetSpec, RecipeConfig, RecipeTrainingArguments,
    TrainingSection, trainer_default, trainer_fields,
)  # fmt: skip

OWN_TRAINING_KEYS = tuple(RecipeTrainingArguments.__pydantic_fields__)


def load_recipe(path: str | Path, overrides: list[str] | None = None) -> RecipeConfig:
    """Read a recipe file (.yaml/.yml/.json), apply overrides, validate every key and value; errors name the file."""
    raw = read_recipe_file(Path(path))
    for override in overrides or []:
        apply_override(raw, override)
    try:
        return recipe_from_dict(raw)
    except ConfigError as error:
        raise ConfigError(f"{path}{' with --set ' + ' '.join(overrides) if overrides else ''}: {error}") from None


def recipe_from_dict(raw: dict[str, Any]) -> RecipeConfig:
    for name in raw:
        if name not in SECTIONS:
            close = difflib.get_close_matches(str(name), list(SECTIONS), n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"Unknown config section {name!r}.{hint} Valid sections: {', '.join(SECTIONS)}.")
    return RecipeConfig(**{name: build_section(name, raw.get(name)) for name in SECTIONS})


def build_section(name: str, values: Any) -> Any:
    """The section ``name`` from its mapping in a recipe file."""
    cls = SECTIONS[name][0]
    if values is not None and not isinstance(values, dict):
        raise ConfigError(f"{name} must be a mapping of keys to values, got {values!r} ({type(values).__name__}).")
    values = dict(values or {})
    for key, value in values.items():  # DIR/recipe.json must read back as the same recipe (the resume check)
        try:
            same = json.loads(json.dumps(value, allow_nan=False)) == value
        except (ValueError, TypeError):
            same = False
        if not same:
            raise ConfigError(
                f"{name}.{key}: Input should be plain JSON values (no NaN or infinity, text keys), got {value!r}."
            )
    if cls is TrainingSection:
        return build_training_section(values)
    try:
        built = cls(**values)
    except ValidationError as error:
        raise explain(error, name, values, cls) from None
    for key, value in values.items():
        refuse_boolean_numbers(f"{name}.{key}", value, getattr(built, key))
    return built


def refuse_boolean_numbers(where: str, given: Any, read: Any) -> None:
    """Raise where a boolean of ``given`` was read as a number in ``read`` (pydantic's lax mode reads true as 1, which
    the numbers written as strings in recipe files need)."""
    read = dataclasses.asdict(read) if dataclasses.is_dataclass(read) else read
    if isinstance(given, bool) and not isinstance(read, bool):
        raise ConfigError(f"{where}: Input should be a number, not a boolean (got {given!r}): write the number.")
    if isinstance(given, list) and isinstance(read, list | tuple):
        for index, (given_item, read_item) in enumerate(zip(given, read)):
            refuse_boolean_numbers(f"{where}[{index}]", given_item, read_item)
    if isinstance(given, dict) and isinstance(read, dict):
        for key in given.keys() & read.keys():
            refuse_boolean_numbers(f"{where}.{key}", given[key], read[key])


def build_training_section(values: dict[str, Any]) -> TrainingSection:
    """The recipe's own options through their dataclass, every other key through the trainer field's annotation
    (``HfArgumentParser`` builds the trainer's arguments from them at the start of the run)."""
    for key in values:
        if key in RECIPE_SET_TRAINER_FIELDS:
            raise ConfigError(f"training.{key} is set by the recipe itself: {RECIPE_SET_TRAINER_FIELDS[key]}.")
        if key not in OWN_TRAINING_KEYS and key not in trainer_fields():
            raise unknown_key("training", key, [*OWN_TRAINING_KEYS, *sorted(trainer_fields())])
    trainer = {}
    for key, value in values.items():
        if key not in OWN_TRAINING_KEYS:
            adapter = trainer_field_adapter(key)
            try:  # stored as JSON values, as the file would write them (enums by their value)
                trainer[key] = adapter.dump_python(adapter.validate_python(value), mode="json")
            except ValidationError as error:
                raise explain(error, f"training.{key}", value) from None
            refuse_boolean_numbers(f"training.{key}", value, trainer[key])
    own = {key: value for key, value in values.items() if key in OWN_TRAINING_KEYS}
    try:
        section = TrainingSection(RecipeTrainingArguments(**own), trainer)
    except ValidationError as error:
        raise explain(error, "training", own, RecipeTrainingArguments) from None
    for key, value in own.items():
        refuse_boolean_numbers(f"training.{key}", value, getattr(section.recipe, key))
    return section


@functools.cache
def trainer_field_adapter(name: str) -> TypeAdapter:
    """pydantic's validator of one trainer field: the library's own annotation and the recipe's range."""
    from sentence_transformers import SentenceTransformerTrainingArguments

    annotation = typing.get_type_hints(SentenceTransformerTrainingArguments)[name]
    if name in TRAINER_FIELD_TYPES:
        annotation = TRAINER_FIELD_TYPES[name]
    elif name in TRAINER_FIELD_LIMITS:  # the library's type, with the recipe's range
        annotation = Annotated[annotation, Field(**TRAINER_FIELD_LIMITS[name])]
    return TypeAdapter(annotation, config=ConfigDict(arbitrary_types_allowed=True, allow_inf_nan=False))


def unknown_key(where: str, key: Any, known: list[str]) -> ConfigError:
    close = difflib.get_close_matches(str(key), known, n=1)
    hint = f" Did you mean {where}.{close[0]!r}?" if close else ""
    return ConfigError(f"Unknown config key {where}.{key!r}.{hint} Valid keys: {', '.join(known)}.")


def explain(error: ValidationError, where: str, values: Any, cls: type | None = None) -> ConfigError:
    """pydantic's first complaint about ``values`` as a ConfigError naming the key, the value and what it must be."""
    errors = error.errors()
    if errors[0]["type"] == "value_error" and isinstance(errors[0]["ctx"]["error"], ConfigError):
        message = str(errors[0]["ctx"]["error"])  # a check across fields, already worded for the recipe
        return ConfigError(message if message.startswith(f"{where}.") else f"{where}: {message}")

    def key_path(loc: tuple) -> list:  # the keys and indices of ``loc`` in ``values`` (pydantic adds union members)
        path, current = [], values
        for item in loc:
            if isinstance(current, dict) and item in current or isinstance(current, list) and isinstance(item, int):
                path, current = [*path, item], current[item]
        return path

    def dotted(path: list) -> str:
        return where + "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)

    paths = [key_path(item["loc"]) for item in errors]
    if errors[0]["type"] == "unexpected_keyword_argument" and cls is not None:
        *parent, key = paths[0]
        holder = DatasetSpec if parent else cls  # the one nested section: data.datasets[i]
        return unknown_key(dotted(parent), key, list(holder.__pydantic_fields__))
    # The deepest complaint names the element of a list or mapping that is wrong; one per member of a union.
    deepest = max(len(path) for path in paths)
    chosen = [item for item, path in zip(errors, paths) if len(path) == deepest]
    value = chosen[0]["input"]
    first, *others = dict.fromkeys(item["msg"] for item in chosen)  # "Input should be a valid string or a valid list"
    reasons = " or ".join([first, *(reason.removeprefix("Input should be ") for reason in others)])
    return ConfigError(f"{dotted(paths[errors.index(chosen[0])])}: {reasons} (got {value!r}, {type(value).__name__}).")


def apply_override(raw: dict[str, Any], override: str) -> None:
    """Apply ``section.key=value`` (value parsed as YAML, so 3, 1e-4, true, [a, b] work) to a raw config; a longer
    dotted key sets a key inside a mapping option (``model.config_overrides.pma_dim=32``)."""
    import yaml

    key, sep, value = override.partition("=")
    section, dot, name = key.strip().partition(".")
    path = [section, *name.split(".")]
    if not sep or not dot or not all(part.strip() for part in path):
        raise ConfigError(f"Override {override!r} must look like section.key=value, e.g. training.max_steps=10.")
    holder = raw
    for depth, part in enumerate(path[:-1]):
        holder = holder.setdefault(part, {})
        if not isinstance(holder, dict):
            raise ConfigError(f"Cannot override {key!r}: {'.'.join(path[: depth + 1])} is not a mapping.")
    try:
        holder[path[-1]] = yaml.safe_load(value)
    except yaml.YAMLError as error:
        raise ConfigError(f"Override {override!r}: the value is not valid YAML ({yaml_problem(error)}).") from None


def yaml_problem(error: Exception) -> str:
    mark = getattr(error, "problem_mark", None)
    problem = getattr(error, "problem", None) or str(error)
    return f"line {mark.line + 1}, column {mark.column + 1}: {problem}" if mark is not None else problem


def read_recipe_file(path: Path) -> dict[str, Any]:
    """The raw sections of a .yaml/.yml/.json recipe file; syntax and encoding errors name the file and line."""
    import yaml

    if not path.is_file():
        raise ConfigError(f"Recipe file {str(path)!r} does not exist or is not a file.")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line, byte = data[: error.start].count(b"\n") + 1, data[error.start : error.start + 1]
        raise ConfigError(f"{path}: not UTF-8 text (line {line}, byte {error.start}: {byte!r}). Save it as UTF-8.")
    try:
        raw = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except json.JSONDecodeError as error:
        raise ConfigError(f"{path}: invalid JSON at line {error.lineno}, column {error.colno}: {error.msg}.") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: invalid YAML at {yaml_problem(error)}.") from None
    if not isinstance(raw or {}, dict):
        raise ConfigError(f"{path} must contain a mapping of sections, got {type(raw).__name__}.")
    return raw or {}


def describe_options() -> str:
    """Every option as `section.key (default): help`, for --list-options and the README."""
    lines = []

    def add(name: str, default: Any, help_text: str) -> None:
        default = getattr(default, "value", default)  # an enum as a recipe file writes it
        default_text = "" if default is dataclasses.MISSING else f" (default: {default!r})"
        lines.append(f"  {name}{default_text}\n      {help_text}")

    for name, (cls, help_text) in SECTIONS.items():
        lines.append(f"{name}: {help_text}")
        classes = {TrainingSection: [RecipeTrainingArguments], DataArguments: [DataArguments, DatasetSpec]}
        for item in classes.get(cls, [cls]):
            prefix = f"{name}.datasets[]." if item is DatasetSpec else f"{name}."
            for key, info in item.__pydantic_fields__.items():
                default = dataclasses.MISSING if item is DatasetSpec else info.get_default(call_default_factory=True)
                add(prefix + key, default, info.description)
        if cls is TrainingSection:
            lines.append("  SentenceTransformerTrainingArguments fields, with the library's defaults:")
            for key, spec in sorted(trainer_fields().items()):
                recipe_default = (
                    f" Recipe: {RECIPE_TRAINER_DEFAULTS[key]!r}." if key in RECIPE_TRAINER_DEFAULTS
                    else f" Recipe: {RECIPE_DERIVED_TRAINER_OPTIONS[key]}." if key in RECIPE_DERIVED_TRAINER_OPTIONS
                    else ""
                )  # fmt: skip
                add(f"training.{key}", trainer_default(key), spec.metadata.get("help", "") + recipe_default)
    return "\n".join(lines)
