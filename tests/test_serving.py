"""The embeddings server (`python -m serving`): the request type and the checks against the model (fast), then a real
server on 127.0.0.1 driven by the `openai` client (slow): its vectors equal in-process `encode` with the same prompt,
`dimensions` is honoured, every kind of bad input gets a 4xx naming the problem, a bad request never fails the
requests batched with it, and SIGTERM stops the server and its worker processes. A stand-in model whose load and
forward pass wait at gates the test opens shows the port answering 503 while the model loads, and SIGTERM answering
the requests in flight; connections that never finish a request are closed."""

import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from benchmarks.serving_load import START_SECONDS, free_port, start_server
from serving.api import Job, Limits, check_request, padding_bounded_groups
from serving.protocol import (EmbeddingRequest, EmbeddingResponse, Refusal, describe_http_error,
                              describe_validation_error)

SERVED_NAME = "c2llm-tiny"
LIMITS = Limits(max_inputs=4, max_input_chars=200)
WIDTH = 32
PROMPTS = ["document", "query"]
MIN_COSINE = 0.9999
TEXTS = ["def add(a, b):\n    return a + b", "read a jsonl file and return its lines", "x"]


def refusal_of(body: dict) -> str:
    try:
        EmbeddingRequest.model_validate(body)
    except ValidationError as error:
        refusal = describe_validation_error(error)
        assert refusal.status == 400
        return refusal.message
    raise AssertionError(f"{body} was accepted")


@pytest.mark.parametrize(("body", "named"), [
    ({"model": "m", "input": []}, "input: the list is empty"),
    ({"model": "m", "input": 5}, "input: got int; pass a string or a list of strings"),
    ({"model": "m", "input": ["a", [1, 2]]}, "input: text 1 is list; pass strings (token ids are not accepted)"),
    ({"model": "m", "input": ["a", ""]}, "input: text 1 is empty"),
    ({"model": "m", "input": "a\ud800"}, "input: the text holds '\\ud800' at character 1, which is not valid Unicode"),
    ({"model": "m", "input": "a", "dimensions": 0}, "dimensions: Input should be greater than or equal to 1"),
    ({"model": "m", "input": "a", "dimensions": "8"}, "dimensions: Input should be a valid integer"),
    ({"model": "m", "input": "a", "encoding_format": "hex"}, "encoding_format: Input should be 'float' or 'base64'"),
    ({"model": "m", "input": "a", "prompt": "x"}, "unknown field 'prompt': the fields are model, input,"),
    ({"input": "a"}, "model: Field required"),
])
def test_the_request_type_names_each_mistake(body, named):
    assert named in refusal_of(body)


def test_a_valid_request_is_accepted_with_openais_defaults():
    request = EmbeddingRequest.model_validate({"model": "m", "input": "a", "user": "someone"})
    assert (request.texts, request.encoding_format, request.dimensions, request.input_type) == (["a"], "float",
                                                                                                None, None)


def check(body: dict, default_input_type: str | None = None) -> Job | Refusal:
    request = EmbeddingRequest.model_validate({"model": SERVED_NAME, "input": TEXTS[:2], **body})
    return check_request(request, SERVED_NAME, LIMITS, WIDTH, PROMPTS, default_input_type)


@pytest.mark.parametrize(("body", "status", "named"), [
    ({"model": "gpt"}, 404, f"model 'gpt' is not served here; pass model='{SERVED_NAME}'"),
    ({"input": ["a"] * 5}, 413, "input has 5 texts; this server takes at most 4"),
    ({"input": ["a", "b" * 201]}, 413, "text 1 has 201 characters; this server takes at most 200"),
    ({"dimensions": WIDTH + 1}, 400, f"dimensions={WIDTH + 1}: this model's embeddings have {WIDTH}"),
    ({"input_type": "question"}, 400, "input_type='question' is not a prompt of this model; pass one of: document, "
                                      "query"),
])
def test_what_the_model_and_the_limits_refuse(body, status, named):
    refusal = check(body)
    assert isinstance(refusal, Refusal) and refusal.status == status and named in refusal.message
    assert refusal.body()["error"]["type"] == "invalid_request_error"


