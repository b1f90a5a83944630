"""What the published C2LLM model computes, implemented independently of the project's code: for parity tests,
the parity tool's offline demonstration and the size of the published code's padding effect.

Written from the published model's description (the C2LLM report, the published config's fields and a public
port's list of what its author found load-bearing in the published modeling file), not from this project's code.
A checkpoint in the published layout holds a Qwen2 causal LM under `plm_model.*` and the pooling block under
`mha_pma.*` (`PMA_v2` / `MAB_POST_v2`): a seed S (1, 1, d), fc_q (d -> d), fc_k and fc_v (hidden -> d), fc_o
(d -> d) and two LayerNorms. For the last hidden states H (l, hidden) and a pad mask m (l,), per head h of d:

    A_h = softmax(fc_q(S)_h fc_k(H)_h^T / sqrt(d)) * m        over every position, then re-masked: over a padded
                                                              row the real tokens' weights do not sum to 1
    O   = ln0(fc_q(S) + concat_h(A_h fc_v(H)_h))              the projected seed ("projected_query")
    E   = ln1(O + relu(fc_o(O)))                              returned unnormalized (pma_norm false)

`residual="query"` adds S instead of fc_q(S) (CodeFuse-CGE's block), to tell the two readings apart.

    python -m tests.published_reference     # the parity tool against this reference, and the padding effect
                                            # (its record: benchmarks/results/published_padding.json)
"""

import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

QWEN25_CONFIG_VOCAB_SIZE = 151936
MAX_LENGTH = 2048
READINGS = ("projected_query", "query")


