"""A static twin of a sentence-transformers model: one vector per vocabulary token, a text's vector their mean.

    python -m train.static_twin --model default_model --output runs/static-twin [--dimensions 256]
        [--sif-coefficient 1e-4] [--token-vectors pipeline|backbone-mean]

What it makes: a sentence-transformers folder (`static_twin.StaticTwinEmbedding`, then Normalize) that any option
taking a model folder loads (codesearch's `--model`, `SentenceTransformer(folder, trust_remote_code=True)`). A text is
tokenized with the teacher's own tokenizer (no special tokens, no length limit) and its vector is the mean of its
tokens' rows: no transformer runs, so embedding costs a table look-up per token.

How (model2vec's distillation recipe, MinishLab/model2vec `distill`):
1. Every token of the teacher's vocabulary, its special and `[unusedN]` placeholder tokens left out, is run through
   the WHOLE teacher (backbone, pooling head, normalization) as the tokenizer wraps a one-token text (for a BERT
   tokenizer `[CLS] token [SEP]`): the row is what the teacher's pooling head (PMA for the default model) makes of
   that token, not a mean of the backbone's outputs (`--token-vectors backbone-mean`: model2vec's way, the mean of
   the backbone's outputs over the wrapped token, the head left out; for comparison).
2. The rows are centred and reduced to `--dimensions` by PCA (the shared direction every token carries is noise
   for a mean of tokens).
3. Each row is scaled by SIF, a / (a + p) (a: `--sif-coefficient`; 0 turns it off), with p the token's frequency
   estimated by Zipf's law from its rank in the vocabulary (WordPiece vocabularies list frequent pieces first):
   frequent tokens weigh less in the mean.
Left-out tokens get zero rows.
Why not model2vec's own `distill`: in model2vec 0.10 it loads the backbone alone with `AutoModel` (the pooling head
is lost: it pools by mean/first/last token) and needs skeletoken and transformers < 5.4 (this project: 5.23).

The folder carries the code it runs (`static_twin.py`, this package's `STATIC_TWIN_CODE`), like default_model/.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import shutil
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

REPO_ROOT = Path(__file__).resolve().parents[1]
if str(REPO_ROOT) not in sys.path:  # run as `python train/static_twin.py` from anywhere
    sys.path.insert(0, str(REPO_ROOT))

from c2llm_plumbing.atomic import atomic_target  # noqa: E402

STATIC_TWIN_CODE = REPO_ROOT / "train" / "static_twin_module" / "static_twin.py"  # copied into every twin folder
STATIC_TWIN_TYPE = "static_twin.StaticTwinEmbedding"
TWIN_CONFIG = "static_twin.json"
# model2vec's defaults (distill); the twin's record (benchmarks/results/codesearch_static_twin.json) compares others
DEFAULT_DIMENSIONS = 256
SIF_COEFFICIENT = 1e-4
PLACEHOLDER_TOKENS = re.compile(r"\[unused\d+\]")  # BERT's reserved rows: never produced by the tokenizer
WRAPPING_PROBE = "the"  # one token in every vocabulary distilled here (WordPiece, byte-level BPE)
DISTILL_BATCH = 512  # one-token texts: a batch of 512 is a few MB of activations
CHECK_TEXTS = ["def add(a, b):\n    return a + b", "sum two numbers", "read a json file into a dict"]
MIN_RELOAD_COSINE = 0.9999  # the reloaded folder must give the vectors computed here (float32 both sides)
TOKEN_VECTORS = ("pipeline", "backbone-mean")


@dataclass(frozen=True)
class TwinRecipe:
    """How a twin is distilled (the module docstring's steps); written into the twin's static_twin.json."""

    dimensions: int = DEFAULT_DIMENSIONS
    sif_coefficient: float = SIF_COEFFICIENT  # 0: no weighting
    token_vectors: str = "pipeline"

    def __post_init__(self):
        if self.dimensions < 1:
            raise ValueError(f"--dimensions {self.dimensions}: must be a positive width such as {DEFAULT_DIMENSIONS}")
        if not (0 <= self.sif_coefficient < 1 and math.isfinite(self.sif_coefficient)):
            raise ValueError(f"--sif-coefficient {self.sif_coefficient}: must be in [0, 1), e.g. {SIF_COEFFICIENT} "
                             "(model2vec's), or 0 for no weighting")
        if self.token_vectors not in TOKEN_VECTORS:
            raise ValueError(f"--token-vectors {self.token_vectors!r}: valid: {', '.join(TOKEN_VECTORS)}")


def twin_vocabulary(tokenizer) -> list[int]:
    """Token ids to distil: every id of the tokenizer's vocabulary except special and placeholder tokens."""
    special = set(tokenizer.all_special_ids)
    return [token_id for token, token_id in sorted(tokenizer.get_vocab().items(), key=lambda item: item[1])
            if token_id not in special and not PLACEHOLDER_TOKENS.fullmatch(token)]


def special_wrapping(tokenizer) -> tuple[list[int], list[int]]:
    """The special token ids the tokenizer puts before and after a text (BERT: [CLS], [SEP]; Qwen2.5: none), read
    from how it encodes a one-token text (transformers 5 has no public call that wraps given ids)."""
    ids = tokenizer(WRAPPING_PROBE)["input_ids"]
    special = set(tokenizer.all_special_ids)
    content = [position for position, token_id in enumerate(ids) if token_id not in special]
    if len(content) != 1:
        raise ValueError(f"the tokenizer encodes {WRAPPING_PROBE!r} as {len(content)} tokens, not one; a static "
                         "twin needs a tokenizer whose vocabulary holds that word")
    return ids[:content[0]], ids[content[0] + 1:]


def teacher_rows(model, token_ids: list[int], token_vectors: str = "pipeline",
                 batch_size: int = DISTILL_BATCH) -> np.ndarray:
    """(len(token_ids), d) float32: the teacher's sentence embedding of each token as its tokenizer wraps a
    one-token text, through every module of the pipeline ("pipeline"), or the mean of its backbone's token outputs
    over that text ("backbone-mean")."""
    import torch

    tokenizer = model.tokenizer
    tokenize = getattr(model, "preprocess", None) or model.tokenize  # sentence-transformers 6 / 5
    features_wanted = [name for name in ("input_ids", "attention_mask", "token_type_ids") if name in tokenize(["x"])]
    prefix, suffix = special_wrapping(tokenizer)
    wrapped = [prefix + [token_id] + suffix for token_id in token_ids]
    rows = []
    model.eval()
    with torch.no_grad():
        for start in range(0, len(wrapped), batch_size):
            input_ids = torch.tensor(wrapped[start:start + batch_size], dtype=torch.long, device=model.device)
            features = {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids),
                        "token_type_ids": torch.zeros_like(input_ids)}
            features = {name: features[name] for name in features_wanted}
            if token_vectors == "backbone-mean":  # every position is a real token: a plain mean is the masked one
                rows.append(model[0](features)["token_embeddings"].mean(dim=1).float().cpu().numpy())  # (batch, h)
            else:
                rows.append(model(features)["sentence_embedding"].float().cpu().numpy())  # (batch, d)
    return np.concatenate(rows)


