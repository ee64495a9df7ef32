"""The strength of a secret token: the bits its length and alphabet can carry, repetition refused.

The estimate is an upper bound on what a token someone chose can hold: its length times
log2 of the size of the character classes it draws from (digits 10, lower-case 26,
upper-case 26, anything else 32), a token made of a shorter part repeated counting that part
once. A token that is mostly one character, or uses fewer than MIN_DISTINCT of them, is
refused whatever its length. `secrets.token_hex(16)` (128 random bits) always passes, but
for the 1 in 3 million draws made of digits alone.
"""

from __future__ import annotations

import math
import string
from collections import Counter

MIN_BITS = 128
MIN_DISTINCT = 8
MAKE_ONE = "python -c 'import secrets; print(secrets.token_hex(16))'"
# The character classes and their sizes; any character outside the first three counts as "other".
_CLASSES = ((frozenset(string.digits), 10), (frozenset(string.ascii_lowercase), 26),
            (frozenset(string.ascii_uppercase), 26))  # fmt: skip
_OTHER = len(string.punctuation)


def estimated_bits(token: str) -> float:
    """At most how many bits of secret `token` carries, from its length and the classes it uses."""
    if not token:
        return 0.0
    used = set(token)
    alphabet = sum(size for chars, size in _CLASSES if used & chars)
    if any(not any(c in chars for chars, _ in _CLASSES) for c in used):
        alphabet += _OTHER
    return _unit_length(token) * math.log2(alphabet) if alphabet > 1 else 0.0


def weakness(token: str) -> str | None:
    """Why `token` is too weak to guard anything (never quoting it), or None when it is strong enough."""
    distinct = len(set(token))
    if distinct < MIN_DISTINCT:
        return f"it uses {distinct} different characters ({MIN_DISTINCT} or more needed)"
    if Counter(token).most_common(1)[0][1] * 2 > len(token):
        return "one character makes up more than half of it"
    bits = estimated_bits(token)
    if bits < MIN_BITS:
        repeats = " (it repeats a shorter part)" if _unit_length(token) < len(token) else ""
        return f"it carries at most about {bits:.0f} bits{repeats}; {MIN_BITS} or more are needed"
    return None


def _unit_length(token: str) -> int:
    """The length of the shortest part `token` repeats (at least twice), else its own length."""
    # The prefix function: the longest proper prefix of token[:i+1] that is also its suffix.
    border = [0] * len(token)
    k = 0
    for i in range(1, len(token)):
        while k and token[i] != token[k]:
            k = border[k - 1]
        if token[i] == token[k]:
            k += 1
        border[i] = k
    period = len(token) - border[-1]
    return period if period * 2 <= len(token) else len(token)
