"""The `ModelMeta` entry to add to mteb's `codefuse_models.py`, written with that file's own constants.

mteb already registers the published C2LLM models in
`mteb/models/model_implementations/codefuse_models.py`, so a new C2LLM checkpoint goes beside them:

- a field whose value equals a constant of that file (`c2llm_loader_kwargs`, `c2llm_languages`,
  `c2llm_training_datasets`, ...) is written as the constant's name, so the entries cannot drift apart;
- the citation is written as the constant that cites the same paper (same BibTeX title), whatever our
  model card's formatting: mteb's tests reject one paper cited under two BibTeX keys.

Everything else is mteb's own `ModelMeta.to_python()`, which writes one field per line.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mteb.models import ModelMeta

MTEB_ENTRY_MODULE = "mteb.models.model_implementations.codefuse_models"
MTEB_ENTRY_FILE = "mteb/models/model_implementations/codefuse_models.py"
REUSABLE_FIELDS = ("loader_kwargs", "languages", "training_datasets")
_BIBTEX_KEY = re.compile(r"@\w+\s*\{\s*([^,\s]+)\s*,")
_BIBTEX_TITLE = re.compile(r"\btitle\s*=\s*\{([^{}]*)\}", re.IGNORECASE)


def bibtex_key(bibtex: str | None) -> str | None:
    """The key of the first entry of a BibTeX string (`qin2025c2llmtechnicalreportnew`), or None."""
    match = _BIBTEX_KEY.search(bibtex or "")
    return match.group(1) if match else None


def bibtex_title(bibtex: str | None) -> str | None:
    """The title of the first entry, lowercased with whitespace collapsed (how mteb compares titles)."""
    match = _BIBTEX_TITLE.search(bibtex or "")
    return " ".join(match.group(1).lower().split()) if match else None


def entry_module_constants() -> dict[str, Any]:
    """The module-level values of mteb's codefuse_models.py that an entry can refer to by name."""
    import importlib

    module = importlib.import_module(MTEB_ENTRY_MODULE)
    return {
        name: value for name, value in vars(module).items()
        if not name.startswith("_") and isinstance(value, (str, dict, list, set))
    }


def _same_value(ours: Any, theirs: Any) -> bool:
    if isinstance(ours, (list, set)) and isinstance(theirs, (list, set)):
        return set(ours) == set(theirs)  # language lists and dataset sets: order carries no meaning
    return ours == theirs


def reused_constants(meta: ModelMeta, constants: dict[str, Any] | None = None) -> dict[str, str]:
    """Field name -> name of the codefuse_models.py constant the entry writes instead of the value."""
    constants = entry_module_constants() if constants is None else constants
    reused = {}
    for field in REUSABLE_FIELDS:
        value = getattr(meta, field)
        if value:
            name = next((n for n, c in constants.items() if type(c) is type(value) and _same_value(value, c)), None)
            if name:
                reused[field] = name
    title = bibtex_title(meta.citation)
    if title:
        name = next((n for n, c in constants.items() if isinstance(c, str) and bibtex_title(c) == title), None)
        if name:
            reused["citation"] = name
    return reused


def entry_variable_name(model_name: str) -> str:
    """A Python name for the entry, from the Hub id: ORG/C2LLM-0.5B-repro -> C2LLM_0_5B_REPRO."""
    name = re.sub(r"\W+", "_", model_name.rsplit("/", 1)[-1]).strip("_").upper()
    return name if name[:1].isalpha() else f"MODEL_{name}"


def mteb_entry_source(meta: ModelMeta) -> str:
    """Python source of `NAME = ModelMeta(...)` for codefuse_models.py (see the module docstring)."""
    reused = reused_constants(meta)
    lines = meta.to_python().splitlines()
    for index, line in enumerate(lines):
        field = line.strip().split("=", 1)[0]
        if line.startswith("    ") and field in reused:
            lines[index] = f"    {field}={reused[field]},"
    import mteb

    reused_text = ", ".join(sorted(set(reused.values()))) or "none of its constants"
    header = [
        f"# Add to {MTEB_ENTRY_FILE} in the mteb PR. It uses that file's imports and {reused_text}.",
        f"# Check it there with: mteb mock-run -m {meta.name} --model-revision {meta.revision}",
    ]
    if meta.name in {known.name for known in mteb.get_model_metas()}:
        # The registry is a dict by name: a second entry would silently replace the first.
        header.append(f"# mteb already has an entry named {meta.name}: update it instead of adding this one.")
    return "\n".join([*header, f"{entry_variable_name(meta.name)} = {lines[0]}", *lines[1:]]) + "\n"
