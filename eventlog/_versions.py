"""The stream versions a writer remembers between groups, so an append need not read its own."""

from __future__ import annotations

import itertools


def remember(known: dict[str, int], versions: dict[str, int], limit: int) -> None:
    """Note `versions` in `known` as the streams written last (`known` keeps them least recently
    written first); beyond `limit` streams, forget the half written least recently (their next
    append reads its version again)."""
    for stream, version in versions.items():
        known.pop(stream, None)
        known[stream] = version
    if len(known) > limit:
        for stream in list(itertools.islice(known, len(known) - limit // 2)):
            del known[stream]