def sif_weights(count: int, coefficient: float = SIF_COEFFICIENT) -> np.ndarray:
    """(count,) SIF weights a / (a + p), p estimated by Zipf's law from the rank (model2vec's compute_weights);
    all ones when `coefficient` is 0."""
    if coefficient == 0:
        return np.ones(count)
    inverse_rank = 1.0 / np.arange(2, count + 2)
    probability = inverse_rank / inverse_rank.sum()
    return coefficient / (coefficient + probability)


def static_table(rows: np.ndarray, token_ids: list[int], vocabulary_size: int, dimensions: int,
                 sif_coefficient: float = SIF_COEFFICIENT) -> np.ndarray:
    """(vocabulary_size, dimensions) float32: `rows` (one per id of `token_ids`, in vocabulary order) reduced by PCA
    and weighted by SIF; ids not in `token_ids` get zero rows."""
    from sklearn.decomposition import PCA

    if not 0 < dimensions <= min(rows.shape):
        raise ValueError(f"--dimensions {dimensions}: must be between 1 and {min(rows.shape)} (the teacher's "
                         f"width {rows.shape[1]} and the distilled tokens {rows.shape[0]})")
    reduced = PCA(n_components=dimensions, svd_solver="full").fit_transform(rows.astype(np.float64))
    table = np.zeros((vocabulary_size, dimensions), dtype=np.float32)
    table[token_ids] = reduced * sif_weights(len(token_ids), sif_coefficient)[:, None]
    return table


