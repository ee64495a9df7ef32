"""Token strength: about 128 bits from length and alphabet, and no trivially repetitive token."""

from __future__ import annotations

import math
import secrets

import pytest

from tools._tokens import MAKE_ONE, MIN_BITS, estimated_bits, weakness

WEAK = {
    "passwordpassword": "a dictionary word twice",
    "0123456789012345678901234567890123456789": "digits only, repeating",
    "abcdefghabcdefghabcdefghabcdefghabcdefgh": "a short run of letters, repeated",
    "investigate-" + "x" * 24: "mostly one character",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa": "one character",
    "ababababababababababababababababababab": "two characters",
    "0123456789abcdef": "16 hex characters: 64 bits at best",
    "operatortokenabc": "16 lower-case letters: about 75 bits",
}


@pytest.mark.parametrize("token", WEAK, ids=list(WEAK.values()))
def test_weak_tokens_are_refused(token):
    assert weakness(token) is not None


def test_the_reason_never_quotes_the_token():
    for token in WEAK:
        reason = weakness(token)
        assert reason is not None
        assert token not in reason
        assert token[:8] not in reason


def test_the_recommended_recipe_makes_strong_tokens():
    assert MAKE_ONE == "python -c 'import secrets; print(secrets.token_hex(16))'"
    # token_hex(16) is 128 random bits; its 32 characters use digits and lower-case letters.
    # Not one in this many draws is refused: all 32 characters digits is a 1 in 3 million draw.
    refused = [t for t in (secrets.token_hex(16) for _ in range(2000)) if weakness(t) is not None]
    assert refused == []


@pytest.mark.parametrize(
    "token",
    [
        "cli-test-operator-token-0123456789abcdef",
        "operator-0123456789abcdef-secret",
        secrets.token_urlsafe(32),
        "Zq8#vT2!mP5@xL9$wR4%kN7^",
    ],
)
def test_long_tokens_of_a_varied_alphabet_are_strong(token):
    assert weakness(token) is None


def test_bits_are_length_times_the_log_of_the_classes_used():
    assert estimated_bits("0" * 0) == 0
    assert estimated_bits("0123456789") == pytest.approx(10 * math.log2(10))
    assert estimated_bits("abcdefghij0123456789") == pytest.approx(20 * math.log2(36))
    assert estimated_bits("abcdefghijABCDEFGHIJ") == pytest.approx(20 * math.log2(52))
    assert estimated_bits("abcdefghij-_") == pytest.approx(12 * math.log2(26 + 32))
    # A token that repeats a shorter part counts that part once.
    assert estimated_bits("passwordpassword") == pytest.approx(8 * math.log2(26))
    assert estimated_bits("passwordpassword") < MIN_BITS
