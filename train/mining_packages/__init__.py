"""Code-search pairs mined from package sources: (doc comment, function without its comment) in many languages.

The multi-language sibling of the Python docstring miner (``train.docstrings``):

- ``fetch``: packages by name from Debian (binary -dev packages that ship source, source packages) and npm,
  through their own clients (apt with a configuration of its own under the cache; ``npm pack``).
- ``extract``: each documented function of a file, found with tree-sitter (tree-sitter-language-pack's grammars,
  as codesearch uses them).
- ``filters``: the query cut from the doc (without the function's own name), length bounds, duplicate and
  templated docs dropped, one package's share capped; every drop counted by reason.
- ``run``: the command (``python -m train.mining_packages``): inputs checked first, a cache per package (resumable),
  decontamination by upstream (``train.decontaminate.Exclusions``) and by benchmark text
  (``train.decontaminate.BenchmarkIndex``), pairs per language and a report per language.
"""
