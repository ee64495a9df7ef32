"""`flightlog serve --workers N`: N server processes on one database, behind one listening socket.

The parent binds the socket, verifies the log and settles the operator token, then forks the
workers before it starts any thread of its own. Each worker opens the log itself and serves
the whole protocol on the shared socket; the kernel hands each new connection to one of
them. Nothing is shared in memory: the log is the only state. A write is decided on the log
(its concurrency control refuses the second of two racing writers, which then decides again),
and a waiting long poll, `/wait_reply` or permission wait is woken by its worker's follower
of the log, whichever worker wrote. Console sessions live beside the log, so a login holds on
every worker.

The parent only supervises: it prints the address once, when every worker accepts, passes SIGINT
and SIGTERM on, and replaces a worker that dies unasked (at most RESTARTS_PER_MINUTE a
minute; beyond that it stops them all and exits with EXIT_WORKERS). It stays single-threaded,
so forking a replacement later is as safe as forking the first.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import time
from collections.abc import Callable
from types import FrameType

import click

EXIT_WORKERS = 9  # the workers kept dying (or never started): see their lines on stderr
MAX_WORKERS = 64
READY_TIMEOUT = 120.0  # seconds a worker has to open the log and accept connections
RESTARTS_PER_MINUTE = 5
_PR_SET_PDEATHSIG = 1  # prctl's option number (linux/prctl.h)
STOP_TIMEOUT = 15.0  # seconds the workers get to finish in-flight requests after SIGTERM


class WorkersFailed(click.ClickException):
    """The workers could not be started, or kept dying."""

    exit_code = EXIT_WORKERS


def default_workers() -> int:
    """The machine's cores this process may use (at least 1, at most MAX_WORKERS)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return min(max(1, cores), MAX_WORKERS)


def worker_count(given: str, db: str) -> int:
    """`--workers`: a count from 1 to MAX_WORKERS, or `auto` for the cores this process may use.

    More than one on an in-memory log is refused: each worker would open a log of its own, and
    they would answer from different histories.
    """
    if given.strip().lower() == "auto":
        count = default_workers()
    else:
        try:
            count = int(given)
        except ValueError:
            count = 0
        if not 1 <= count <= MAX_WORKERS:
            raise click.BadParameter(
                f"{given!r} is not a count from 1 to {MAX_WORKERS}, or auto", param_hint="--workers"
            )
    if count > 1 and db == ":memory:":
        raise click.BadParameter(
            "workers share the log through its database, and an in-memory log is one process's own: "
            "give a file or a postgresql:// URL, or one worker",
            param_hint="--workers",
        )
    return count


def supervise(
    count: int, work: Callable[[int, Callable[[], object]], None], announce: Callable[[], None]
) -> int:
    """Fork `count` workers running `work(index, ready)` and supervise them until stopped.

    `work` serves until it is told to stop (SIGTERM) and calls `ready()` once it accepts
    connections; `announce()` runs in the parent once every worker is ready. Returns the signal
    number that stopped the workers.
    """
    stopping: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    def on_child(signum: int, frame: FrameType | None) -> None:
        """Nothing: the wake-up byte it leaves on the pipe is the news."""

    wake_r, wake_w = os.pipe()
    ready_r, ready_w = os.pipe()
    for fd in (wake_r, wake_w):
        os.set_blocking(fd, False)
    previous_fd = signal.set_wakeup_fd(wake_w)
    previous = {
        sig: signal.signal(sig, handler)
        for sig, handler in (
            (signal.SIGINT, on_signal),
            (signal.SIGTERM, on_signal),
            (signal.SIGCHLD, on_child),
        )
    }
    workers: dict[int, int] = {}  # pid -> worker index
    fork = _Forker(work, ready_w, [wake_r, wake_w, ready_r])
    try:
        for index in range(count):
            workers[fork(index)] = index
        _run(count, workers, fork, ready_r, wake_r, stopping, announce)
    finally:
        _stop(workers)
        signal.set_wakeup_fd(previous_fd)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for fd in (wake_r, wake_w, ready_r, ready_w):
            os.close(fd)
    return stopping[0]


