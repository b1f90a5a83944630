"""Query rewriting for training data: docstring summaries turned into web-search-style queries.

Docstring -> function pairs teach "Return the value of x." style queries; web-search benchmarks (CoSQA) ask
"python get value of x". ``web_style_query`` rewrites one summary; ``web_queries`` rewrites a chosen share of a
dataset's queries, the choice and the template fixed per query by a hash (the same rows every run, no seed).
"""

from __future__ import annotations

import random
import re
import zlib

THIRD_PERSON_VERB = re.compile(r"^([a-z]+?)(e?s)$")  # "returns" -> "return", "fetches" -> "fetch"
WEB_QUERY_WORDS = 12  # CoSQA's web queries are short: about 6-10 words
WEB_QUERY_TEMPLATES = ("python {}", "{} python", "how to {} in python", "{} in python")


def web_style_query(query: str, rng: random.Random) -> str:
    """A docstring summary rewritten as a search-engine query (CoSQA's style: "python check if a variable is
    iterable", "how to make a 2d array in python"): first sentence, lowercase, imperative verb, no final period,
    at most WEB_QUERY_WORDS words, "python" added before or after (template drawn from ``rng``)."""
    sentence = re.split(r"(?<=[.!?])\s", query.strip(), maxsplit=1)[0].rstrip(".!?:;,").lower()
    words = sentence.split()[:WEB_QUERY_WORDS]
    if words:
        verb = THIRD_PERSON_VERB.match(words[0])
        if verb and len(words[0]) > 4 and not words[0].endswith(("ss", "us", "is")):  # not "is", "does", "class"
            stem, suffix = verb.groups()
            words[0] = stem if suffix == "s" or stem.endswith(("ch", "sh", "x", "ss")) else stem + "e"
    text = " ".join(words)
    return rng.choice(WEB_QUERY_TEMPLATES).format(text)


def hash_fraction(text: str, salt: str = "") -> float:
    """A number in [0, 1) fixed by ``text`` (crc32): a per-row choice that needs no seed and survives reruns."""
    return zlib.crc32((salt + text).encode("utf-8")) / 2**32


def web_queries(dataset, fraction: float):
    """``dataset`` with a ``fraction`` of its queries (chosen by hash) rewritten by ``web_style_query``."""
    if fraction <= 0:
        return dataset

    def rewrite(batch: dict[str, list]) -> dict[str, list]:
        batch["query"] = [
            web_style_query(query, random.Random(zlib.crc32(query.encode("utf-8"))))
            if hash_fraction(query, "web") < fraction
            else query
            for query in batch["query"]
        ]
        return batch

    return dataset.map(rewrite, batched=True)


# Leading words of a module or class docstring that say "this is a module" rather than what it is about: "This module
# implements a TCP connector" -> "tcp connector". Applied repeatedly ("This module provides the ...").
TOPIC_LEAD = re.compile(
    r"^(?:(?:this|the)\s+(?:module|file|package|submodule|class|object)\s*(?:provides|implements|contains|defines|"
    r"handles|holds|has|is|are|for)?\s+|(?:module|package|class|object)\s+(?:for|to|that|which|with|containing|"
    r"providing|implementing|representing)\s+|(?:provides|implements|contains|defines|a|an|the)\s+)",
    re.IGNORECASE,
)
TOPIC_QUERY_WORDS = 10  # semble's queries: 6 words at the median
MIN_TOPIC_QUERY_WORDS = 2
HOW_IT_WORKS_FRACTION = 0.3  # 161 of semble's 585 queries start with "how"


def topic_style_query(summary: str) -> str | None:
    """A module or class docstring summary as a short topic query, semble's benchmark style ("connection pooling and
    TCP connector", "how the timer wheel tracks sleep deadlines"): first sentence, lowercase, the "this module
    provides" lead cut, at most TOPIC_QUERY_WORDS words; a HOW_IT_WORKS_FRACTION share (by a hash) asked as "how
    ... works". None when under MIN_TOPIC_QUERY_WORDS words are left."""
    sentence = re.split(r"(?<=[.!?])\s", summary.strip(), maxsplit=1)[0].rstrip(".!?:;,").lower()
    while (cut := TOPIC_LEAD.sub("", sentence, count=1)) != sentence:
        sentence = cut
    words = sentence.split()[:TOPIC_QUERY_WORDS]
    if len(words) < MIN_TOPIC_QUERY_WORDS:
        return None
    text = " ".join(words)
    return f"how {text} works" if hash_fraction(text, "how") < HOW_IT_WORKS_FRACTION else text
