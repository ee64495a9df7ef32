"""The listening socket of a server, bound before uvicorn starts so a busy port is a clear error;
and the uvicorn settings every flightlog server runs with."""

from __future__ import annotations

import errno
import gc
import socket
from typing import Any

from .wire import REFUSAL_HOLD

GRACEFUL_SHUTDOWN = 5.0  # seconds in-flight requests get on SIGINT/SIGTERM, as the seed's Stop


class PortInUseError(OSError):
    """Raised when the port a server should listen on is taken by another process."""

    def __init__(self, host: str, port: int) -> None:
        super().__init__(errno.EADDRINUSE, f"port {port} on {host} is in use by another process")
        self.host = host
        self.port = port


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket bound to (host, port), port 0 for any free one; PortInUseError if it is taken."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # The protocol named, not left 0: asyncio turns Nagle's algorithm off only on sockets that
    # say TCP, and with it on an answer's body waits for the client's delayed ACK (~40 ms).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        if e.errno == errno.EADDRINUSE:
            raise PortInUseError(host, port) from e
        raise
    sock.set_inheritable(True)
    return sock


# Seconds an idle kept-alive connection stays open. Longer than clients keep theirs (Go's
# transport 90 s, httpx 5 s): a client that reuses a connection the server is closing at that
# moment gets a reset it cannot retry (a POST), so the client should be the one to let go.
KEEP_ALIVE = 120
# The garbage collector's thresholds in a server. Python's (700, 10, 10) collect the young
# generation every 700 allocations: with thousands of long polls waiting, each collection
# walked what they keep alive, 20 to 40 µs of every poll's CPU (`flightlog bench broker`'s
# capacity levels). Nearly everything a request allocates is freed by its reference count,
# so collecting less often costs little memory.
GC_THRESHOLDS = (50_000, 20, 100)


def server_config(
    app: Any,
    sock: socket.socket,
    *,
    access_log: bool,
    log_level: str,
    read_timeout: float = 10.0,
    refusal_hold: float = REFUSAL_HOLD,
) -> Any:
    """The uvicorn Config of `flightlog serve` for `app` on `sock` (also the bench's ceiling server);
    this process's garbage collector is set for serving (`GC_THRESHOLDS`).

    `read_timeout` is each request's read deadline in seconds, `refusal_hold` how long a
    connection is not read after a 413 or 429 (`tools.http.protocol`, as serve's defaults).
    """
    import uvicorn  # here, not at the top: every other command starts without the server stack

    from .protocol import read_deadline_protocol

    gc.set_threshold(*GC_THRESHOLDS)
    host, port = sock.getsockname()[:2]
    return uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=access_log,
        proxy_headers=False,
        server_header=False,
        lifespan="off",
        timeout_graceful_shutdown=int(GRACEFUL_SHUTDOWN),
        timeout_keep_alive=KEEP_ALIVE,
        http=read_deadline_protocol(read_timeout, refusal_hold),
    )
