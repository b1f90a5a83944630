"""The OpenAI embeddings protocol, typed once: the request every front door takes, the response and the error body.

`EmbeddingRequest` checks what needs no model (field names and types, non-empty readable texts, a positive
`dimensions`); `serving.api` checks the rest against the loaded model and the server's limits. Every refusal has
OpenAI's error shape, `{"error": {"message", "type", "param", "code"}}`, so OpenAI clients raise it with the message.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Annotated, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from codesearch.request import valid_unicode

ENCODING_FORMATS = ("float", "base64")
INVALID_REQUEST = "invalid_request_error"  # OpenAI's error type for a request the client must change


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
        return {"error": {"message": self.message, "type": INVALID_REQUEST, "param": self.param, "code": self.code}}


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
