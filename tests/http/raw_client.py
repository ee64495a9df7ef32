"""A small HTTP/1.1 keep-alive client on asyncio streams, for load tests.

httpx's async pool, with a thousand requests in flight, can fail a request with a ReadError
that no server caused (encode/httpx#3348). This client only writes a request, reads its
answer by Content-Length and keeps the connection for the next request: a failure it reports
is the server's.
"""

from __future__ import annotations

import asyncio
import contextlib

Answer = tuple[int, str, bytes]  # status, content type, body


class RawClient:
    """POSTs to 127.0.0.1:`port` over kept-alive connections (one per request in flight)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def post(self, path: str, body: bytes, headers: dict[str, str]) -> Answer:
        conn = self._idle.pop() if self._idle else await asyncio.open_connection("127.0.0.1", self.port)
        reader, writer = conn
        fields = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n{fields}\r\n"
        writer.write(head.encode() + body)
        status_line = await reader.readline()
        if not status_line:
            writer.close()
            raise ConnectionError(f"POST {path}: the server closed the connection without an answer")
        length, kind, close = 0, "", False
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            name, value = name.strip().lower(), value.strip()
            if name == "content-length":
                length = int(value)
            elif name == "content-type":
                kind = value
            elif name == "connection":
                close = value.lower() == "close"
        payload = await reader.readexactly(length)
        if close:
            writer.close()
        else:
            self._idle.append(conn)
        return int(status_line.split()[1]), kind, payload

    async def aclose(self) -> None:
        idle, self._idle = self._idle, []
        for _, writer in idle:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