def test_input_type_picks_the_prompt_and_the_servers_default_fills_in():
    assert check({"input_type": "query", "dimensions": WIDTH}) == Job(TEXTS[:2], "query", WIDTH, "float")
    assert check({}).prompt_name is None
    assert check({}, default_input_type="document").prompt_name == "document"
    assert check({"input_type": "query"}, default_input_type="document").prompt_name == "query"


def test_base64_is_little_endian_float32_as_openai_clients_decode_it():
    vectors = np.array([[0.5, -0.25, 1e-8], [1.0, 0.0, -3.5]], dtype=np.float32)
    response = EmbeddingResponse.from_vectors(vectors, "m", "base64")
    decoded = [np.frombuffer(base64.b64decode(item.embedding), dtype="<f4") for item in response.data]
    np.testing.assert_array_equal(np.stack(decoded), vectors)
    assert EmbeddingResponse.from_vectors(vectors, "m", "float").data[1].embedding == vectors[1].tolist()


@given(lengths=st.lists(st.integers(1, 500), max_size=40), max_size=st.integers(1, 16),
       max_padding=st.sampled_from([0.0, 0.2, 0.5, 1.0]))
def test_forward_passes_hold_every_text_once_within_the_size_and_padding_bounds(lengths, max_size, max_padding):
    groups = padding_bounded_groups(lengths, max_size, max_padding)
    assert sorted(index for group in groups for index in group) == list(range(len(lengths)))
    for group in groups:
        padded = max(lengths[index] for index in group) * len(group)
        assert len(group) <= max_size
        assert padded - sum(lengths[index] for index in group) <= max_padding * padded


def test_texts_of_one_length_share_a_pass_and_outliers_get_their_own():
    assert padding_bounded_groups([100, 5, 98, 101, 4], 8, 0.2) == [[3, 0, 2], [1, 4]]
    assert padding_bounded_groups([100, 5, 98, 101, 4], 8, 1.0) == [[3, 0, 2, 1, 4]]
    assert padding_bounded_groups([100, 5, 98, 101, 4], 2, 1.0) == [[3, 0], [2, 1], [4]]


@pytest.mark.parametrize(("value", "named"), [("1.5", "1.5 is not a share"), ("-0.1", "-0.1 is not a share"),
                                               ("nan", "nan is not a share"), ("a fifth", "'a fifth' is not a number")])
def test_a_padding_share_outside_zero_to_one_is_refused_naming_it(value, named, capsys):
    from serving.__main__ import build_parser

    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(["--model", "default", "--max-padding", value])
    assert exited.value.code == 2 and named in capsys.readouterr().err
    assert build_parser().parse_args(["--model", "default", "--max-padding", "1"]).max_padding == 1.0


def http_error(status: int, cause: BaseException | None = None):
    from starlette.exceptions import HTTPException

    try:
        raise HTTPException(status, "FastAPI's own words") from cause
    except HTTPException as error:
        return error


def body_that_fails(parse) -> BaseException:
    try:
        parse()
    except (ValueError, RecursionError) as error:
        return error
    raise AssertionError("parsed")


@pytest.mark.parametrize(("error", "status", "named"), [
    (http_error(400, body_that_fails(lambda: json.loads(b'{"model": "\xff"}'))), 400,
     "the body is not valid UTF-8 (invalid start byte at byte 11); send the JSON encoded as UTF-8"),
    (http_error(400, body_that_fails(lambda: json.loads("[" * 100_000))), 400,
     "the body nests JSON arrays or objects deeper than the parser reads; send one JSON object of the fields model"),
    (http_error(413), 413, "the body is larger than 1,024 bytes, the most this server reads"),
    (http_error(404), 404, "GET /v2 is not a route of this server; the routes are POST /v1/embeddings"),
    (http_error(504), 504, "FastAPI's own words"),
])
def test_errors_fastapi_raises_get_openais_shape_naming_the_fix(error, status, named):
    refusal = describe_http_error(error, "GET /v2", max_body_bytes=1024)
    assert refusal.status == status and named in refusal.message
    assert refusal.body()["error"]["type"] == ("invalid_request_error" if status < 500 else "server_error")


