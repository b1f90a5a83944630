"""The OpenAI embeddings protocol, typed once: the request every front door takes, the response and the error body.

`EmbeddingRequest` checks what needs no model (field names and types, non-empty readable texts, a positive
`dimensions`); `serving.api` checks the rest against the loaded model and the server's limits. Every refusal has
OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`, so OpenAI clients raise it with the message.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from c2llm_plumbing.text import valid_unicode

if TYPE_CHECKING:
    from starlette.exceptions import HTTPException

API_PATH = "/v1/embeddings"
ROUTES = f"POST {API_PATH}, GET /v1/models, GET /health"
ENCODING_FORMATS = ("float", "base64")
INVALID_REQUEST = "invalid_request_error"  # OpenAI's error type for a request the client must change
SERVER_ERROR = "server_error"  # OpenAI's error type for a failure on the server's side (5xx)


class EmbeddingRequest(BaseModel):
    """POST /v1/embeddings: OpenAI's fields, plus `input_type`, the model's prompt name (query, document, ...)."""

    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="the served model's name (GET /v1/models lists it)")
    input: str | list[str] = Field(description="a text or a non-empty list of texts")
    encoding_format: Literal[ENCODING_FORMATS] = Field(
        "float", description="float: lists of numbers; base64: little-endian float32 bytes, base64-encoded")
    dimensions: Annotated[int, Field(strict=True, ge=1)] | None = Field(
        None, description="keep the first `dimensions` coordinates, scaled back to unit length (at most the "
                          "model's width)")
    input_type: str | None = Field(
        None, description="the model's prompt name put before every text: 'query' or 'document' (C2LLM also has "
                          "'{Task}-query'/'{Task}-document'); omitted: the server's default (--default-input-type)")
    user: str | None = Field(None, description="OpenAI's end-user identifier: accepted and unused")

    @field_validator("input", mode="before")
    @classmethod
    def texts_are_readable(cls, value: object) -> object:
        """One message per mistake (pydantic would report each branch of `str | list[str]`): not text, an empty
        list or text, or a lone surrogate (JSON allows "\\ud800"), which no tokenizer can read."""
        if not isinstance(value, (str, list)):
            raise ValueError(f"got {type(value).__name__}; pass a string or a list of strings")
        if value == []:
            raise ValueError("the list is empty; pass at least one text")
        for index, text in enumerate([value] if isinstance(value, str) else value):
            where = "the text" if isinstance(value, str) else f"text {index}"
            if not isinstance(text, str):
                raise ValueError(f"{where} is {type(text).__name__}; pass strings (token ids are not accepted)")
            if not text:
                raise ValueError(f"{where} is empty; drop it or send at least one character")
            try:
                valid_unicode(text)
            except ValueError as error:
                raise ValueError(f"{where} {error}") from None
        return value

    @property
    def texts(self) -> list[str]:
        return [self.input] if isinstance(self.input, str) else self.input


class Embedding(BaseModel):
    object: Literal["embedding"] = "embedding"
    index: int
    embedding: list[float] | str  # str: base64 of little-endian float32


class Usage(BaseModel):
    """Token counts; the server does not count tokens (a second tokenization per request), so both stay 0."""

    prompt_tokens: int = 0
    total_tokens: int = 0


class EmbeddingResponse(BaseModel):
    object: Literal["list"] = "list"
    data: list[Embedding]
    model: str
    usage: Usage = Usage()

    @classmethod
    def from_vectors(cls, vectors: np.ndarray, model: str, encoding_format: str) -> EmbeddingResponse:
        """(n, d) float32 vectors -> the response, each vector as numbers or as base64 (what OpenAI clients decode
        with numpy.frombuffer(..., dtype='<f4'))."""
        if encoding_format == "base64":
            items = [base64.b64encode(vector.astype("<f4").tobytes()).decode("ascii") for vector in vectors]
        else:
            items = vectors.tolist()
        return cls(data=[Embedding(index=index, embedding=item) for index, item in enumerate(items)], model=model)


@dataclass(frozen=True)
class Refusal:
    """A request answered with an HTTP error: the message says what is wrong and what to send instead."""

    status: int
    message: str
    param: str | None = None
    code: str | None = None

    def body(self) -> dict:
        kind = INVALID_REQUEST if self.status < 500 else SERVER_ERROR
        return {"error": {"message": self.message, "type": kind, "param": self.param, "code": self.code}}


MALFORMED_HTTP = Refusal(400, "the request is not HTTP/1.1 that this server reads (a malformed request line or "
                              "header, or a head over uvicorn's size limit); send a standard HTTP/1.1 request")
MODEL_LOADING = Refusal(503, "the model is still loading; retry when GET /health answers 200 (a few seconds to "
                             "minutes after the start)", code="model_loading")


def describe_validation_error(error: ValidationError | list[dict]) -> Refusal:
    """pydantic's (or FastAPI's) errors -> one 400 naming each field, the allowed fields for an unknown one."""
    details = error.errors() if isinstance(error, ValidationError) else error
    messages, params = [], []
    for detail in details:
        if detail["type"] == "json_invalid":  # its location is a character position, not a field
            messages.append(f"the body is not valid JSON ({detail.get('ctx', {}).get('error', detail['msg'])}); "
                            "send a JSON object")
            continue
        field = ".".join(str(part) for part in detail["loc"] if part != "body") or "body"
        params.append(field)
        if detail["type"] == "extra_forbidden":
            allowed = ", ".join(EmbeddingRequest.model_fields)
            messages.append(f"unknown field {field!r}: the fields are {allowed}")
        elif detail["type"] == "value_error":  # our validators' own words, without pydantic's "Value error, "
            messages.append(f"{field}: {detail['ctx']['error']}")
        else:
            messages.append(f"{field}: {detail['msg']}")
    return Refusal(400, "; ".join(messages), param=params[0] if params else None)


def describe_http_error(error: HTTPException, request_line: str, max_body_bytes: int) -> Refusal:
    """An HTTP error that FastAPI, Starlette or LitServe raised (`{"detail": ...}` on their own) -> a refusal that
    names the problem and the fix. `request_line` is "METHOD /path"; `max_body_bytes` the server's body cap."""
    cause = error.__cause__  # FastAPI raises its 400 for a body it cannot parse `from` the parser's exception
    if isinstance(cause, UnicodeDecodeError):
        return Refusal(400, f"the body is not valid UTF-8 ({cause.reason} at byte {cause.start}); send the JSON "
                            "encoded as UTF-8", param="body")
    if isinstance(cause, RecursionError):
        # Python's JSON parser stops at its recursion limit (about 1,000 levels), wherever the body would go on
        return Refusal(400, "the body nests JSON arrays or objects deeper than the parser reads; send one JSON "
                            f"object of the fields {', '.join(EmbeddingRequest.model_fields)}", param="body")
    if error.status_code == 413:
        return Refusal(413, f"the body is larger than {max_body_bytes:,} bytes, the most this server reads (set by "
                            "--max-inputs and --max-input-chars): split the texts into several requests",
                       param="input")
    if error.status_code in (404, 405):
        return Refusal(error.status_code, f"{request_line} is not a route of this server; the routes are {ROUTES}")
    return Refusal(error.status_code, str(error.detail))
