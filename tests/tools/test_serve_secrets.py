"""`flightlog serve` keeps its secrets from other users: a real server process, end to end.

The log's files: one that group or others can write is refused (exit 8, one line), one they
can read is served with one line of warning, another application's database is refused
unchanged. The operator token: a weak one is refused (exit 2) with the way to make a good
one; without one, a new token is kept in a 0600 file whose path (never the token, off a
terminal) is printed, and a restart reuses it; an unsafe token file is refused, untouched.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from eventlog import NewEvent, open_log
from tests.http.server import ServerProcess
from tools._output import EXIT_STORAGE, EXIT_USAGE
from tools._tokens import MAKE_ONE
from tools.cli import token_file

pytestmark = pytest.mark.slow

STRONG = "7c4f0e5a91d2b83e6f1a0c9d4b7e2f58"
TOKEN_ENV = "FLIGHTLOG_OPERATOR_TOKEN"


def serve(
    db: Path | str, *args: str, token: str | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """`flightlog serve` that is expected to refuse to start (a test's timeout guards a hang)."""
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    if token is not None:
        env[TOKEN_ENV] = token
    argv = [
        sys.executable,
        "-c",
        "from tools.cli import main; main()",
        "serve",
        "--db",
        str(db),
        "--port",
        "0",
    ]
    return subprocess.run(
        [*argv, *args], capture_output=True, text=True, env=env, timeout=120, cwd=cwd, check=False
    )


def one_line(done: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in done.stderr, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    return lines[0]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def make_log(path: Path) -> Path:
    with open_log(path) as log:  # an event of the user's own, in a stream of their own
        log.append("deploy-1", [NewEvent("DeployRequested", {"n": 1})])
    return path


def state_of(path: Path) -> tuple[str, bytes, list[str]]:
    data = path.read_bytes()
    return hashlib.sha256(data).hexdigest(), data[18:20], sorted(p.name for p in path.parent.iterdir())


@pytest.fixture
def servers() -> Iterator[list[ServerProcess]]:
    started: list[ServerProcess] = []
    yield started
    for server in started:
        server.close()


def start(servers: list[ServerProcess], db: Path, token: str | None, *args: str) -> ServerProcess:
    server = ServerProcess(db, token, args)
    servers.append(server)
    return server


def authorized(server: ServerProcess, token: str) -> bool:
    response = server.client.get("/api/v1/runs", headers={"Authorization": f"Bearer {token}"})
    return response.status_code == 200


# -- the log's files ----------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [0o664, 0o606, 0o620], ids=lambda m: f"{m:04o}")
def test_a_log_others_can_write_is_refused(tmp_path, bits):
    db = make_log(tmp_path / "shared.db")
    db.chmod(bits)
    before = state_of(db)
    done = serve(db)
    assert done.returncode == EXIT_STORAGE
    line = one_line(done)
    assert line == (
        f"Error: refusing to serve {db}: group or others can write {db} (mode {bits:04o}); chmod 600 {db}"
    )
    assert state_of(db) == before  # not served, not chmod-ed, no token file beside it
    assert mode(db) == bits


@pytest.mark.parametrize("suffix", ["-wal", "-shm"])
def test_a_wal_or_shm_others_can_write_is_refused(tmp_path, suffix):
    db = make_log(tmp_path / "shared.db")
    with open_log(db) as held:  # while a log is open its -wal and -shm exist
        held.head()
        side = Path(f"{db}{suffix}")
        side.chmod(0o666)
        done = serve(db)
    assert done.returncode == EXIT_STORAGE
    assert f"group or others can write {side} (mode 0666)" in one_line(done)
    assert not Path(f"{db}.operator-token").exists()


def test_a_log_others_can_read_is_served_with_one_warning(tmp_path, servers):
    db = make_log(tmp_path / "readable.db")
    db.chmod(0o644)
    server = start(servers, db, STRONG)
    assert server.stop() == 0
    warnings = [line for line in server.stderr if "group or others can read" in line]
    assert warnings == [
        f"flightlog: warning: group or others can read {db} (mode 0644): chmod 600 the log's files\n"
    ]
    assert mode(db) == 0o644  # the user's file: warned about, never chmod-ed
    # The warning comes once the log is served: a refusal is still one line.
    refused = serve(db, token="passwordpassword")
    assert one_line(refused).startswith(f"Error: {TOKEN_ENV} is too weak")


def test_a_new_log_is_served_without_a_warning_and_is_0600(tmp_path, servers):
    db = tmp_path / "new.db"
    server = start(servers, db, STRONG)
    assert {p.name: mode(p) for p in tmp_path.iterdir()} == {
        "new.db": 0o600,
        "new.db-shm": 0o600,
        "new.db-wal": 0o600,
    }
    assert server.stop() == 0
    assert "warning" not in server.output()


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_another_applications_database_is_refused_unchanged(tmp_path, journal):
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as conn:
        conn.execute(f"PRAGMA journal_mode = {journal}")
        conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute("INSERT INTO notes (body) VALUES ('keep me')")
        conn.commit()
    other.chmod(0o600)
    before = state_of(other)
    for token in (STRONG, None):  # nor does it leave a token file beside it
        done = serve(other, token=token)
        assert done.returncode == EXIT_STORAGE
        assert one_line(done) == f"Error: not a flightlog log: {other}"
        assert state_of(other) == before


# -- the operator token -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "weak", ["passwordpassword", "0123456789abcdef", "investigate-" + "x" * 24, "abcdefgh" * 5]
)
def test_a_weak_operator_token_is_refused_with_the_way_to_make_one(tmp_path, weak):
    db = tmp_path / "weak.db"
    done = serve(db, token=weak)
    assert done.returncode == EXIT_USAGE
    line = one_line(done)
    assert line.startswith(f"Error: {TOKEN_ENV} is too weak: ")
    assert line.endswith(f"Make one with: {MAKE_ONE}")
    assert weak not in done.stderr + done.stdout
    assert not db.exists()  # refused before anything is created


def test_a_generated_token_is_kept_in_a_0600_file_and_reused_on_restart(tmp_path, servers):
    db = tmp_path / "flightlog.db"
    kept = tmp_path / "flightlog.db.operator-token"
    first = start(servers, db, None)
    assert mode(kept) == 0o600
    token = kept.read_text().strip()
    assert len(token) == 32
    assert authorized(first, token)
    assert first.stop() == 0
    # Off a terminal, only the file's path is printed.
    assert f"flightlog: operator token written to {kept} (only you can read it)\n" in first.stderr
    assert token not in first.output()

    second = start(servers, db, None)
    assert authorized(second, token)
    assert second.stop() == 0
    assert f"flightlog: operator token read from {kept}\n" in second.stderr
    assert token not in second.output()
    assert kept.read_text().strip() == token


def test_token_file_chooses_where_the_token_is_kept(tmp_path, servers):
    db = tmp_path / "flightlog.db"
    chosen = tmp_path / "secrets" / "admin-token"
    chosen.parent.mkdir()
    server = start(servers, db, None, "--token-file", str(chosen))
    assert mode(chosen) == 0o600
    assert authorized(server, chosen.read_text().strip())
    assert server.stop() == 0
    assert not (tmp_path / "flightlog.db.operator-token").exists()


def test_the_environment_token_writes_no_file(tmp_path, servers):
    db = tmp_path / "flightlog.db"
    server = start(servers, db, STRONG)
    assert authorized(server, STRONG)
    assert server.stop() == 0
    assert not (tmp_path / "flightlog.db.operator-token").exists()
    assert STRONG not in server.output()


def unsafe_group_readable(path: Path) -> None:
    path.write_text(STRONG + "\n")
    path.chmod(0o644)


def unsafe_others_user(path: Path) -> None:
    path.write_text(STRONG + "\n")
    path.chmod(0o600)
    os.chown(path, 65534, 65534)


def unsafe_symlink(path: Path) -> None:
    target = path.with_name("elsewhere")
    target.write_text(STRONG + "\n")
    target.chmod(0o600)
    path.symlink_to(target)


def unsafe_weak(path: Path) -> None:
    path.write_text("passwordpassword\n")
    path.chmod(0o600)


UNSAFE = {
    "readable by others": (unsafe_group_readable, "it is not private (mode 0644, 0600 needed)"),
    "another user's": (unsafe_others_user, "it belongs to another user (uid 65534)"),
    "a symbolic link": (unsafe_symlink, "it is a symbolic link"),
    "a weak token": (unsafe_weak, "the token in it is too weak"),
}


@pytest.mark.parametrize("kind", UNSAFE)
def test_an_unsafe_token_file_is_refused_untouched(tmp_path, kind):
    make, reason = UNSAFE[kind]
    if kind == "another user's" and os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    db = tmp_path / "flightlog.db"
    kept = tmp_path / "flightlog.db.operator-token"
    make(kept)
    before = (_untouched(kept), kept.read_bytes())
    done = serve(db)
    assert done.returncode == EXIT_USAGE
    line = one_line(done)
    assert line.startswith(f"Error: refusing the token file {kept}: {reason}")
    assert STRONG not in done.stderr + done.stdout
    assert (_untouched(kept), kept.read_bytes()) == before
    assert not db.exists()


def _untouched(path) -> tuple[int, ...]:
    """What changing a file changes (reading it may move its access time, and does on some mounts)."""
    st = path.lstat()
    return (st.st_ino, st.st_mode, st.st_uid, st.st_gid, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


# -- the token file, in process -----------------------------------------------------------------


def test_the_default_token_file_is_beside_the_log_or_here():
    assert token_file.default_path("data/flightlog.db") == "data/flightlog.db.operator-token"
    assert token_file.default_path("postgresql://db.internal/flightlog") == "flightlog-operator-token"
    assert token_file.default_path("postgres://db.internal/flightlog") == "flightlog-operator-token"


def test_on_a_terminal_a_new_token_is_shown_once(tmp_path, capsys):
    path = str(tmp_path / "token")
    assert token_file.keep_new_token(path, STRONG, show=True) == STRONG
    err = capsys.readouterr().err
    assert err.count(STRONG) == 1
    # A second server that finds the file uses its token and shows nothing.
    other = "e0b1c2d3a4f5968778695a4b3c2d1e0f"
    assert token_file.keep_new_token(path, other, show=True) == STRONG
    err = capsys.readouterr().err
    assert STRONG not in err
    assert other not in err


def test_a_token_file_is_0600_whatever_the_umask(tmp_path):
    old = os.umask(0o277)  # would leave the owner unable to write, or to read it back
    try:
        assert token_file.write_token(str(tmp_path / "token"), STRONG)
    finally:
        os.umask(old)
    assert mode(tmp_path / "token") == 0o600
    assert token_file.read_token(str(tmp_path / "token")) == STRONG
