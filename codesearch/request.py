"""What a search asks for, typed once for every front door.

`SearchRequest` is the MCP `search` tool's signature (the SDK advertises its enums and bounds in the tool's input
schema and refuses unknown names and wrong types) and the source of the command line's search options (their help,
choices and defaults: `codesearch/__main__.py` makes them from the fields, so the two cannot drift). It travels whole
from either front door to the ranking (codesearch.searcher.FolderSearch.search, codesearch.ranking.rank).
`StatusRequest` is `index_status`'s. Strict: `true` and `"5"` are not numbers, `"*.py"` is not a list; unknown
arguments are refused, never ignored.
"""

from __future__ import annotations

import difflib
from typing import Annotated, Literal, get_args

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from c2llm_plumbing.text import valid_unicode
from codesearch.ranking import DEFAULT_RANKING, FUSION_DEPTH, RANKINGS

# The model reads a query's first max_seq_length tokens (128 by default, a few hundred characters) and a pasted
# function is a few thousand; longer input only costs time (tokenizing, BM25 over every word, the query cache).
MAX_QUERY_CHARS = 10_000
# Hybrid ranking fuses the best FUSION_DEPTH rows of each list: hits past that are ranked by one list only.
MAX_TOP_K = FUSION_DEPTH
DEFAULT_TOP_K = 10
# Docs, examples and generated files rank below source: never lower on the quality set, higher on whole source
# trees (codesearch/reports/ranking.md)
DEFAULT_NON_CODE = "demote"

Ranking = Literal[RANKINGS]  # one list of rankings: codesearch.ranking's
Demotion = Literal["demote", "keep"]


def query_text(text: str) -> str:
    if not text.strip():
        raise ValueError("the query is empty; pass what you are looking for, e.g. 'parse a config file'")
    if len(text) > MAX_QUERY_CHARS:
        raise ValueError(f"the query is {len(text):,} characters; pass at most {MAX_QUERY_CHARS:,} (describe the code "
                         "or paste a few lines of it)")
    try:
        return valid_unicode(text)
    except ValueError as error:
        raise ValueError(f"the query {error}") from None


Text = Annotated[str, AfterValidator(valid_unicode)]
Globs = list[Text] | None


# Relative to the served folder; codesearch.mcp_server refuses any that resolves outside it.
RelativePath = Annotated[Text | None, Field(description="a file or folder inside the served folder, relative to it "
                                                        "(default: all of it); paths leading outside it are refused")]


def meant(name: str, names) -> str | None:
    """The argument `name` was probably meant as: the closest of `names` in spelling (difflib: 'topK' for top_k),
    else one that has it as a part of its name ('k' for top_k, which difflib finds too far apart); None if neither."""
    close = difflib.get_close_matches(name, names, n=1)
    parts = [known for known in names if name.lower() in known.split("_")]
    return (close or parts or [None])[0]


class Request(BaseModel):
    """Strict, and unknown arguments refused with the names that exist (pydantic's extra="forbid" alone says only
    "Extra inputs are not permitted"; it stays, so the schema advertises additionalProperties: false)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    @model_validator(mode="before")
    @classmethod
    def known_arguments(cls, data):
        if not isinstance(data, dict):
            return data
        errors = []
        for name in data:
            if name not in cls.model_fields:
                close = meant(str(name), cls.model_fields)
                hint = f"did you mean {close!r}? " if close else ""
                message = f"unknown argument {name!r}; {hint}the arguments are {', '.join(cls.model_fields)}"
                # "{message}" with the text as context: braces in a client's argument name are not a template
                errors.append({"type": PydanticCustomError("unknown_argument", "{message}", {"message": message}),
                               "loc": (str(name),), "input": data[name]})
        if errors:
            # A ValidationError, not a ValueError: pydantic keeps its errors' locations, so each names its argument
            # (what the MCP SDK logs), where a model validator's ValueError has no location at all.
            raise ValidationError.from_exception_data(cls.__name__, errors)
        return data


class StatusRequest(Request):
    """What `index_status` reports on."""

    path: RelativePath = None


class SearchRequest(Request):
    """One search: what to find, where, how to rank it, which hits to keep."""

    query: Annotated[str, AfterValidator(query_text)] = Field(
        description=f"what the code does, in plain words or code (at most {MAX_QUERY_CHARS:,} characters)")
    top_k: int = Field(DEFAULT_TOP_K, ge=1, le=MAX_TOP_K,
                       description=f"how many hits (files, each with its places) to return, at most {MAX_TOP_K}")
    ranking: Ranking = Field(DEFAULT_RANKING, description="dense (embeddings), bm25 (words) or hybrid (both, their "
                                                          "scores fused)")
    tests: Demotion = Field("demote", description="demote: rank pieces of test files lower; keep: as any other")
    non_code: Demotion = Field(DEFAULT_NON_CODE, description="demote: rank documentation (.md/.rst/.txt, docs/), "
                               "examples (examples/, demos/) and generated files (*_pb2.py, *.min.js, ...) below "
                               "source; keep: as source")
    path: RelativePath = None
    include: Globs = Field(None, description="only hits whose relative path or file name matches one of these "
                                             "globs ('*.py', 'src/*')")
    exclude: Globs = Field(None, description="no hits whose relative path or file name matches one of these globs")


def choices(field: str) -> tuple[str, ...]:
    """The values a Literal field of SearchRequest allows, in their declared order."""
    return get_args(SearchRequest.model_fields[field].annotation)
