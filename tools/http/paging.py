"""The cursor and page size of a paged list, as a request names them (`?after=&limit=`)."""

from __future__ import annotations

from typing import Any

from projections import LIST_PAGE, MAX_LIST_PAGE

from .wire import WireError

MAX_CURSOR = 2**62  # past any seq a log reaches: a larger one names no page


def page_query(params: Any, default: int = LIST_PAGE, most: int = MAX_LIST_PAGE) -> tuple[int | None, int]:
    """`after` (the `next` of a previous page; absent: from the start) and `limit` (default
    `default`, at most `most`: more is read as `most`). 400 for anything but whole numbers
    (ASCII digits `int()` reads), and for a cursor past any seq."""
    raw_after, raw_limit = params.get("after") or "", params.get("limit") or ""
    after = whole(raw_after) if raw_after else None
    if raw_after and (after is None or after > MAX_CURSOR):
        raise WireError(400, "after must be the `next` cursor of a previous page (a whole number, a seq)")
    limit = whole(raw_limit) if raw_limit else default
    if limit is None or limit < 1:
        raise WireError(400, f"limit must be a whole number from 1 (at most {most} are returned)")
    return after, min(limit, most)


def whole(text: str) -> int | None:
    """The whole number `text` spells in ASCII digits, or None (a digit such as `²`, a sign, a
    point, or more digits than `int()` reads)."""
    if not (text.isascii() and text.isdigit()):
        return None
    try:
        return int(text)
    except ValueError:  # more digits than int() converts
        return None
