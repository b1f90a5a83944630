"""Compare our C2LLM implementation with the published remote code on the same inputs.

Needs Hub access (or a local download of the published repository, whose own modeling code runs here
with trust_remote_code=True), which this project's machines do not have: parity is UNVERIFIED until
someone runs this and reports the numbers.

    huggingface-cli download codefuse-ai/C2LLM-0.5B --local-dir published-0.5b
    python -m tools.convert_published published-0.5b converted-0.5b
    python -m tools.parity_check published-0.5b converted-0.5b

It embeds a few code and text inputs with both (the published model's own `encode` and ours, same
prompts, fp32) and prints the cosine similarity of each pair of embeddings; it exits non-zero when any
pair is below --min-cosine.
"""

import argparse
import sys

import torch
import torch.nn.functional as F

SAMPLE_TEXTS = (
    "Retrieve the code that solves the following query:\nread a jsonl file and return its lines",
    "Retrieved Answer:def read_jsonl(path):\n    with open(path) as f:\n        return [json.loads(line) for line in f]",
    "Given a natural language question, retrieve SQL queries that serve as appropriate responses.\nhow many users signed up in May?",
    "Retrieved Answer:SELECT COUNT(*) FROM users WHERE signup_month = 5;",
    "Retrieved Answer:" + "x = 1\n" * 300,  # a long input
)


def embeddings_of(model, texts: list[str]) -> torch.Tensor:
    """Normalized (n, d) embeddings from a model's `encode`, whatever array type it returns."""
    output = model.encode(texts)
    return F.normalize(torch.as_tensor(output).float(), dim=-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("published", help="published C2LLM repo id or local folder (its own remote code is used)")
    parser.add_argument("converted", help="our converted folder (python -m tools.convert_published ...)")
    parser.add_argument("--min-cosine", type=float, default=0.999, help="fail below this cosine (default: 0.999)")
    args = parser.parse_args()

    from transformers import AutoModel

    theirs = AutoModel.from_pretrained(args.published, trust_remote_code=True, torch_dtype=torch.float32).eval()
    ours = AutoModel.from_pretrained(args.converted, trust_remote_code=True, torch_dtype=torch.float32).eval()
    texts = list(SAMPLE_TEXTS)
    with torch.inference_mode():
        cosines = (embeddings_of(theirs, texts) * embeddings_of(ours, texts)).sum(dim=-1)
    for text, cosine in zip(texts, cosines.tolist()):
        print(f"{cosine:.6f}  {text[:60]!r}")
    worst = float(cosines.min())
    print(f"minimum cosine {worst:.6f} (threshold {args.min_cosine})")
    sys.exit(0 if worst >= args.min_cosine else 1)


if __name__ == "__main__":
    main()