# The server: one process for the module, started on a free loopback port.


@pytest.fixture(scope="module")
def server(tiny_model_dir, tmp_path_factory):
    """(process, base URL, log path) of `python -m serving` on the tiny model, a request limit of 4 texts."""
    log = tmp_path_factory.mktemp("server") / "server.log"
    process, url = start_server(str(tiny_model_dir), [
        "--served-model-name", SERVED_NAME, "--max-inputs", str(LIMITS.max_inputs), "--max-input-chars",
        str(LIMITS.max_input_chars), "--accelerator", "cpu"], log)
    try:
        yield process, url, log
    finally:
        if process.poll() is None:  # the test that stops it did not run: end its workers too, not only the main one
            import psutil

            for member in [*psutil.Process(process.pid).children(recursive=True), psutil.Process(process.pid)]:
                member.kill()
            process.wait(timeout=60)


@pytest.fixture(scope="module")
def client(server):
    import openai

    return openai.OpenAI(base_url=f"{server[1]}/v1", api_key="unused", max_retries=0, timeout=120)


@pytest.fixture(scope="module")
def in_process(tiny_model_dir):
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(tiny_model_dir), trust_remote_code=True, device="cpu")


def cosines(served: np.ndarray, expected: np.ndarray) -> np.ndarray:
    served = served / np.linalg.norm(served, axis=1, keepdims=True)
    expected = expected / np.linalg.norm(expected, axis=1, keepdims=True)
    return (served * expected).sum(axis=1)


def served_vectors(response) -> np.ndarray:
    return np.array([item.embedding for item in sorted(response.data, key=lambda item: item.index)],
                    dtype=np.float32)


@pytest.mark.slow
@pytest.mark.parametrize("input_type", ["query", "document", None])
@pytest.mark.parametrize("encoding_format", ["float", "base64"])
def test_served_vectors_equal_in_process_encode_with_the_same_prompt(client, in_process, input_type,
                                                                     encoding_format):
    extra = {"input_type": input_type} if input_type else {}
    # float: the client hands the numbers on; base64 (its own default when the argument is left out): it decodes them
    options = {"encoding_format": "float"} if encoding_format == "float" else {}
    response = client.embeddings.create(model=SERVED_NAME, input=TEXTS, extra_body=extra, **options)
    expected = in_process.encode(TEXTS, prompt_name=input_type)
    served = served_vectors(response)
    assert served.shape == expected.shape == (len(TEXTS), WIDTH)
    assert cosines(served, expected).min() >= MIN_COSINE
    single = client.embeddings.create(model=SERVED_NAME, input=TEXTS[0], extra_body=extra, **options)
    assert cosines(served_vectors(single), expected[:1]).min() >= MIN_COSINE


@pytest.mark.slow
@pytest.mark.parametrize("dimensions", [1, 8, WIDTH])
def test_dimensions_keeps_the_first_coordinates_at_unit_length(client, in_process, dimensions):
    response = client.embeddings.create(model=SERVED_NAME, input=TEXTS, dimensions=dimensions,
                                        encoding_format="float", extra_body={"input_type": "query"})
    served = served_vectors(response)
    expected = in_process.encode(TEXTS, prompt_name="query", truncate_dim=dimensions, normalize_embeddings=True)
    assert served.shape == (len(TEXTS), dimensions)
    np.testing.assert_allclose(np.linalg.norm(served, axis=1), 1.0, atol=1e-5)
    assert cosines(served, expected).min() >= MIN_COSINE


def post(url: str, body: bytes, path: str = "/v1/embeddings") -> tuple[int, dict]:
    request = urllib.request.Request(f"{url}{path}", data=body, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=120) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