class _Forker:
    """Forks a worker: in the child, runs `work` and exits; in the parent, returns the child's pid."""

    def __init__(
        self, work: Callable[[int, Callable[[], object]], None], ready_w: int, close: list[int]
    ) -> None:
        self.work = work
        self.ready_w = ready_w
        self.close = close

    def __call__(self, index: int) -> int:
        pid = os.fork()
        if pid:
            return pid
        code = 0
        try:
            self._become_worker()
            self.work(index, lambda: os.write(self.ready_w, b"."))
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except click.ClickException as e:
            click.echo(f"flightlog: worker {index}: {e.format_message()}", err=True)
            code = e.exit_code
        except BaseException as e:  # noqa: BLE001 - a worker ends here, never in the code after fork()
            click.echo(f"flightlog: worker {index} stopped: {type(e).__name__}: {e}", err=True)
            code = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)

    def _become_worker(self) -> None:
        """Default signal handling (uvicorn installs its own), its own process group (a Ctrl-C
        reaches the parent, which stops the workers once, gracefully), and an end with the parent."""
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD):
            signal.signal(sig, signal.SIG_DFL)
        for fd in self.close:
            os.close(fd)
        os.setpgid(0, 0)
        _end_with_parent()


def _end_with_parent() -> None:
    """Have the kernel send this process SIGTERM when its parent dies (Linux), so a killed
    supervisor leaves no worker serving."""
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: the workers outlive a killed parent
        return
    prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() == 1:  # the parent died before prctl: nobody would tell us
        os.kill(os.getpid(), signal.SIGTERM)


def _run(
    count: int,
    workers: dict[int, int],
    fork: _Forker,
    ready_r: int,
    wake_r: int,
    stopping: list[int],
    announce: Callable[[], None],
) -> None:
    """Wait for every worker to be ready, announce, then replace workers that die unasked,
    until a signal says stop."""
    deadline = time.monotonic() + READY_TIMEOUT
    ready = 0
    restarts: list[float] = []
    while not stopping:
        timeout = max(0.0, deadline - time.monotonic()) if ready < count else None
        if timeout == 0.0:
            raise WorkersFailed(
                f"{count - ready} of {count} workers did not start within {READY_TIMEOUT:.0f} s"
            )
        readable, _, _ = select.select([ready_r, wake_r], [], [], timeout)
        if wake_r in readable:
            with contextlib.suppress(BlockingIOError):
                os.read(wake_r, 4096)
        if ready_r in readable:
            was = ready
            ready += len(os.read(ready_r, 4096))
            if was < count <= ready:  # once: a replaced worker says it is ready too
                announce()
        for _pid, index, code in _reap(workers):
            if stopping:
                break
            if ready < count:
                raise WorkersFailed(f"worker {index} ended while starting (exit {code})")
            now = time.monotonic()
            restarts = [t for t in restarts if now - t < 60.0] + [now]
            if len(restarts) > RESTARTS_PER_MINUTE:
                raise WorkersFailed(f"worker {index} ended (exit {code}), and workers keep ending: stopping")
            click.echo(f"flightlog: worker {index} ended (exit {code}); starting another", err=True)
            workers[fork(index)] = index


def _reap(workers: dict[int, int]) -> list[tuple[int, int, int]]:
    """The workers that have ended, as (pid, index, exit code), removed from `workers`."""
    ended = []
    for pid in list(workers):
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # reaped already
            done, status = pid, 0
        if done:
            ended.append((pid, workers.pop(pid), os.waitstatus_to_exitcode(status)))
    return ended


def _stop(workers: dict[int, int]) -> None:
    """SIGTERM every worker left (they finish in-flight requests), wait; SIGKILL stragglers."""
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT
    while workers and time.monotonic() < deadline:
        _reap(workers)
        if workers:
            time.sleep(0.02)
    for pid in list(workers):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
        del workers[pid]
