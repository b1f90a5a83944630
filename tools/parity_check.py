"""Check that this project computes what the published C2LLM computes, on a real published checkpoint.

Needs a local download of a published repository (Hub access once), e.g.

    hf download codefuse-ai/C2LLM-0.5B --local-dir published-0.5b
    python -m tools.parity_check published-0.5b

Steps:
1. Embed 11 texts (about 10 to 2,300 tokens, mteb's prompt format) with the published model's own code,
   loaded the way mteb's C2LLM entry loads it: SentenceTransformer with trust_remote_code, left padding,
   2,048 tokens, float32, one text at a time (the published PMA lets padding move a text's vector, see
   the README; one at a time it is the function itself), and again in padded batches of 8 to print the size
   of that padding effect. The published config asks for flash_attention_2;
   sdpa is used unless flash-attn is installed and a GPU is present.
2. Convert the checkpoint with `tools.convert_published` in each reading of the PMA residual this project
   implements (`projected_query`, the published model's PMA_v2 and the default; `query`, CodeFuse-CGE's raw
   seed) and embed the same texts through SentenceTransformer and AutoModel.
3. Print the minimum cosine per reading and which one reproduces the published vectors; exit 0 only if the
   default reading reaches --min-cosine (0.9999) on every text and both of our routes agree.

The published remote code is reported to need transformers < 5 (and, by some users, deepspeed importable).
If that cannot share an environment with this project, run the two sides in two environments:

    # environment with the published code's requirements (e.g. pip install 'transformers<5' deepspeed)
    python -m tools.parity_check published-0.5b --write-published published-vectors.safetensors
    # this project's environment
    python -m tools.parity_check published-0.5b --published-vectors published-vectors.safetensors
"""

import argparse
import hashlib
import importlib.util
import json
import sys
import tempfile
from pathlib import Path

import torch
import torch.nn.functional as F

from modeling_c2llm import DEFAULT_MAX_LENGTH, DTYPE_ARGUMENT
from pooling_c2llm import PMA_RESIDUALS
from c2llm_data.prompts import DOCUMENT_PROMPT, TASK_INSTRUCTIONS, query_prompt
from c2llm_plumbing.atomic import atomic_target

DEFAULT_MIN_COSINE = 0.9999
READINGS = PMA_RESIDUALS  # the default reading first
PADDED_BATCH = 8
PADDED_KEY = f"batch{PADDED_BATCH}"
_LONG_FUNCTION = "def step_{i}(state):\n    state['count'] += {i}\n    return state\n\n"
SAMPLE_TEXTS = (
    query_prompt(TASK_INSTRUCTIONS["CodeSearchNetRetrieval"]) + "sort",
    query_prompt(TASK_INSTRUCTIONS["CodeSearchNetRetrieval"]) + "read a jsonl file and return its lines",
    DOCUMENT_PROMPT
    + "def read_jsonl(path):\n    with open(path) as f:\n        return [json.loads(line) for line in f]",
    query_prompt(TASK_INSTRUCTIONS["SyntheticText2SQL"]) + "how many users signed up in May?",
    DOCUMENT_PROMPT + "SELECT COUNT(*) FROM users WHERE signup_month = 5;",
    query_prompt(TASK_INSTRUCTIONS["CosQA"]) + "python sort dict by value",
    DOCUMENT_PROMPT + "def sort_by_value(d):\n    return dict(sorted(d.items(), key=lambda kv: kv[1]))",
    query_prompt(TASK_INSTRUCTIONS["CodeTransOceanContest"]) + "def add(a, b):\n    return a + b",
    DOCUMENT_PROMPT + "int add(int a, int b) { return a + b; }",
    DOCUMENT_PROMPT + "".join(_LONG_FUNCTION.format(i=i) for i in range(40)),  # ~1,000 tokens
    DOCUMENT_PROMPT + "".join(_LONG_FUNCTION.format(i=i) for i in range(110)),  # beyond 2,048: truncated
)


def texts_digest(texts) -> str:
    return hashlib.sha256(json.dumps(list(texts)).encode("utf-8")).hexdigest()