@pytest.mark.slow
@pytest.mark.parametrize(("arguments", "status", "named"), [
    ({"model": "text-embedding-3-small"}, 404, "model 'text-embedding-3-small' is not served here"),
    ({"input": []}, 400, "input: the list is empty"),
    ({"input": ["a", ""]}, 400, "input: text 1 is empty"),
    ({"input": [[1, 2, 3]]}, 400, "token ids are not accepted"),
    ({"dimensions": WIDTH + 1}, 400, f"this model's embeddings have {WIDTH}"),
    ({"dimensions": 0}, 400, "dimensions: Input should be greater than or equal to 1"),
    ({"encoding_format": "hex"}, 400, "encoding_format"),
    ({"extra_body": {"input_type": "question"}}, 400, "input_type='question' is not a prompt of this model"),
    ({"extra_body": {"prompt": "x"}}, 400, "unknown field 'prompt'"),
    ({"input": ["a"] * (LIMITS.max_inputs + 1)}, 413, f"takes at most {LIMITS.max_inputs} per request"),
    ({"input": ["a" * (LIMITS.max_input_chars + 1)]}, 413, f"at most {LIMITS.max_input_chars} per text"),
])
def test_bad_input_gets_a_4xx_naming_the_problem_through_the_openai_client(client, arguments, status, named):
    import openai

    with pytest.raises(openai.APIStatusError) as raised:
        client.embeddings.create(**{"model": SERVED_NAME, "input": TEXTS, **arguments})
    assert raised.value.status_code == status
    assert named in raised.value.body["message"]


DEEP_NESTING = 30_000  # levels of brackets: far past Python's recursion limit, within this server's body cap


@pytest.mark.slow
@pytest.mark.parametrize(("body", "named"), [
    (b'{"model": "c2llm-tiny", "input": ', "the body is not valid JSON"),
    (json.dumps({"model": SERVED_NAME, "input": "a\ud800"}).encode(), "which is not valid Unicode (a lone surrogate)"),
    (b"[1, 2]", "body"),
    (b'{"model": "c2llm-tiny", "input": "caf\xe9"}', "the body is not valid UTF-8 (invalid continuation byte"),
    (b"[" * DEEP_NESTING + b"]" * DEEP_NESTING, "the body nests JSON arrays or objects deeper than the parser reads"),
])
def test_bodies_no_client_would_send_get_a_400(server, body, named):
    status, answer = post(server[1], body)
    assert status == 400 and named in answer["error"]["message"]
    assert answer["error"]["type"] == "invalid_request_error"


@pytest.mark.slow
def test_an_unknown_route_gets_a_404_in_openais_shape_listing_the_routes(server):
    status, answer = post(server[1], b"{}", path="/v1/embedding")
    assert status == 404
    assert answer["error"]["message"].startswith("POST /v1/embedding is not a route of this server; the routes are")


@pytest.mark.slow
def test_bytes_that_are_not_http_get_a_400_in_openais_shape(server):
    host, port = server[1].removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=60) as connection:
        connection.sendall(b"NOT HTTP AT ALL\r\n\r\n")
        answer = b""
        while chunk := connection.recv(65536):
            answer += chunk
    status_line, _, body = answer.partition(b"\r\n\r\n")
    assert status_line.startswith(b"HTTP/1.1 400 ")
    assert json.loads(body)["error"]["message"].startswith("the request is not HTTP/1.1 that this server reads")


DEFAULT_READ_TIMEOUT_S = 30  # python -m serving --read-timeout's default
UNFINISHED_REQUESTS = [  # what a client may send and then go quiet: nothing, half the headers, half the body
    b"",
    b"POST /v1/embeddings HTTP/1.1\r\nHost: localhost\r\n",
    b"POST /v1/embeddings HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: 100\r\n"
    b'\r\n{"model": ',
]
HELD_CONNECTIONS_PER_KIND = 10


@pytest.mark.slow
def test_connections_that_never_finish_a_request_are_closed(server):
    """Each connection sends the start of a request and goes quiet; the server closes every one (reads EOF)."""
    host, port = server[1].removeprefix("http://").split(":")
    connections = []
    try:
        for start in UNFINISHED_REQUESTS * HELD_CONNECTIONS_PER_KIND:
            connection = socket.create_connection((host, int(port)), timeout=DEFAULT_READ_TIMEOUT_S + 60)
            connection.sendall(start)
            connections.append(connection)
        assert all(connection.recv(1024) == b"" for connection in connections)
    finally:
        for connection in connections:
            connection.close()


