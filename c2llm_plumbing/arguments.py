"""argparse `type=` checks shared by every command: a bad value is a usage error naming the fix, before any work."""

from __future__ import annotations

import argparse


def _parsed(text: str, parse, kind: str, fix: str):
    """`parse(text)`, or a usage error saying the text is not `kind` and how to fix it."""
    try:
        return parse(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not {kind}; {fix}") from None


def positive_int(text: str) -> int:
    """A whole number from 1 (counts, sizes, lengths)."""
    value = _parsed(text, int, "a whole number", "pass 1 or more")
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is less than 1; pass 1 or more")
    return value


def share(text: str) -> float:
    """An option's value from 0 to 1 (a share of a whole)."""
    value = _parsed(text, float, "a number", "pass a share from 0 to 1")
    if not 0.0 <= value <= 1.0:  # also refuses nan, which compares false with both ends
        raise argparse.ArgumentTypeError(f"{value:g} is not a share: pass a number from 0 to 1, such as 0.2")
    return value


def positive_seconds(text: str) -> float:
    """A number of seconds above 0 (timeouts, waits)."""
    value = _parsed(text, float, "a number", "pass a number of seconds")
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{value} is not above 0; pass a number of seconds above 0")
    return value
