"""The embeddings endpoint on LitServe: one model in an inference worker, requests batched across clients.

LitServe collects up to `max_batch_size` requests (waiting at most `batch_timeout` seconds for more), and
`predict` embeds all their texts, one prompt at a time, in forward passes of at most `encode_batch_size` texts of
similar length (`padding_bounded_groups`). A request the model or the limits refuse is answered alone with its
error: it never fails the batch it shared (LitServe would answer a whole batch with an exception raised inside it).
"""

import signal
from dataclasses import dataclass

import litserve
import numpy as np
from fastapi.responses import JSONResponse, Response

from c2llm_plumbing.models import load_model
from serving import ModelOptions
from serving.protocol import API_PATH, EmbeddingRequest, EmbeddingResponse, Refusal

# No `from __future__ import annotations` here: LitServe hands decode_request's annotation to FastAPI as the request
# type, which must be the class itself, not its name.


@dataclass(frozen=True)
class Limits:
    """What one request may ask; the request body's size is capped by the server from these (serving.__main__)."""

    max_inputs: int  # texts per request
    max_input_chars: int  # characters per text; the model then reads at most max_seq_length tokens of it


@dataclass(frozen=True)
class Batching:
    """How requests share forward passes: LitServe gathers up to `max_batch_size` requests, waiting at most
    `batch_timeout` seconds for more, and `predict` splits their texts into passes in which at most `max_padding`
    of the positions are padding (`padding_bounded_groups`)."""

    max_batch_size: int
    batch_timeout: float  # seconds
    max_padding: float  # a share, 0 to 1


@dataclass(frozen=True)
class Job:
    """A checked request: its texts, the prompt name they get, the width and the format wanted."""

    texts: list[str]
    prompt_name: str | None
    dimensions: int | None
    encoding_format: str


class EmbeddingAPI(litserve.LitAPI):
    def __init__(self, model: ModelOptions, served_name: str, limits: Limits, *, default_input_type: str | None,
                 batching: Batching):
        super().__init__(max_batch_size=batching.max_batch_size, batch_timeout=batching.batch_timeout,
                         api_path=API_PATH)
        self.model_options, self.served_name, self.limits = model, served_name, limits
        self.default_input_type, self.max_padding = default_input_type, batching.max_padding

    def setup(self, device: str) -> None:
        # Ctrl+C reaches every process of the terminal's group: this worker must outlive the HTTP workers' drain
        # (the requests in flight need it), and the main process ends it with SIGTERM once they have answered.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.model = load_model(self.model_options.folder, self.model_options.max_seq_length, device)
        dimension = getattr(self.model, "get_embedding_dimension", None)  # sentence-transformers >= 6; else 5.x's
        self.width = (dimension or self.model.get_sentence_embedding_dimension)()

    def decode_request(self, request: EmbeddingRequest) -> Job | Refusal:
        return check_request(request, self.served_name, self.limits, self.width, sorted(self.model.prompts),
                             self.default_input_type)

    def predict(self, jobs: list[Job | Refusal]) -> list[tuple[np.ndarray, Job] | Refusal]:
        """Every job's texts embedded at full width, one encode call per prompt name: job i -> (n_i, width)."""
        results: list[tuple[np.ndarray, Job] | Refusal] = list(jobs)
        by_prompt: dict[str | None, list[int]] = {}
        for position, job in enumerate(jobs):
            if isinstance(job, Job):
                by_prompt.setdefault(job.prompt_name, []).append(position)
        for prompt_name, positions in by_prompt.items():
            texts = [text for position in positions for text in jobs[position].texts]
            vectors = np.empty((len(texts), self.width), dtype=np.float32)  # (sum of n_i, width)
            for group in padding_bounded_groups([len(text) for text in texts],
                                                self.model_options.encode_batch_size, self.max_padding):
                vectors[group] = self.model.encode([texts[index] for index in group], prompt_name=prompt_name,
                                                   batch_size=len(group), convert_to_numpy=True)
            start = 0
            for position in positions:
                count = len(jobs[position].texts)
                results[position] = (vectors[start : start + count], jobs[position])
                start += count
        return results

    def encode_response(self, output: tuple[np.ndarray, Job] | Refusal) -> Response:
        if isinstance(output, Refusal):
            return JSONResponse(output.body(), status_code=output.status)
        vectors, job = output
        if job.dimensions is not None:  # (n, width) -> (n, dimensions), unit length again
            vectors = vectors[:, : job.dimensions]
            vectors = vectors / np.linalg.norm(vectors, axis=1, keepdims=True).clip(min=np.finfo(np.float32).tiny)
        response = EmbeddingResponse.from_vectors(vectors, self.served_name, job.encoding_format)
        return Response(response.model_dump_json(), media_type="application/json")


def padding_bounded_groups(lengths: list[int], max_size: int, max_padding: float) -> list[list[int]]:
    """Indices of texts (by `lengths`, in characters: the proxy for tokens that `encode` sorts by too) split into
    forward passes of at most `max_size` texts in which padding to the longest is at most `max_padding` of the
    pass's positions. On a CPU a padded position costs what a real token costs, and a batch of the few requests
    that arrive together is rarely of one length, so a pass per similar-length group is faster than one padded
    pass; `encode` of a whole corpus gets the same effect from sorting many texts."""
    groups: list[list[int]] = []
    group: list[int] = []
    real = 0
    for index in sorted(range(len(lengths)), key=lambda position: -lengths[position]):
        longest = lengths[group[0]] if group else lengths[index]
        padded = longest * (len(group) + 1)
        if group and (len(group) == max_size or padded - real - lengths[index] > max_padding * padded):
            groups.append(group)
            group, real = [], 0
        group.append(index)
        real += lengths[index]
    return groups + [group] if group else groups


def check_request(request: EmbeddingRequest, served_name: str, limits: Limits, width: int, prompt_names: list[str],
                  default_input_type: str | None) -> Job | Refusal:
    """What `EmbeddingRequest` cannot know alone: the model's name, width and prompts, and the server's limits."""
    if request.model != served_name:
        return Refusal(404, f"model {request.model!r} is not served here; pass model={served_name!r}", "model",
                       "model_not_found")
    texts = request.texts
    if len(texts) > limits.max_inputs:
        return Refusal(413, f"input has {len(texts)} texts; this server takes at most {limits.max_inputs} per "
                            "request: split it into several requests", "input")
    too_long = [index for index, text in enumerate(texts) if len(text) > limits.max_input_chars]
    if too_long:
        return Refusal(413, f"text {too_long[0]} has {len(texts[too_long[0]]):,} characters; this server takes at "
                            f"most {limits.max_input_chars:,} per text (the model reads only its first tokens "
                            "anyway): shorten or split it", "input")
    if request.dimensions is not None and request.dimensions > width:
        return Refusal(400, f"dimensions={request.dimensions}: this model's embeddings have {width}; pass 1 to "
                            f"{width}, or omit it for all {width}", "dimensions")
    prompt_name = request.input_type if request.input_type is not None else default_input_type
    if prompt_name is not None and prompt_name not in prompt_names:
        choices = ", ".join(prompt_names) if prompt_names else "none (this model has no prompts: omit input_type)"
        return Refusal(400, f"input_type={prompt_name!r} is not a prompt of this model; pass one of: {choices}",
                       "input_type")
    return Job(texts, prompt_name, request.dimensions, request.encoding_format)