@pytest.mark.slow
def test_a_bad_request_never_fails_the_requests_batched_with_it(server, client):
    """Requests sent together are embedded together (dynamic batching); the one refused is answered alone."""
    bodies = [{"model": SERVED_NAME, "input": [f"{text} {n}" for text in TEXTS]} for n in range(12)]
    bodies[5]["dimensions"] = WIDTH + 1
    with ThreadPoolExecutor(len(bodies)) as pool:
        answers = list(pool.map(lambda body: post(server[1], json.dumps(body).encode()), bodies))
    assert [status for status, _ in answers] == [200] * 5 + [400] + [200] * 6
    assert all(len(answer["data"]) == len(TEXTS) for status, answer in answers if status == 200)


@pytest.mark.slow
def test_health_and_models_routes(server):
    with urllib.request.urlopen(f"{server[1]}/health", timeout=30) as response:
        assert response.status == 200
    with urllib.request.urlopen(f"{server[1]}/v1/models", timeout=30) as response:
        assert [model["id"] for model in json.loads(response.read())["data"]] == [SERVED_NAME]


@pytest.mark.slow
def test_sigterm_stops_the_server_and_its_workers(server):
    """Last in the module: it stops the shared server."""
    import psutil

    process, url, log = server
    children = psutil.Process(process.pid).children(recursive=True)
    assert children, "LitServe runs its HTTP server and the model in child processes"
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=120) == 0, log.read_text()[-4000:]
    _, alive = psutil.wait_procs(children, timeout=60)
    assert not alive, f"left running: {[child.pid for child in alive]}"
    assert "Traceback" not in log.read_text(), log.read_text()[-4000:]


# A stand-in model whose load and forward pass wait at gates: files the test creates in the folder named by
# GATES_VARIABLE. The model folder carries its own code (remote code), so the stand-in is a copy of the tiny model
# with this appended to it.
GATES_VARIABLE = "C2LLM_TEST_GATES"
GATED_MODEL_CODE = f"""

import os as _os
import pathlib as _pathlib
import time as _time

_GATES = _pathlib.Path(_os.environ["{GATES_VARIABLE}"])


def _wait_at(gate):
    (_GATES / (gate + ".reached")).touch()
    while not (_GATES / (gate + ".open")).exists():
        _time.sleep(0.05)


_load, _forward = C2LLMModel.__init__, C2LLMModel.forward


def _gated_load(self, *args, **kwargs):
    _wait_at("load")
    _load(self, *args, **kwargs)


def _gated_forward(self, *args, **kwargs):
    _wait_at("encode")
    return _forward(self, *args, **kwargs)


C2LLMModel.__init__, C2LLMModel.forward = _gated_load, _gated_forward
"""
GATED_NAME = "c2llm-gated"  # not the tiny model's name: each name has its own copy of the remote code
# How long LitServe let requests in flight run after SIGTERM (LitServer.uvicorn_graceful_timeout's default), which
# cut them off; a request held longer than this must still be answered.
LITSERVE_DEFAULT_DRAIN_S = 30
SIGNAL_DELIVERY_S = 5  # for a signal to reach every process and be acted on
REQUESTS_IN_FLIGHT = 8


def wait_until(condition, what: str, seconds: float = START_SECONDS):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"not {what} after {seconds} s")


def get(url: str) -> tuple[int, str] | None:
    """(status, body) of a GET; None when the connection is refused."""
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except (urllib.error.URLError, ConnectionError):
        return None


def healthy(url: str) -> bool:
    return (get(f"{url}/health") or (None,))[0] == 200


@pytest.fixture
def gated_server(tiny_model_dir, tmp_path):
    """(process, base URL, log path, gates folder) of `python -m serving` on the gated stand-in, in a session of its
    own (a Ctrl+C reaches its whole process group, not pytest); nothing is waited for."""
    gates = tmp_path / "gates"
    gates.mkdir()
    model = shutil.copytree(tiny_model_dir, tmp_path / GATED_NAME)
    with open(model / "modeling_c2llm.py", "a") as code:
        code.write(GATED_MODEL_CODE)
    port, log = free_port(), tmp_path / "server.log"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]), GATES_VARIABLE: str(gates)}
    with open(log, "wb") as output:
        process = subprocess.Popen([sys.executable, "-m", "serving", "--model", str(model), "--port", str(port),
                                    "--accelerator", "cpu"], cwd=tmp_path, env=env, stdout=output,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        yield process, f"http://127.0.0.1:{port}", log, gates
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)


