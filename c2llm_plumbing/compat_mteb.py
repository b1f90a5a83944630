"""mteb's one non-public name this project needs, in one place (tests/test_plumbing.py pins it).

mteb converts a model card's languages ("en") to its own codes ("eng-Latn") with
`mteb.languages.iso_mappings._hf_lang_to_iso_lang_script`, which `ModelMeta.from_hub` uses; its public surface has no
converter that works offline (`from_hub` reads the Hub). Using mteb's own keeps our metadata what mteb would write.
If an upgrade moves it, the test fails naming this module: switch to mteb's public converter then.
"""

from __future__ import annotations


def card_language_to_mteb(language: str) -> str | None:
    """A model card language ("en", "eng", "eng-latn") as mteb's ISO language-script code, or None if mteb has none."""
    from mteb.languages import iso_mappings

    return iso_mappings._hf_lang_to_iso_lang_script(language)
