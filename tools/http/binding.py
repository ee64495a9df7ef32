"""The listening socket of a server, bound before uvicorn starts so a busy port is a clear error."""

from __future__ import annotations

import errno
import socket


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
