"""What the published C2LLM computes, written independently of the project's code, for parity tests.

A checkpoint in the published layout holds `plm_model.model.*` / `plm_model.lm_head.*` (a Qwen2 causal LM)
and `mha_pma.*` (the PMA block). Per text, with S the learnable seed (1, 1, d), H the last hidden states
(l, hidden), fc_q: d -> d, fc_k / fc_v: hidden -> d, heads splitting d, scores / sqrt(d), padded keys set to
-1e12 before the softmax and the weights multiplied by the mask after it:

    O = S + concat_heads(softmax(fc_q(S) fc_k(H)^T / sqrt(d)) fc_v(H))
    O = ln0(O)
    E = ln1(O + relu(fc_o(O)))

`residual="projected_query"` adds fc_q(S) instead of S (the paper's equation (5) read literally), to tell
the two readings apart.
"""

import json
import math
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file

QWEN25_CONFIG_VOCAB_SIZE = 151936
MAX_LENGTH = 2048


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
                            compressed_dim=compressed_dim, pma_num_heads=heads, pma_ln=True, pma_norm=True,
                            pma_norm_mode="post_normal", padding_side="left", keep_max_layer=-1,
                            inf_seq_length=MAX_LENGTH, attn_implementation="flash_attention_2")
    (folder / "config.json").write_text(json.dumps({**backbone_config, **published_fields}, indent=2))
    for name in ("tokenizer.json", "vocab.json", "merges.txt", "tokenizer_config.json"):
        (folder / name).write_bytes((Path(tokenizer_dir) / name).read_bytes())
    return folder


class PublishedReference:
    """Embeds texts from a published-layout folder with plain transformers and the computation above."""

    def __init__(self, folder: Path, residual: str = "query"):
        from safetensors.torch import load_file
        from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

        config = json.loads((folder / "config.json").read_text())
        tensors = load_file(str(folder / "model.safetensors"))
        qwen_fields = {k: v for k, v in config.items() if k in Qwen2Config().to_dict() and k != "model_type"}
        qwen_fields.pop("attn_implementation", None)
        self.causal_lm = Qwen2ForCausalLM(Qwen2Config(**qwen_fields)).eval()
        self.causal_lm.config._attn_implementation = "eager"
        self.causal_lm.load_state_dict({k[len("plm_model."):]: v for k, v in tensors.items() if k.startswith("plm_model.")})
        self.pma = {k[len("mha_pma."):]: v for k, v in tensors.items() if k.startswith("mha_pma.")}
        self.heads = config["pma_num_heads"]
        self.residual = residual
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder), padding_side="left")

    def pool(self, H: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """H (batch, seq, hidden), mask (batch, seq) -> (batch, d), with bmm over heads stacked on the batch."""
        p, batch = self.pma, H.shape[0]
        S = p["S"].repeat(batch, 1, 1)  # (batch, 1, d)
        d = S.shape[-1]
        Q = S @ p["mab.fc_q.weight"].T + p["mab.fc_q.bias"]
        K = H @ p["mab.fc_k.weight"].T + p["mab.fc_k.bias"]
        V = H @ p["mab.fc_v.weight"].T + p["mab.fc_v.bias"]
        width = d // self.heads
        Q_, K_, V_ = (torch.cat(x.split(width, 2), 0) for x in (Q, K, V))  # (heads * batch, n, width)
        keep = mask[:, None, :].repeat(self.heads, 1, 1).float()  # (heads * batch, 1, seq)
        scores = (Q_ @ K_.transpose(1, 2) / math.sqrt(d)).masked_fill(keep == 0, -1e12)
        weights = torch.softmax(scores, dim=2) * keep
        O = torch.cat((weights @ V_).split(batch, 0), 2)  # (batch, 1, d)
        O = O + (S if self.residual == "query" else Q)
        O = F.layer_norm(O, (d,), p["mab.ln0.weight"], p["mab.ln0.bias"])
        O = O + torch.relu(O @ p["mab.fc_o.weight"].T + p["mab.fc_o.bias"])
        O = F.layer_norm(O, (d,), p["mab.ln1.weight"], p["mab.ln1.bias"])
        return O.squeeze(1)

    @torch.no_grad()
    def encode(self, texts: list[str], batch_size: int = 4) -> torch.Tensor:
        """Normalized (n, d) embeddings; texts truncated to 2,048 tokens, no special tokens added."""
        vectors = []
        for start in range(0, len(texts), batch_size):
            inputs = self.tokenizer(texts[start:start + batch_size], padding=True, truncation=True,
                                    max_length=MAX_LENGTH, add_special_tokens=False, return_tensors="pt")
            hidden = self.causal_lm(**inputs, output_hidden_states=True).hidden_states[-1]
            vectors.append(self.pool(hidden, inputs["attention_mask"]))
        return F.normalize(torch.cat(vectors), dim=-1)


def main() -> None:
    """Offline demonstration: the parity tool on tiny published-layout checkpoints (d = hidden and d < hidden),
    its published side replaced by this reference, in each reading of the residual."""
    import argparse
    import contextlib
    import sys
    import tempfile

    from tools import parity_check
    from tools.tokenizer import qwen25_tokenizer_dir

    argparse.ArgumentParser(description=main.__doc__).parse_args()
    for compressed_dim, reading in ((64, "query"), (64, "projected_query"), (32, "query")):
        with tempfile.TemporaryDirectory(prefix="c2llm-reference-") as scratch:
            source = write_published_checkpoint(Path(scratch) / "published", qwen25_tokenizer_dir(),
                                                compressed_dim=compressed_dim)
            vectors = Path(scratch) / "published.safetensors"
            texts = list(parity_check.SAMPLE_TEXTS)
            parity_check.save_vectors(vectors, PublishedReference(source, residual=reading).encode(texts), texts)
            print(f"\n== hidden 64, compressed_dim {compressed_dim}, reference computes the {reading!r} reading ==")
            sys.argv = ["parity_check", str(source), "--published-vectors", str(vectors)]
            with contextlib.suppress(SystemExit):
                parity_check.main()


if __name__ == "__main__":
    main()
