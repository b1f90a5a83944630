"""The HTTP side of `python -m serving`, around LitServe's server:

- it listens at once: `/health` and `POST /v1/embeddings` answer 503 while the model loads (LitServe would bind the
  port only once the model is loaded, so clients and load balancers saw refused connections for minutes);
- a client has `read_timeout` seconds, from connecting or from its previous answer, to send a whole request;
  then its connection is closed (uvicorn bounds only the idle time between requests, so a client that sends
  nothing, or half a request, held a connection forever);
- every error has OpenAI's shape, those uvicorn, FastAPI and Starlette raise themselves included
  (`serving.protocol`).
"""

import json
from collections.abc import Callable

import h11
import litserve
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from litserve.utils import WorkerSetupStatus
from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.h11_impl import H11Protocol

from serving.protocol import MALFORMED_HTTP, MODEL_LOADING, describe_http_error, describe_validation_error

# How soon a client refused while the model loads should come back (a load takes seconds to minutes): clients that
# honour Retry-After, the openai client among them, retry at this pace.
LOADING_RETRY_AFTER_S = 5


class EmbeddingServer(litserve.LitServer):
    """LitServer that starts its HTTP workers at once instead of after the model worker's setup."""

    def verify_worker_status(self) -> None:
        """LitServe calls this between starting the model worker and starting the HTTP workers, and waits in it for
        the model; here the HTTP workers start at once and answer 503 until `model_ready` (RefuseWhileLoading,
        LitServe's own /health). A model that fails to load ends its worker, and LitServe's worker monitor then
        stops the server."""

    def model_ready(self) -> bool:
        """What LitServe's /health answers 200 on: every model worker has finished its setup."""
        statuses = self.workers_setup_status.values()
        return bool(statuses) and all(status == WorkerSetupStatus.READY for status in statuses)


class RefuseWhileLoading:
    """ASGI middleware: requests to `path` get 503 (OpenAI's shape, naming the wait) until `ready()`; once it is,
    it is not asked again (a model worker is not reloaded)."""

    def __init__(self, app: ASGIApp, ready: Callable[[], bool], path: str):
        self.app, self.ready, self.path = app, ready, path
        self.loaded = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"] == self.path and not self.loaded:
            self.loaded = self.ready()
            if not self.loaded:
                refusal = MODEL_LOADING
                response = JSONResponse(refusal.body(), status_code=refusal.status,
                                        headers={"Retry-After": str(LOADING_RETRY_AFTER_S)})
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class ReadDeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, plus one timer per connection: armed when the connection opens and when an answer
    has been sent, it closes the connection if the client still owes the request (h11 reads it as IDLE: nothing
    or part of the headers; SEND_BODY: part of the body). uvicorn has no setting for this (`timeout_keep_alive`
    starts only after an answer and stops at the first byte of the next request); its public `http=` setting
    takes a protocol class, so this subclass adds the timer and leaves the parsing to uvicorn."""

    read_timeout: float  # set by `with_read_timeout`

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.read_deadline = None

    def connection_made(self, transport) -> None:
        super().connection_made(transport)
        self.arm_read_deadline()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self.arm_read_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.read_deadline is not None:
            self.read_deadline.cancel()
        super().connection_lost(exc)

    def arm_read_deadline(self) -> None:
        if self.read_deadline is not None:
            self.read_deadline.cancel()
        self.read_deadline = self.loop.call_later(self.read_timeout, self.close_if_request_unfinished)

    def close_if_request_unfinished(self) -> None:
        if self.conn.their_state in (h11.IDLE, h11.SEND_BODY) and not self.transport.is_closing():
            self.transport.close()

    def send_400_response(self, msg: str) -> None:
        """uvicorn's answer to bytes h11 cannot read as a request, before any app sees them, in OpenAI's shape
        instead of plain text; the connection then closes, as uvicorn's does."""
        body = json.dumps(MALFORMED_HTTP.body()).encode()
        headers = [(b"content-type", b"application/json"), (b"connection", b"close")]
        for event in (h11.Response(status_code=MALFORMED_HTTP.status, headers=headers), h11.Data(data=body),
                      h11.EndOfMessage()):
            self.transport.write(self.conn.send(event))
        self.transport.close()


def with_read_timeout(seconds: float) -> type[ReadDeadlineH11Protocol]:
    """The protocol class to pass as uvicorn's `http=`, closing connections that take `seconds` to send a request."""
    return type("ReadDeadlineH11Protocol", (ReadDeadlineH11Protocol,), {"read_timeout": seconds})


def answer_errors_in_openai_shape(server: EmbeddingServer, max_body_bytes: int) -> None:
    """Exception handlers on the server's app: validation errors and the HTTP errors FastAPI, Starlette and LitServe
    raise (a body that is not UTF-8 or nests too deep, an unknown route, a body over the cap, a timeout) get
    OpenAI's error body instead of FastAPI's `{"detail": ...}`."""

    async def refuse_invalid(request, error: RequestValidationError) -> JSONResponse:
        refusal = describe_validation_error(error.errors())
        return JSONResponse(refusal.body(), status_code=refusal.status)

    async def refuse_http_error(request, error: HTTPException) -> JSONResponse:
        refusal = describe_http_error(error, f"{request.method} {request.url.path}", max_body_bytes)
        return JSONResponse(refusal.body(), status_code=refusal.status, headers=error.headers)

    server.app.add_exception_handler(RequestValidationError, refuse_invalid)
    server.app.add_exception_handler(HTTPException, refuse_http_error)