def load_sentence_transformer(folder: str | Path, attn_implementation: str | None = None):
    """Load a folder as mteb's C2LLM entry does: remote code, left padding, float32 here for parity."""
    from sentence_transformers import SentenceTransformer

    model_kwargs = {DTYPE_ARGUMENT: torch.float32}
    if attn_implementation is not None:
        model_kwargs["attn_implementation"] = attn_implementation
    model = SentenceTransformer(str(folder), device="cpu" if not torch.cuda.is_available() else None,
                                trust_remote_code=True, model_kwargs=model_kwargs,
                                tokenizer_kwargs={"padding_side": "left"})
    model.max_seq_length = DEFAULT_MAX_LENGTH
    return model


def sentence_transformer_vectors(model, texts, batch_size: int = 4) -> torch.Tensor:
    return F.normalize(model.encode(list(texts), batch_size=batch_size, convert_to_tensor=True).float().cpu(), dim=-1)


def published_attention() -> str:
    """flash_attention_2 (what the published config asks for) only where it can run; sdpa otherwise."""
    has_flash = importlib.util.find_spec("flash_attn") is not None and torch.cuda.is_available()
    return "flash_attention_2" if has_flash else "sdpa"


def published_vectors(published_dir: Path, texts) -> dict[str, torch.Tensor]:
    """{"alone": one text at a time (the published function itself), PADDED_KEY: in padded batches of
    PADDED_BATCH (what the published PMA's re-masked softmax lets padding move)}, normalized (n, d)."""
    import transformers

    try:
        model = load_sentence_transformer(published_dir, attn_implementation=published_attention())
    except Exception as error:  # the published remote code's own requirements are outside this project's control
        raise SystemExit(
            f"error: the published model did not load with transformers {transformers.__version__} ({error!r}).\n"
            "Its remote code is reported to need transformers < 5 and, for some users, deepspeed importable. Run "
            "the published side in such an environment with --write-published FILE, then compare here with "
            "--published-vectors FILE (see this module's docstring)."
        ) from error
    return {"alone": sentence_transformer_vectors(model, texts, batch_size=1),
            # sentence-transformers sorts by length before batching, as in mteb's runs
            PADDED_KEY: sentence_transformer_vectors(model, texts, batch_size=PADDED_BATCH)}


def our_vectors(published_dir: Path, texts, reading: str) -> dict[str, torch.Tensor]:
    """{route: (n, d) normalized vectors} for our conversion in one reading (every checkpoint shape converts in
    both: the query's width comes from the checkpoint)."""
    from transformers import AutoModel

    from tools.convert_published import convert_published_checkpoint

    with tempfile.TemporaryDirectory(prefix=f"c2llm-parity-{reading}-") as scratch:
        folder = convert_published_checkpoint(published_dir, Path(scratch) / "converted", pma_residual=reading)
        sentence_model = load_sentence_transformer(folder)
        auto_model = AutoModel.from_pretrained(folder, trust_remote_code=True, **{DTYPE_ARGUMENT: torch.float32}).eval()
        return {
            "SentenceTransformer": sentence_transformer_vectors(sentence_model, texts),
            "AutoModel": auto_model.encode(list(texts), batch_size=4, max_length=DEFAULT_MAX_LENGTH),
        }


def save_vectors(path: Path, vectors: dict[str, torch.Tensor], texts) -> None:
    """Atomically (c2llm_plumbing.atomic: a temporary name, then a rename): {"alone": (n, d)[, PADDED_KEY: (n, d)]}."""
    from safetensors.torch import save_file

    import transformers

    with atomic_target(path) as scratch:
        save_file({key: value.contiguous() for key, value in vectors.items()}, str(scratch),
                  metadata={"texts_sha256": texts_digest(texts), "transformers": transformers.__version__})


def load_vectors(path: Path, texts) -> dict[str, torch.Tensor]:
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as handle:
        digest = (handle.metadata() or {}).get("texts_sha256")
        if digest != texts_digest(texts):
            raise SystemExit(f"error: {path} was written for other texts (another version of this tool); rewrite it "
                             "with --write-published.")
        return {key: handle.get_tensor(key).float() for key in handle.keys()}


