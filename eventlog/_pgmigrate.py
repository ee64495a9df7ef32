"""The named migrations of a PostgreSQL log, and applying them.

`0001_create_events` makes the events table and the writer row every writer locks first.
`0002_run_starts_index` and `0003_approval_indexes` index the records that start a run and
approvals' records; `0004_data_search` indexes data for `seqs_containing` where pg_trgm can
be had. `0005_group_commit` adds the two functions the write path calls (see `_pgwrite`):
a group of appends is one statement, the writer row locked inside it.
`0006_data_search_off_the_write_path` replaces the trigram index on `events` (kept by every
append, under the writer row) with one on a table of its own, `events_data_search`, which
searches catch up (see `PostgresLog.seqs_containing`).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import psycopg
from psycopg import sql

from ._pgconn import Conn
from ._record import APPROVAL_FILTER, RUN_START_FILTER

MIGRATIONS: list[tuple[str, tuple[str, ...]]] = [
    (
        "0001_create_events",
        (
            """
            CREATE TABLE events (
                seq         BIGINT  PRIMARY KEY,
                stream      TEXT    NOT NULL,
                version     BIGINT  NOT NULL,
                type        TEXT    NOT NULL,
                schema      INTEGER NOT NULL,
                data        BYTEA   NOT NULL,
                meta        BYTEA   NOT NULL,
                event_id    TEXT    NOT NULL UNIQUE,
                recorded_at BIGINT  NOT NULL,
                prev_hash   TEXT    NOT NULL,
                hash        TEXT    NOT NULL,
                UNIQUE (stream, version)
            )
            """,
            "CREATE TABLE events_writer (id SMALLINT PRIMARY KEY CHECK (id = 1))",
            "INSERT INTO events_writer (id) VALUES (1)",
        ),
    ),
    (
        "0002_run_starts_index",
        (
            # An index expression must be IMMUTABLE; convert_from is only STABLE because of its
            # encoding name, which is fixed here.
            "CREATE FUNCTION flightlog_run_id(data BYTEA) RETURNS TEXT LANGUAGE sql IMMUTABLE "
            "PARALLEL SAFE AS $$ SELECT convert_from(data, 'UTF8')::jsonb ->> 'run_id' $$",
            f"CREATE INDEX events_run_starts ON events (flightlog_run_id(data)) WHERE {RUN_START_FILTER}",
        ),
    ),
    (
        "0003_approval_indexes",
        (
            "CREATE FUNCTION flightlog_approval_id(data BYTEA) RETURNS TEXT LANGUAGE sql IMMUTABLE "
            "PARALLEL SAFE AS $$ SELECT convert_from(data, 'UTF8')::jsonb ->> 'approval_id' $$",
            f"CREATE INDEX events_approval_seqs ON events (seq) WHERE {APPROVAL_FILTER}",
            "CREATE INDEX events_approval_ids ON events (flightlog_approval_id(data), seq) "
            f"WHERE {APPROVAL_FILTER}",
        ),
    ),
    (
        "0004_data_search",
        (
            "CREATE FUNCTION flightlog_data_text(data BYTEA) RETURNS TEXT LANGUAGE sql IMMUTABLE "
            "PARALLEL SAFE AS $$ SELECT convert_from(data, 'UTF8') $$",
            # A trigram index answers ILIKE '%text%' as the scan did, any substring, and is
            # kept by PostgreSQL in the inserting transaction. pg_trgm ships with PostgreSQL
            # but creating it may need a privilege this role lacks: then searches scan.
            """
            DO $$
            DECLARE
                home TEXT;
            BEGIN
                BEGIN
                    CREATE EXTENSION IF NOT EXISTS pg_trgm;
                EXCEPTION WHEN OTHERS THEN
                    NULL;
                END;
                SELECT n.nspname INTO home FROM pg_extension e
                    JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
                IF home IS NOT NULL THEN
                    EXECUTE format('CREATE INDEX events_data_search ON events '
                                   'USING gin (flightlog_data_text(data) %I.gin_trgm_ops)', home);
                END IF;
            END
            $$
            """,
        ),
    ),
    (
        "0005_group_commit",
        (
            # The writer's lock and the head in one call: the writer row is locked (and stays
            # locked until COMMIT, as every writer's since 0001), then the head and each given
            # stream's version are read, each statement with a snapshot taken after the lock.
            """
            CREATE FUNCTION flightlog_writer_head(
                p_streams JSON,
                OUT head_seq BIGINT, OUT head_hash TEXT, OUT head_us BIGINT, OUT versions BIGINT[]
            )
            LANGUAGE plpgsql AS $$
            DECLARE
                names TEXT[] := ARRAY(
                    SELECT s.name FROM json_array_elements_text(p_streams) WITH ORDINALITY AS s(name, n)
                    ORDER BY s.n
                );
                latest BIGINT;
            BEGIN
                PERFORM 1 FROM events_writer WHERE id = 1 FOR UPDATE;
                SELECT e.seq, e.hash, e.recorded_at INTO head_seq, head_hash, head_us
                    FROM events e ORDER BY e.seq DESC LIMIT 1;
                IF NOT FOUND THEN
                    head_seq := 0;
                    head_hash := repeat('0', 64);
                    head_us := 0;
                END IF;
                -- One simple query per stream: its plan is cached, where one query over all
                -- of them would be planned again at every call.
                versions := array_fill(0::BIGINT, ARRAY[cardinality(names)]);
                FOR i IN 1 .. cardinality(names) LOOP
                    latest := NULL;
                    SELECT e.version INTO latest FROM events e
                        WHERE e.stream = names[i] ORDER BY e.version DESC LIMIT 1;
                    versions[i] := coalesce(latest, 0);
                END LOOP;
            END
            $$
            """,
            # A whole group in one statement: rows chained by the writer onto the head it
            # names, checked against the head and stream versions found under the lock, go in
            # with one INSERT (seq and prev_hash follow from the head), and followers are
            # notified. When anything differs:
            # - with p_requests (each request's stream, expectation and event count) and the
            #   pieces of each record's canonical header around seq, version and time (p_mid,
            #   p_tail), the group is chained again here, under the row, onto the head found,
            #   if every expectation holds there; the answer is that head, the time and the
            #   versions used, and the last hash (the writer checks it against its own);
            # - else nothing is written, and the answer is the head and versions found, with
            #   no last hash (the writer takes the row itself and chains again);
            # - with p_strict (the caller held the row already, so nothing can differ) it is
            #   an error.
            # The rows come as JSON (parsed once, in C) but for data, meta and the header
            # pieces: bytes, exactly as the hash covers them, whatever the database's encoding.
            """
            CREATE FUNCTION flightlog_append(
                p_after_seq BIGINT, p_after_hash TEXT, p_streams JSON, p_starts JSON, p_rows JSON,
                p_data BYTEA[], p_meta BYTEA[], p_recorded_at BIGINT, p_channel TEXT, p_strict BOOLEAN,
                p_requests JSON, p_mid BYTEA[], p_tail BYTEA[]
            )
            RETURNS TABLE (head_seq BIGINT, head_hash TEXT, head_us BIGINT, versions BIGINT[], last_hash TEXT)
            LANGUAGE plpgsql AS $$
            DECLARE
                h RECORD;
                starts BIGINT[] := ARRAY(
                    SELECT s.v::BIGINT FROM json_array_elements_text(p_starts) WITH ORDINALITY AS s(v, n)
                    ORDER BY s.n
                );
                written BIGINT;
                sep CONSTANT BYTEA := decode('1e', 'hex');
                req RECORD;
                held BIGINT[];  -- each stream's version as the group goes
                rows_n INTEGER := coalesce(cardinality(p_data), 0);
                seqs BIGINT[] := array_fill(0::BIGINT, ARRAY[rows_n]);
                vers BIGINT[] := array_fill(0::BIGINT, ARRAY[rows_n]);
                prevs TEXT[] := array_fill(''::TEXT, ARRAY[rows_n]);
                hashes TEXT[] := array_fill(''::TEXT, ARRAY[rows_n]);
                seq BIGINT;
                prev TEXT;
                now_us BIGINT;
                v BIGINT;
                holds BOOLEAN;
                i INTEGER := 0;
            BEGIN
                h := flightlog_writer_head(p_streams);
                IF h.head_seq = p_after_seq AND h.head_hash = p_after_hash
                   AND h.head_us <= p_recorded_at AND h.versions = starts THEN
                    INSERT INTO events (
                        seq, stream, version, type, schema, data, meta, event_id, recorded_at, prev_hash, hash
                    )
                    SELECT p_after_seq + r.n, r.stream, r.version, r.type, r.schema, p_data[r.n::INTEGER],
                        p_meta[r.n::INTEGER], r.event_id, p_recorded_at,
                        coalesce(lag(r.hash) OVER (ORDER BY r.n), p_after_hash), r.hash
                    FROM ROWS FROM (
                        json_to_recordset(p_rows) AS (
                            stream TEXT, version BIGINT, type TEXT, schema INTEGER, event_id TEXT, hash TEXT
                        )
                    ) WITH ORDINALITY AS r(stream, version, type, schema, event_id, hash, n);
                    GET DIAGNOSTICS written = ROW_COUNT;
                    IF written > 0 THEN
                        PERFORM pg_notify(p_channel, (p_after_seq + written)::text);
                    END IF;
                    RETURN;
                END IF;
                IF p_strict THEN
                    RAISE EXCEPTION 'the head moved from seq % while the writer row was held', p_after_seq;
                END IF;
                IF p_requests IS NULL THEN
                    RETURN QUERY SELECT h.head_seq, h.head_hash, h.head_us, h.versions, NULL::TEXT;
                    RETURN;
                END IF;
                held := h.versions;
                seq := h.head_seq;
                prev := h.head_hash;
                now_us := greatest(p_recorded_at, h.head_us);
                FOR req IN
                    SELECT (x.v ->> 0)::INTEGER AS stream, x.v ->> 1 AS expect, (x.v ->> 2)::INTEGER AS events
                    FROM json_array_elements(p_requests) WITH ORDINALITY AS x(v, n) ORDER BY x.n
                LOOP
                    v := held[req.stream];
                    holds := CASE req.expect
                        WHEN 'any' THEN true
                        WHEN 'no_stream' THEN v = 0
                        WHEN 'exists' THEN v > 0
                        ELSE v = req.expect::BIGINT
                    END;
                    IF NOT holds THEN  -- refused here: the writer settles it under the row
                        RETURN QUERY SELECT h.head_seq, h.head_hash, h.head_us, h.versions, NULL::TEXT;
                        RETURN;
                    END IF;
                    FOR k IN 1 .. req.events LOOP
                        i := i + 1;
                        seq := seq + 1;
                        v := v + 1;
                        seqs[i] := seq;
                        vers[i] := v;
                        prevs[i] := prev;
                        prev := encode(sha256(
                            convert_to(prev || '[' || seq, 'UTF8') || p_mid[i] || convert_to(v::TEXT, 'UTF8')
                            || p_tail[i] || convert_to(now_us || ']', 'UTF8') || sep || p_data[i] || sep
                            || p_meta[i]
                        ), 'hex');
                        hashes[i] := prev;
                    END LOOP;
                    held[req.stream] := v;
                END LOOP;
                INSERT INTO events
                    (seq, stream, version, type, schema, data, meta, event_id, recorded_at, prev_hash, hash)
                SELECT seqs[r.n::INTEGER], r.stream, vers[r.n::INTEGER], r.type, r.schema,
                    p_data[r.n::INTEGER], p_meta[r.n::INTEGER], r.event_id, now_us, prevs[r.n::INTEGER],
                    hashes[r.n::INTEGER]
                FROM ROWS FROM (
                    json_to_recordset(p_rows) AS (stream TEXT, type TEXT, schema INTEGER, event_id TEXT)
                ) WITH ORDINALITY AS r(stream, type, schema, event_id, n);
                IF i > 0 THEN
                    PERFORM pg_notify(p_channel, seq::text);
                END IF;
                RETURN QUERY SELECT h.head_seq, h.head_hash, now_us, h.versions, prev;
            END
            $$
            """,
        ),
    ),
    (
        "0006_data_search_off_the_write_path",
        (
            # Only where 0004 made the index: without pg_trgm, searches scan as they did.
            # The table holds the data text of records 1..N (a prefix: see seqs_containing).
            """
            DO $$
            DECLARE
                home TEXT;
            BEGIN
                SELECT n.nspname INTO home FROM pg_extension e
                    JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
                IF home IS NOT NULL AND to_regclass('events_data_search') IS NOT NULL THEN
                    DROP INDEX events_data_search;
                    CREATE TABLE events_data_search (seq BIGINT PRIMARY KEY, data TEXT NOT NULL);
                    INSERT INTO events_data_search (seq, data)
                        SELECT seq, flightlog_data_text(data) FROM events;
                    EXECUTE format('CREATE INDEX events_data_search_trgm ON events_data_search '
                                   'USING gin (data %I.gin_trgm_ops)', home);
                END IF;
            END
            $$
            """,
        ),
    ),
]

# Migrations a read-only open may do without: they only add an index or a function of the
# write path, and reads are answered without them (more slowly, for the indexes).
READ_OPTIONAL = frozenset(
    {
        "0002_run_starts_index",
        "0003_approval_indexes",
        "0004_data_search",
        "0005_group_commit",
        "0006_data_search_off_the_write_path",
    }
)

# pg_advisory_xact_lock key: serialises migrations of processes that open a log at once.
_MIGRATION_LOCK = int.from_bytes(hashlib.sha256(b"flightlog migrations").digest()[:8], "big", signed=True)


def migrate(conn: Conn) -> str:
    """Create the schema if missing, apply pending named migrations, and return the schema."""
    if not pending(conn):
        return str(scalar(conn, "SELECT current_schema()"))
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        schema = scalar(conn, "SELECT current_schema()")
        if schema is None:
            schema = _first_on_search_path(conn)
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        if scalar(conn, "SELECT to_regclass('schema_migrations')") is None:
            conn.execute(
                "CREATE TABLE schema_migrations "
                "(name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
        for name in pending(conn):
            for statement in dict(MIGRATIONS)[name]:
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations (name) VALUES (%s)", (name,))
    return str(schema)


def pending(conn: Conn) -> list[str]:
    """The names of the migrations not yet applied to the log on `conn`'s search_path."""
    if scalar(conn, "SELECT current_schema()") is None:
        return [name for name, _ in MIGRATIONS]
    if scalar(conn, "SELECT to_regclass('schema_migrations')") is None:
        return [name for name, _ in MIGRATIONS]
    applied = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}
    return [name for name, _ in MIGRATIONS if name not in applied]


def scalar(conn: Conn, query: str) -> Any:
    row = conn.execute(query).fetchone()
    return row[0] if row else None


_PATH_ITEM = re.compile(r'\s*("(?:[^"]|"")*"|[^,]*?)\s*(?:,|$)')


def _first_on_search_path(conn: Conn) -> str:
    path = str(scalar(conn, "SELECT current_setting('search_path')"))
    first = _PATH_ITEM.match(path)
    name = first.group(1) if first else ""
    if name.startswith('"'):
        name = name[1:-1].replace('""', '"')
    if name == "$user":
        name = str(scalar(conn, "SELECT current_user"))
    if not name:
        raise psycopg.ProgrammingError("the search_path names no schema to create the log in")
    return name
