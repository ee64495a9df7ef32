"""The snapshot store of a PostgreSQL log: the `snapshots` and `run_checkpoints` tables in its schema."""

from __future__ import annotations

import builtins
import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

from ._errors import ReadOnlyDatabaseError, StorageError
from ._pgconn import Conn, Connector
from ._snapshot import RunCheckpointRow, Snapshot, SnapshotStore

_COLUMNS = "name, version, seq, hash, digest, size, mac"
_CREATE = """
    CREATE TABLE IF NOT EXISTS snapshots (
        name    TEXT    NOT NULL,
        version INTEGER NOT NULL,
        seq     BIGINT  NOT NULL,
        hash    TEXT    NOT NULL,
        digest  TEXT    NOT NULL,
        size    BIGINT  NOT NULL,
        data    BYTEA,
        PRIMARY KEY (name, version, seq)
    );
    ALTER TABLE snapshots ADD COLUMN IF NOT EXISTS mac TEXT NOT NULL DEFAULT '';
    CREATE TABLE IF NOT EXISTS run_checkpoints (
        stream  TEXT    NOT NULL,
        version INTEGER NOT NULL,
        seq     BIGINT  NOT NULL,
        hash    TEXT    NOT NULL,
        data    BYTEA   NOT NULL,
        mac     TEXT    NOT NULL DEFAULT '',
        PRIMARY KEY (stream, version)
    )
"""
_HAS_MAC = (
    "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
    "AND table_name = 'snapshots' AND column_name = 'mac'"
)
# pg_advisory_xact_lock key: serialises the table's creation by processes opening the store at once.
_LOCK = int.from_bytes(hashlib.sha256(b"flightlog snapshots").digest()[:8], "big", signed=True)


class PostgresSnapshotStore(SnapshotStore):
    """Snapshots next to the events of a PostgreSQL log; a short-lived connection per call."""

    def __init__(self, connector: Connector, *, readonly: bool = False) -> None:
        self._connector = connector
        self.readonly = readonly
        self._ready = False
        self._sealed = True  # whether the table has the `mac` column (one made here always has)
        self._lock = threading.Lock()

    @contextmanager
    def _connection(self) -> Iterator[Conn]:
        conn = self._connector.connect()
        try:
            if not self._ready and not self.readonly:
                with self._lock, conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
                    conn.execute(_CREATE)
                self._ready = True
            yield conn
        except psycopg.Error as e:
            raise self._connector.translate(e) from e
        finally:
            conn.close()

    def _rows(self, query: str, params: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        with self._connection() as conn:
            if not self._ready:  # read-only: it creates nothing, so it looks until the table is there
                if conn.execute("SELECT to_regclass('snapshots')").fetchone() == (None,):
                    return []  # no table yet is no snapshot yet
                # Nor does it add columns: a table from before the MAC reads as unsealed.
                self._sealed = conn.execute(_HAS_MAC).fetchone() is not None
                self._ready = True
            if not self._sealed:
                query = query.replace(_COLUMNS, _COLUMNS.replace(", mac", ", '' AS mac"))
            return conn.execute(query, params).fetchall()

    def _write(self, query: str, params: tuple[Any, ...]) -> int:
        if self.readonly:
            raise ReadOnlyDatabaseError(
                self._connector.safe_url, "opened read-only: snapshots are not stored"
            )
        with self._connection() as conn, conn.transaction():
            return int(conn.execute(query, params).rowcount)

    def put(self, snapshot: Snapshot) -> None:
        s = snapshot
        self._write(
            f"INSERT INTO snapshots ({_COLUMNS}, data) VALUES (%s,%s,%s,%s,%s,%s,%s,%s) "
            "ON CONFLICT (name, version, seq) DO UPDATE SET hash = EXCLUDED.hash, digest = EXCLUDED.digest, "
            "size = EXCLUDED.size, mac = EXCLUDED.mac, data = EXCLUDED.data",
            (s.name, s.version, s.seq, s.hash, s.digest, s.size, s.mac, s.data),
        )

    def get(self, name: str, version: int, seq: int) -> Snapshot | None:
        rows = self._rows(
            f"SELECT {_COLUMNS}, data FROM snapshots WHERE name = %s AND version = %s AND seq = %s "
            "AND data IS NOT NULL",
            (name, version, seq),
        )
        return _with_data(rows[0]) if rows else None

    def nearest(self, name: str, version: int, at_or_below: int | None = None) -> Snapshot | None:
        rows = self._rows(
            f"SELECT {_COLUMNS}, data FROM snapshots WHERE name = %s AND version = %s AND seq <= %s "
            "AND data IS NOT NULL ORDER BY seq DESC LIMIT 1",
            (name, version, 2**62 if at_or_below is None else at_or_below),
        )
        return _with_data(rows[0]) if rows else None

    def list(self, name: str | None = None) -> list[Snapshot]:
        query = f"SELECT {_COLUMNS}, data IS NULL FROM snapshots"
        if name is None:
            rows = self._rows(query + " ORDER BY name, version, seq", ())
        else:
            rows = self._rows(query + " WHERE name = %s ORDER BY version, seq", (name,))
        return [Snapshot(r[0], r[1], r[2], r[3], r[4], r[5], None, bool(r[7]), r[6]) for r in rows]

    def prune(self, name: str, version: int, keep: int) -> int:
        return self._write(
            "UPDATE snapshots SET data = NULL WHERE name = %s AND version = %s AND data IS NOT NULL "
            "AND seq NOT IN (SELECT seq FROM snapshots WHERE name = %s AND version = %s "
            "AND data IS NOT NULL ORDER BY seq DESC LIMIT %s)",
            (name, version, name, version, max(keep, 0)),
        )

    def delete(self, name: str | None = None, after_seq: int | None = None) -> int:
        after = -1 if after_seq is None else after_seq
        if name is None:
            return self._write("DELETE FROM snapshots WHERE seq > %s", (after,))
        return self._write("DELETE FROM snapshots WHERE name = %s AND seq > %s", (name, after))

    def run_checkpoints(self, stream: str) -> builtins.list[RunCheckpointRow]:
        with self._connection() as conn:
            # A read-only store creates nothing: a schema from before the table has no checkpoints.
            if self.readonly and conn.execute("SELECT to_regclass('run_checkpoints')").fetchone() == (None,):
                return []
            rows = conn.execute(
                "SELECT stream, version, seq, hash, data, mac FROM run_checkpoints WHERE stream = %s "
                "ORDER BY version",
                (stream,),
            ).fetchall()
        return [RunCheckpointRow(r[0], r[1], r[2], r[3], bytes(r[4]), r[5]) for r in rows]

    def put_run_checkpoints(self, rows: builtins.list[RunCheckpointRow]) -> None:
        if self.readonly or not rows:
            return
        with self._connection() as conn, conn.transaction(), conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO run_checkpoints (stream, version, seq, hash, data, mac) "
                "VALUES (%s,%s,%s,%s,%s,%s) ON CONFLICT (stream, version) DO UPDATE SET "
                "seq = EXCLUDED.seq, hash = EXCLUDED.hash, data = EXCLUDED.data, mac = EXCLUDED.mac",
                [(r.stream, r.version, r.seq, r.hash, r.data, r.mac) for r in rows],
            )


def _with_data(row: tuple[Any, ...]) -> Snapshot:
    data = row[7]
    if not isinstance(data, bytes | memoryview):
        raise StorageError("snapshots", f"unexpected data of type {type(data).__name__}")
    return Snapshot(row[0], row[1], row[2], row[3], row[4], row[5], bytes(data), False, row[6])