@pytest.mark.slow
def test_the_port_answers_503_while_the_model_loads(gated_server):
    process, url, log, gates = gated_server
    status, _ = wait_until(lambda: get(f"{url}/health"), "answering /health")
    assert status == 503, log.read_text()[-4000:]
    body = json.dumps({"model": GATED_NAME, "input": "x"}).encode()
    status, answer = post(url, body)
    assert status == 503 and answer["error"]["code"] == "model_loading"
    assert "the model is still loading; retry when GET /health answers 200" in answer["error"]["message"]
    (gates / "load.open").touch()
    (gates / "encode.open").touch()
    wait_until(lambda: healthy(url), "healthy")
    status, answer = post(url, body)
    assert status == 200 and len(answer["data"]) == 1


@pytest.mark.slow
def test_a_model_that_fails_to_load_stops_the_server_with_a_message(tiny_model_dir, tmp_path):
    model = shutil.copytree(tiny_model_dir, tmp_path / "c2llm-cut")
    with open(model / "model.safetensors", "r+b") as weights:
        weights.truncate(weights.seek(0, os.SEEK_END) // 2)  # as a copy cut short leaves it
    log = tmp_path / "server.log"
    with open(log, "wb") as output:
        completed = subprocess.run([sys.executable, "-m", "serving", "--model", str(model), "--port",
                                    str(free_port()), "--accelerator", "cpu"], cwd=tmp_path, stdout=output,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, timeout=START_SECONDS,
                                   env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])})
    assert completed.returncode == 1
    last_line = log.read_text().strip().splitlines()[-1]
    assert last_line.startswith("python -m serving: the model worker stopped, with the server"), last_line


def stop_main_process(process: subprocess.Popen) -> None:
    """What a service manager, Docker or `kill` do."""
    process.send_signal(signal.SIGTERM)


def press_ctrl_c(process: subprocess.Popen) -> None:
    """What a terminal does: SIGINT to every process of the group (the server's own session here)."""
    os.killpg(process.pid, signal.SIGINT)


@pytest.mark.slow
@pytest.mark.parametrize(("stop", "hold_s"), [(stop_main_process, LITSERVE_DEFAULT_DRAIN_S + SIGNAL_DELIVERY_S),
                                              (press_ctrl_c, SIGNAL_DELIVERY_S)])
def test_stopping_answers_the_requests_in_flight_then_exits(gated_server, stop, hold_s):
    """Requests held in the forward pass while the server is stopped are answered (SIGTERM: held past LitServe's
    default drain; Ctrl+C: the model worker gets it too), then the server and its workers exit."""
    import psutil

    process, url, log, gates = gated_server
    (gates / "load.open").touch()
    wait_until(lambda: healthy(url), "healthy")
    children = psutil.Process(process.pid).children(recursive=True)
    bodies = [json.dumps({"model": GATED_NAME, "input": [f"{text} {n}" for text in TEXTS]}).encode()
              for n in range(REQUESTS_IN_FLIGHT)]
    with ThreadPoolExecutor(len(bodies)) as pool:
        answers = [pool.submit(post, url, body) for body in bodies]
        wait_until((gates / "encode.reached").exists, "encoding")
        stop(process)
        time.sleep(hold_s)  # the requests stay in the forward pass this long after the signal
        (gates / "encode.open").touch()
        results = [answer.result() for answer in answers]
    assert [status for status, _ in results] == [200] * REQUESTS_IN_FLIGHT, log.read_text()[-4000:]
    assert all(len(answer["data"]) == len(TEXTS) for _, answer in results)
    assert process.wait(timeout=120) == 0, log.read_text()[-4000:]
    _, alive = psutil.wait_procs(children, timeout=60)
    assert not alive, f"left running: {[child.pid for child in alive]}"
    assert "Traceback" not in log.read_text(), log.read_text()[-4000:]
