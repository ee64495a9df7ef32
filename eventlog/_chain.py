"""The hash chain: each record's hash covers the previous hash and the record's canonical bytes."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable, Iterable

import orjson

from ._record import GENESIS_HASH, Head, Record, VerifyResult, lenient_loads

Hasher = Callable[[str, bytes], str]


def canonical_bytes(
    seq: int,
    stream: str,
    version: int,
    type_name: str,
    schema: int,
    data_json: bytes,
    meta_json: bytes,
    event_id: str,
    recorded_us: int,
) -> bytes:
    """The bytes a record's hash covers.

    The header is a JSON array and `data`/`meta` are JSON documents, none of which can hold
    a raw 0x1E byte, so the separator makes the encoding unambiguous.
    """
    header = orjson.dumps([seq, stream, version, type_name, schema, event_id, recorded_us])
    return header + b"\x1e" + data_json + b"\x1e" + meta_json


def make_hasher(key: bytes | None = None) -> Hasher:
    """SHA-256 over prev_hash + canonical bytes, or HMAC-SHA-256 when a key is given."""
    if key is None:

        def plain(prev_hash: str, body: bytes) -> str:
            return hashlib.sha256(prev_hash.encode("ascii") + body).hexdigest()

        return plain

    def keyed(prev_hash: str, body: bytes) -> str:
        return hmac.new(key, prev_hash.encode("ascii") + body, hashlib.sha256).hexdigest()

    return keyed


Sealer = Callable[[bytes], str]


def make_sealer(key: bytes | None) -> Sealer | None:
    """HMAC-SHA-256 under a key derived from the log's HMAC key, for artefacts derived from the
    log (view snapshots); None for an unkeyed log, whose artefacts cannot be authenticated.

    The derived key is not the chain's key, so a sealed artefact can never pass for a record.
    """
    if key is None:
        return None
    derived = hmac.new(key, b"flightlog derived artefacts", hashlib.sha256).digest()

    def seal(message: bytes) -> str:
        return hmac.new(derived, message, hashlib.sha256).hexdigest()

    return seal


def walk_chain(
    rows: Iterable[tuple[int, str, int, str, int, bytes, bytes, str, int, str, str]],
    hasher: Hasher,
    anchor: Head | None = None,
    progress: Callable[[int], object] | None = None,
) -> VerifyResult:
    """Walk raw rows in seq order and report the first record that breaks the chain."""
    expected_seq = 1
    prev = GENESIS_HASH
    checked = 0
    anchor_seen = anchor is None or anchor.seq == 0
    for row in rows:
        seq, stream, version, type_name, schema, data, meta, event_id, rec_us, prev_hash, h = row
        if seq != expected_seq:
            reason = f"seq {expected_seq} is missing (next stored seq is {seq})"
            return VerifyResult(False, checked, expected_seq, reason)
        if prev_hash != prev:
            return VerifyResult(False, checked, seq, "prev_hash does not match the previous hash")
        body = canonical_bytes(
            seq, stream, version, type_name, schema, _blob(data), _blob(meta), event_id, rec_us
        )
        if hasher(prev, body) != h:
            return VerifyResult(False, checked, seq, "hash does not match the record's content")
        if anchor is not None and seq == anchor.seq:
            if h != anchor.hash:
                return VerifyResult(False, checked, seq, "hash differs from the anchor")
            anchor_seen = True
        prev = h
        checked += 1
        expected_seq += 1
        if progress is not None and checked % 10_000 == 0:
            progress(checked)
    if progress is not None:
        progress(checked)
    head = Head(expected_seq - 1, prev)
    if not anchor_seen:
        assert anchor is not None
        reason = f"log ends at seq {head.seq}, before the anchor at seq {anchor.seq}"
        return VerifyResult(False, checked, head.seq + 1, reason, head)
    return VerifyResult(True, checked, None, "", head)


def _blob(value: bytes | str) -> bytes:
    """A stored data or meta value as bytes.

    The log writes BLOBs, but a row edited by hand (the sqlite3 shell, say) holds TEXT: that
    must read, and fail verification by its hash, rather than crash the reader.
    """
    return value.encode() if isinstance(value, str) else bytes(value)


def record_from_row(
    row: tuple[int, str, int, str, int, bytes, bytes, str, int, str, str],
) -> Record:
    """A Record from a raw row, decoding the data."""
    seq, stream, version, type_name, schema, data, meta, event_id, rec_us, prev_hash, h = row
    try:
        parsed = orjson.loads(data)
    except orjson.JSONDecodeError:  # a hand edit: the record reads, and every reader skips it
        parsed = lenient_loads(data)
    # tuple.__new__ builds the same Record without the NamedTuple's Python-level __new__: this
    # runs once per record read, and that call was a sixth of the cost of reading one.
    return _new_tuple(
        Record,
        (
            seq,
            stream,
            version,
            type_name,
            schema,
            parsed,
            meta if type(meta) is bytes else _blob(meta),
            event_id,
            rec_us,
            prev_hash,
            h,
        ),
    )


_new_tuple = tuple.__new__