def write_published_checkpoint(folder: Path, tokenizer_dir: Path, hidden_size: int = 64,
                               compressed_dim: int = 64, heads: int = 4, seed: int = 0) -> Path:
    """A tiny random checkpoint with the published key names and config fields."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    folder.mkdir(parents=True)
    backbone_config = dict(vocab_size=QWEN25_CONFIG_VOCAB_SIZE, hidden_size=hidden_size,
                           intermediate_size=2 * hidden_size, num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=2, max_position_embeddings=4096, bos_token_id=151643,
                           eos_token_id=151643, pad_token_id=151643, tie_word_embeddings=False)
    torch.manual_seed(seed)
    causal_lm = Qwen2ForCausalLM(Qwen2Config(**backbone_config))
    tensors = {f"plm_model.{key}": value.clone() for key, value in causal_lm.state_dict().items()}
    shapes = {"S": (1, 1, compressed_dim),
              "mab.fc_q.weight": (compressed_dim, compressed_dim), "mab.fc_q.bias": (compressed_dim,),
              "mab.fc_k.weight": (compressed_dim, hidden_size), "mab.fc_k.bias": (compressed_dim,),
              "mab.fc_v.weight": (compressed_dim, hidden_size), "mab.fc_v.bias": (compressed_dim,),
              "mab.fc_o.weight": (compressed_dim, compressed_dim), "mab.fc_o.bias": (compressed_dim,),
              "mab.ln0.weight": (compressed_dim,), "mab.ln0.bias": (compressed_dim,),
              "mab.ln1.weight": (compressed_dim,), "mab.ln1.bias": (compressed_dim,)}
    for name, shape in shapes.items():  # non-trivial values everywhere, LayerNorms included
        center = 1.0 if name.startswith("mab.ln") and name.endswith("weight") else 0.0
        tensors[f"mha_pma.{name}"] = center + 0.3 * torch.randn(shape)
    save_file({key: value.contiguous() for key, value in tensors.items()}, str(folder / "model.safetensors"),
              metadata={"format": "pt"})
    published_fields = dict(model_type="qwen2", architectures=["C2LLM"], embedding_method="pma",
                            compressed_dim=compressed_dim, pma_num_heads=heads, pma_ln=True, pma_norm=False,
                            pma_norm_mode="post_normal", padding_side="left", keep_max_layer=-1,
                            inf_seq_length=MAX_LENGTH, attn_implementation="flash_attention_2")
    (folder / "config.json").write_text(json.dumps({**backbone_config, **published_fields}, indent=2))
    for name in ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json"):
        (folder / name).write_bytes((Path(tokenizer_dir) / name).read_bytes())
    return folder


class PublishedReference:
    """Embeds texts from a published-layout folder with plain transformers and the computation above."""

    def __init__(self, folder: Path, residual: str = "projected_query"):
        from safetensors.torch import load_file
        from transformers import AutoTokenizer, Qwen2Config, Qwen2Model

        if residual not in READINGS:
            raise ValueError(f"residual {residual!r}: choose one of {READINGS}")
        config = json.loads((folder / "config.json").read_text())
        tensors = load_file(str(folder / "model.safetensors"))
        qwen_fields = {k: v for k, v in config.items() if k in Qwen2Config().to_dict() and k != "model_type"}
        qwen_fields.pop("attn_implementation", None)  # the reference runs eager attention
        # the causal LM's body: its LM head (plm_model.lm_head) never touches the last hidden states
        self.backbone = Qwen2Model(Qwen2Config(**qwen_fields)).eval()
        self.backbone.config._attn_implementation = "eager"
        self.backbone.load_state_dict({k.removeprefix("plm_model.model."): v for k, v in tensors.items()
                                       if k.startswith("plm_model.model.")})
        self.weights = {k.removeprefix("mha_pma."): v for k, v in tensors.items() if k.startswith("mha_pma.")}
        self.heads = config["pma_num_heads"]
        self.residual = residual
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder), padding_side="left")

    def pool(self, H: torch.Tensor, mask: torch.Tensor, residual: str | None = None) -> torch.Tensor:
        """H (batch, seq, hidden), mask (batch, seq) of 0/1 -> E (batch, d), heads as an einsum axis; `residual`
        (default: this reference's) names the reading."""
        w = self.weights
        linear = lambda x, name: x @ w[f"mab.{name}.weight"].T + w[f"mab.{name}.bias"]
        seed = w["S"].reshape(1, -1)  # (1, d)
        d = seed.shape[-1]
        q = linear(seed, "fc_q")  # (1, d)
        k, v = linear(H, "fc_k"), linear(H, "fc_v")  # (batch, seq, d)
        per_head = lambda x: x.unflatten(-1, (self.heads, d // self.heads))  # (..., heads, d / heads)
        scores = torch.einsum("hc,bshc->bhs", per_head(q)[0], per_head(k)) / math.sqrt(d)  # (batch, heads, seq)
        weights = torch.softmax(scores, dim=-1) * mask[:, None, :].to(scores.dtype)  # re-masked after the softmax
        attended = torch.einsum("bhs,bshc->bhc", weights, per_head(v)).flatten(1)  # (batch, d)
        O = F.layer_norm((q if (residual or self.residual) == "projected_query" else seed) + attended, (d,),
                         w["mab.ln0.weight"], w["mab.ln0.bias"])
        return F.layer_norm(O + torch.relu(linear(O, "fc_o")), (d,), w["mab.ln1.weight"], w["mab.ln1.bias"])

    def encode(self, texts: list[str], batch_size: int = 1) -> torch.Tensor:
        """Unnormalized (n, d) embeddings, texts in the given order, truncated to 2,048 tokens, no special tokens.
        batch_size 1 is the function itself; larger batches pad on the left and show the published padding effect."""
        return self.encode_readings(texts, batch_size, (self.residual,))[self.residual]

    @torch.no_grad()
    def encode_readings(self, texts: list[str], batch_size: int = 1,
                        readings: tuple[str, ...] = READINGS) -> dict[str, torch.Tensor]:
        """{reading: `encode`'s (n, d) vectors in that reading}, from one pass of the backbone."""
        vectors = {reading: [] for reading in readings}
        for start in range(0, len(texts), batch_size):
            inputs = self.tokenizer(texts[start:start + batch_size], padding=True, truncation=True,
                                    max_length=MAX_LENGTH, add_special_tokens=False, return_tensors="pt")
            hidden = self.backbone(**inputs).last_hidden_state  # the last hidden states, final norm included
            for reading in readings:
                vectors[reading].append(self.pool(hidden.float(), inputs["attention_mask"], reading))
        return {reading: torch.cat(parts) for reading, parts in vectors.items()}

    def encode_length_sorted(self, texts: list[str], batch_size: int) -> torch.Tensor:
        """`encode` in batches of similar lengths, longest first, as sentence-transformers (and so mteb) forms
        them; rows in the order of `texts`."""
        by_length = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        sorted_vectors = self.encode([texts[i] for i in by_length], batch_size=batch_size)
        vectors = torch.empty_like(sorted_vectors)
        vectors[by_length] = sorted_vectors
        return vectors


def code_texts(count: int = 48, seed: int = 0) -> list[str]:
    """Realistic code of many lengths: windows of 3 to 200 lines from standard-library modules (fixed text for a
    given Python version, present on every machine)."""
    import random
    import sysconfig

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    lines = [line for name in ("argparse", "csv", "difflib", "heapq", "shlex", "textwrap")
             for line in (stdlib / f"{name}.py").read_text(encoding="utf-8").splitlines()]
    rng = random.Random(seed)
    texts = []
    for _ in range(count):
        length = rng.choice((3, 8, 20, 50, 100, 200))
        start = rng.randrange(len(lines) - length)
        texts.append("\n".join(lines[start:start + length]))
    return texts


def padding_effect(reference: PublishedReference, texts: list[str], batch_size: int) -> dict[str, tuple[float, float]]:
    """(min, median) cosine of each text's vector in a padded batch against its vector alone, for batches formed
    as sentence-transformers forms them (sorted by length, as mteb runs) and in the given order."""
    alone = reference.encode(texts)
    length_sorted = reference.encode_length_sorted(texts, batch_size)
    unsorted = reference.encode(texts, batch_size=batch_size)
    cosine = lambda a, b: (float(F.cosine_similarity(a, b, dim=-1).min()),
                           float(F.cosine_similarity(a, b, dim=-1).median()))
    return {"length-sorted batches": cosine(length_sorted, alone), "batches in input order": cosine(unsorted, alone)}


def main() -> None:
    """Offline demonstration on tiny random published-layout checkpoints (d = hidden and d < hidden): the parity
    tool with its published side replaced by this reference in each reading, then the published code's padding
    effect on realistic code."""
    import argparse
    import contextlib
    import sys
    import tempfile

    from benchmarks.common import add_record_argument, load_line, write_record
    from tools import parity_check
    from train.tokenizer import qwen25_tokenizer_dir

    parser = argparse.ArgumentParser(description=main.__doc__)
    add_record_argument(parser, "published_padding")
    args = parser.parse_args()
    command = ["-m", "tests.published_reference", *sys.argv[1:]]  # sys.argv is the parity tool's below
    loads = [load_line("start")]
    with tempfile.TemporaryDirectory(prefix="c2llm-reference-") as scratch:
        for compressed_dim in (64, 32):
            source = write_published_checkpoint(Path(scratch) / f"published-{compressed_dim}", qwen25_tokenizer_dir(),
                                                compressed_dim=compressed_dim)
            for reading in READINGS:
                vectors = Path(scratch) / f"published-{compressed_dim}-{reading}.safetensors"
                texts = list(parity_check.SAMPLE_TEXTS)
                reference = PublishedReference(source, residual=reading)
                batched = reference.encode_length_sorted(texts, parity_check.PADDED_BATCH)
                parity_check.save_vectors(vectors, {"alone": reference.encode(texts), parity_check.PADDED_KEY: batched},
                                          texts)
                print(f"\n== hidden 64, compressed_dim {compressed_dim}, the reference computes {reading!r} ==")
                sys.argv = ["parity_check", str(source), "--published-vectors", str(vectors)]
                with contextlib.suppress(SystemExit):
                    parity_check.main()
        reference = PublishedReference(Path(scratch) / "published-64")
        texts = code_texts()
        counts = [len(ids) for ids in reference.tokenizer(texts, add_special_tokens=False)["input_ids"]]
        print(f"\n== the published PMA's padding effect (hidden 64, d 64): {len(texts)} code texts of {min(counts)} to "
              f"{max(counts)} tokens (cut at {MAX_LENGTH}), left padding; cosine of a text's vector in a batch vs "
              "alone ==")
        batches = {}
        for batch_size in (8, 32):
            effect = padding_effect(reference, texts, batch_size)
            print(f"batch {batch_size}: " + ", ".join(f"{name} min {low:.4f} median {median:.4f}"
                                                      for name, (low, median) in effect.items()))
            batches[str(batch_size)] = {name: {"min": low, "median": median} for name, (low, median) in effect.items()}
    metrics = {"hidden_size": reference.backbone.config.hidden_size, "pma_dim": reference.weights["S"].shape[-1],
               "texts": len(texts), "tokens_min": min(counts), "tokens_max": max(counts), "max_length": MAX_LENGTH,
               "padding_side": reference.tokenizer.padding_side, "batches": batches}
    loads.append(load_line("end"))
    print(f"record: {write_record(args.record_name, metrics, loads, args.record_dir, argv=command)}")


# ---- Tables of the docs: `python -m benchmarks.render` writes those TABLES names from the records ----
from c2llm_data.markdown import markdown_table  # noqa: E402


# published_reference's batch orders, as the architecture page names them
BATCH_ORDERS = {"length-sorted batches": "sorted by length (sentence-transformers, so mteb)",
                "batches in input order": "in input order"}


def published_padding(record: dict) -> str:
    """The published PMA's padding effect: min / median cosine of a text's vector in a batch against alone, per
    batch order and size."""
    metrics = record["metrics"]
    batches = metrics["batches"]
    caption = (f"{metrics['texts']} texts of {metrics['tokens_min']:,} to {metrics['tokens_max']:,} tokens (cut at "
               f"{metrics['max_length']:,}), {metrics['padding_side']} padding, hidden {metrics['hidden_size']}, "
               f"d {metrics['pma_dim']}:\n\n")
    rows = [[title, *(f"{batches[size][order]['min']:.4f} / {batches[size][order]['median']:.4f}"
                      for size in batches)] for order, title in BATCH_ORDERS.items()]
    return caption + markdown_table(["batches", *(f"batch of {size}: min / median" for size in batches)], rows,
                                    "l" + "r" * len(batches))


# table name -> (the records it reads, in the order the function takes them; the function)
TABLES = {
    "published_padding": (("published_padding",), published_padding),
}


if __name__ == "__main__":
    main()