def token_counts(published_dir: Path, texts) -> list[int]:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(published_dir))
    return [len(ids) for ids in tokenizer(list(texts))["input_ids"]]


def compare(published: torch.Tensor, ours: dict[str, dict[str, torch.Tensor]], counts: list[int],
            min_cosine: float) -> bool:
    """Print per-text and minimum cosines; True when the default reading reproduces the published vectors."""
    published = F.normalize(published.float(), dim=-1)  # saved vectors may come unnormalized (pma_norm false)
    columns = [(reading, route) for reading, routes in ours.items() for route in routes]
    cosines = {column: (published * ours[column[0]][column[1]]).sum(dim=-1) for column in columns}
    print("tokens  " + "  ".join(f"{reading}/{route}" for reading, route in columns))
    for index, count in enumerate(counts):
        print(f"{count:6d}  " + "  ".join(f"{float(cosines[column][index]):.7f}".rjust(len(f'{column[0]}/{column[1]}'))
                                          for column in columns))
    verdicts = {}
    for reading, routes in ours.items():
        worst = min(float(cosines[(reading, route)].min()) for route in routes)
        routes_agree = float((routes["SentenceTransformer"] * routes["AutoModel"]).sum(dim=-1).min())
        verdicts[reading] = worst >= min_cosine and routes_agree >= min_cosine
        print(f"reading {reading!r}: minimum cosine to the published vectors {worst:.7f}; SentenceTransformer vs "
              f"AutoModel {routes_agree:.7f} -> {'REPRODUCES' if verdicts[reading] else 'differs'}")
    matching = [reading for reading, ok in verdicts.items() if ok]
    print(f"readings that reproduce the published code (min cosine >= {min_cosine}): {matching or 'none'}")
    return verdicts.get(READINGS[0], False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("published_dir", type=Path, help="local download of a published C2LLM repository")
    parser.add_argument("--min-cosine", type=float, default=DEFAULT_MIN_COSINE,
                        help=f"fail below this cosine (default: {DEFAULT_MIN_COSINE})")
    side = parser.add_mutually_exclusive_group()
    side.add_argument("--write-published", type=Path, metavar="FILE",
                      help="only embed with the published code and save the vectors (first of two environments)")
    side.add_argument("--published-vectors", type=Path, metavar="FILE",
                      help="published vectors saved by --write-published, instead of running the published code")
    args = parser.parse_args()
    if not (args.published_dir / "config.json").is_file():
        parser.error(
            f"{args.published_dir} has no config.json: pass a local download (hf download ... --local-dir DIR)"
        )
    if args.published_vectors is not None and not args.published_vectors.is_file():
        parser.error(f"--published-vectors {args.published_vectors} does not exist")
    if not 0 < args.min_cosine <= 1:
        parser.error(f"--min-cosine must be in (0, 1], got {args.min_cosine}")

    texts = SAMPLE_TEXTS
    if args.published_vectors is not None:
        published = load_vectors(args.published_vectors, texts)
    else:
        published = published_vectors(args.published_dir, texts)
    if args.write_published is not None:
        save_vectors(args.write_published, published, texts)
        print(f"wrote the published vectors of {len(texts)} texts to {args.write_published}")
        return
    if "alone" not in published:
        raise SystemExit(f"error: {args.published_vectors} holds no 'alone' vectors (an older version of this tool); "
                         "rewrite it with --write-published.")
    ours = {reading: our_vectors(args.published_dir, texts, reading) for reading in READINGS}
    reproduced = compare(published["alone"], ours, token_counts(args.published_dir, texts), args.min_cosine)
    if PADDED_KEY in published:
        padded = F.cosine_similarity(published["alone"], published[PADDED_KEY], dim=-1)
        print(f"the published code's padding effect: its vectors in length-sorted batches of {PADDED_BATCH} vs one "
              f"text at a time, min cosine {float(padded.min()):.7f}, median {float(padded.median()):.7f} (ours: "
              "no effect, the softmax runs over real tokens)")
    sys.exit(0 if reproduced else 1)


if __name__ == "__main__":
    main()