def write_twin(model, table: np.ndarray, output: Path, provenance: dict) -> None:
    """Save the twin as a sentence-transformers folder at `output` (written beside it, then moved in), after
    checking that the folder reloads with the vectors `table` gives."""
    sys.path.insert(0, str(STATIC_TWIN_CODE.parent))  # the module's one copy, importable as the folder will have it
    try:
        from static_twin import StaticTwinEmbedding
    finally:
        sys.path.remove(str(STATIC_TWIN_CODE.parent))
    from sentence_transformers import SentenceTransformer

    try:
        from sentence_transformers.sentence_transformer.modules import Normalize
    except ImportError:  # sentence-transformers 5.x
        from sentence_transformers.models import Normalize

    import torch

    tokenizer = unlimited_tokenizer(model.tokenizer.backend_tokenizer)
    embedding = StaticTwinEmbedding(tokenizer, embedding_weights=torch.from_numpy(table))
    twin = SentenceTransformer(modules=[embedding, Normalize()], device="cpu")
    expected = twin.encode(CHECK_TEXTS, convert_to_numpy=True)
    with atomic_target(output) as temporary:
        twin.save(str(temporary))
        shutil.copyfile(STATIC_TWIN_CODE, temporary / STATIC_TWIN_CODE.name)
        modules = json.loads((temporary / "modules.json").read_text())
        modules[0]["type"] = STATIC_TWIN_TYPE  # the folder's own copy, loaded with trust_remote_code
        (temporary / "modules.json").write_text(json.dumps(modules, indent=2) + "\n")
        (temporary / TWIN_CONFIG).write_text(json.dumps(provenance, indent=2) + "\n")
        reloaded = SentenceTransformer(str(temporary), trust_remote_code=True, device="cpu")
        cosine = float(np.min(np.sum(reloaded.encode(CHECK_TEXTS, convert_to_numpy=True) * expected, axis=1)))
        if not cosine >= MIN_RELOAD_COSINE:
            raise RuntimeError(f"the saved twin gives other vectors than the table (cosine {cosine:.6f})")


def unlimited_tokenizer(tokenizer):
    """A copy of a `tokenizers.Tokenizer` without truncation or padding: a static model has no length limit."""
    from tokenizers import Tokenizer

    copy = Tokenizer.from_str(tokenizer.to_str())
    copy.no_truncation()
    copy.no_padding()
    return copy


def distil(model_folder: Path, output: Path, recipe: TwinRecipe = TwinRecipe()) -> dict:
    """Distil the sentence-transformers model at `model_folder` into a static twin at `output`; returns what the
    twin's static_twin.json records (teacher, tokens distilled, dimensions, CPU seconds)."""
    from c2llm_plumbing.models import load_model, resolve_model

    started = time.process_time()
    folder = resolve_model(str(model_folder))
    model = load_model(folder, None)
    if not getattr(model.tokenizer, "is_fast", False):
        raise ValueError(f"{folder}: the model's tokenizer has no fast (tokenizers) version; a static twin "
                         "tokenizes with the `tokenizers` library")
    token_ids = twin_vocabulary(model.tokenizer)
    rows = teacher_rows(model, token_ids, recipe.token_vectors)
    table = static_table(rows, token_ids, model.tokenizer.backend_tokenizer.get_vocab_size(), recipe.dimensions,
                         recipe.sif_coefficient)
    provenance = {"teacher": folder.name, "tokens_distilled": len(token_ids), "vocabulary_size": table.shape[0],
                  **asdict(recipe), "distil_cpu_s": round(time.process_time() - started, 1)}
    write_twin(model, table, output, provenance)
    return provenance


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="default", help="the teacher: a sentence-transformers folder, or "
                        "'default' (default_model/)")
    parser.add_argument("--output", type=Path, required=True, help="folder to write the twin to (replaced whole)")
    parser.add_argument("--dimensions", type=int, default=DEFAULT_DIMENSIONS,
                        help=f"width of the twin's vectors (PCA of the teacher's; default {DEFAULT_DIMENSIONS})")
    parser.add_argument("--sif-coefficient", type=float, default=SIF_COEFFICIENT,
                        help=f"SIF's a: how much less frequent tokens weigh (default {SIF_COEFFICIENT}; 0: off)")
    parser.add_argument("--token-vectors", choices=TOKEN_VECTORS, default="pipeline",
                        help="a token's vector: the whole pipeline's (default) or the mean of the backbone's outputs "
                             "(model2vec's way, the pooling head left out)")
    args = parser.parse_args(argv)
    try:
        recipe = TwinRecipe(args.dimensions, args.sif_coefficient, args.token_vectors)
    except ValueError as error:
        parser.error(str(error))
    print(json.dumps(distil(args.model, args.output, recipe), indent=2))


if __name__ == "__main__":
    main()
