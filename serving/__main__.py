"""`python -m serving --model PATH --port N`: an OpenAI-compatible embeddings server for a model folder.

    python -m serving --model default --port 8000          # default_model/; or any C2LLM / sentence-transformers folder
    curl -s 127.0.0.1:8000/v1/embeddings -H 'Content-Type: application/json' \\
      -d '{"model": "default_model", "input": ["def add(a, b): return a + b"], "input_type": "document"}'

Routes: POST /v1/embeddings (serving.protocol.EmbeddingRequest), GET /v1/models, GET /health (200 once the model is
loaded, 503 before; the port answers from the start). SIGTERM or Ctrl+C stop it: it takes no new connections, the
requests in flight are answered for up to --shutdown-timeout seconds, then the workers exit. The engine is LitServe
(light, starts in seconds, dynamic batching built in); see docs/serving.md.
"""

import argparse
import os
import signal
import sys
from pathlib import Path

from c2llm_plumbing.arguments import positive_int, positive_seconds, share
from serving import ModelOptions, add_model_options, checked_model

HOSTS = ("127.0.0.1", "0.0.0.0", "::")  # LitServe binds only these; loopback unless asked
# A text's characters as JSON may take up to 12 bytes each (an escaped surrogate pair: "\\ud83d\\ude00" is one
# character); the body cap follows from the limits so that a request within them is never cut off.
MAX_JSON_BYTES_PER_CHAR = 12
REQUEST_ENVELOPE_BYTES = 64 * 1024  # the fields besides the texts, and JSON's punctuation around each text


def stop_like_ctrl_c(main_pid: int):
    """A SIGTERM handler: in the main process (a service manager, `kill`) it stops the server as Ctrl+C does, and
    LitServe then ends its workers; the forked HTTP workers inherit it, and uvicorn raises SIGTERM again in them after
    its own graceful shutdown, where it only ends the process."""

    def stop(signum, frame):
        if os.getpid() == main_pid:
            raise KeyboardInterrupt
        raise SystemExit(0)

    return stop


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m serving", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    add_model_options(parser)
    parser.add_argument("--port", type=int, default=8000, help="TCP port, 1024-65535 (default: 8000)")
    parser.add_argument("--host", choices=HOSTS, default=HOSTS[0], help="address to bind (default: 127.0.0.1)")
    parser.add_argument("--served-model-name", help="the name requests must give as `model` (default: the folder's "
                                                    "name)")
    parser.add_argument("--default-input-type",
                        help="the prompt name used when a request gives no input_type (default: none, the model's "
                             "own default; 'document' suits clients that cannot send input_type, e.g. to index)")
    parser.add_argument("--max-batch-size", type=positive_int, default=16,
                        help="requests embedded together by dynamic batching (default: 16)")
    parser.add_argument("--batch-timeout", type=positive_seconds, default=0.005,
                        help="seconds a batch waits for more requests (default: 0.005)")
    parser.add_argument("--max-padding", type=share, default=0.2,
                        help="largest share of a forward pass's positions that may be padding; texts of other "
                             "lengths go to another pass (default: 0.2, for a CPU, where padding costs what a token "
                             "costs; 1 puts each batch in one pass)")
    parser.add_argument("--max-inputs", type=positive_int, default=256,
                        help="texts one request may hold (default: 256)")
    parser.add_argument("--max-input-chars", type=positive_int, default=16384,
                        help="characters one text may hold (default: 16384); within it, the model reads the first "
                             "--max-seq-length tokens")
    parser.add_argument("--request-timeout", type=positive_seconds, default=60.0,
                        help="seconds a request may wait in the queue before a 504 (default: 60)")
    parser.add_argument("--read-timeout", type=positive_seconds, default=30.0,
                        help="seconds a client may take to send a whole request, from connecting or from its "
                             "previous answer; then its connection is closed (default: 30)")
    parser.add_argument("--shutdown-timeout", type=positive_seconds, default=120.0,
                        help="seconds SIGTERM or Ctrl+C wait for the requests in flight to be answered; those still "
                             "running then are cut off (default: 120)")
    parser.add_argument("--accelerator", choices=("auto", "cpu", "cuda", "mps"), default="auto",
                        help="where the model runs (default: auto, a GPU when there is one)")
    return parser


def build_server(args: argparse.Namespace, model_dir: Path):
    """The LitServer for checked arguments (its workers start in run())."""
    from c2llm_plumbing.compat_litserve import without_litserve_mcp_route
    from serving.api import API_PATH, Batching, EmbeddingAPI, Limits
    from serving.server import EmbeddingServer, RefuseWhileLoading, answer_errors_in_openai_shape

    without_litserve_mcp_route()  # this server offers no MCP tools; LitServe's route dies beside mcp 2.x
    limits = Limits(max_inputs=args.max_inputs, max_input_chars=args.max_input_chars)
    served_name = args.served_model_name or model_dir.name
    batching = Batching(max_batch_size=args.max_batch_size, batch_timeout=args.batch_timeout,
                        max_padding=args.max_padding)
    api = EmbeddingAPI(ModelOptions.from_args(args, model_dir), served_name, limits,
                       default_input_type=args.default_input_type, batching=batching)
    max_body = limits.max_inputs * limits.max_input_chars * MAX_JSON_BYTES_PER_CHAR + REQUEST_ENVELOPE_BYTES
    server = EmbeddingServer(api, accelerator=args.accelerator, devices=1, timeout=args.request_timeout,
                             max_payload_size=max_body)
    # LitServer takes no argument for the drain: this public attribute (30 s unless set) is both uvicorn's
    # timeout_graceful_shutdown and how long LitServe waits for its HTTP workers to exit before killing them.
    server.uvicorn_graceful_timeout = args.shutdown_timeout

    async def models() -> dict:
        return {"object": "list", "data": [{"id": served_name, "object": "model", "owned_by": "c2llm"}]}

    answer_errors_in_openai_shape(server, max_body)
    server.app.add_middleware(RefuseWhileLoading, ready=server.model_ready, path=API_PATH)
    server.app.add_api_route("/v1/models", models, methods=["GET"])
    return server


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 1024 <= args.port <= 65535:
        parser.error(f"--port {args.port}: pass a port from 1024 to 65535")
    model_dir = checked_model(parser, args.model, "--default-input-type", args.default_input_type, "litserve")
    server = build_server(args, model_dir)
    from serving.server import with_read_timeout  # imported once checked_model has found the serve extra

    signal.signal(signal.SIGTERM, stop_like_ctrl_c(os.getpid()))
    try:
        server.run(host=args.host, port=args.port, generate_client_file=False,
                   http=with_read_timeout(args.read_timeout))
    except EOFError:
        # LitServe's worker monitor stops the server when the model worker ends on its own (a model that fails to
        # load); the main process, waiting on the manager the monitor shut down, then reads end-of-file
        return (f"python -m serving: the model worker stopped, with the server (the error above; a model that fails "
                f"to load: check {model_dir} loads with SentenceTransformer(..., trust_remote_code=True))")
    return 0


if __name__ == "__main__":
    sys.exit(main())
