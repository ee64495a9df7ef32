"""The listening socket: connections it accepts send small answers at once (no Nagle delay)."""

from __future__ import annotations

import asyncio
import socket

from tools.http import listen
from tools.http.binding import server_config


def test_accepted_connections_have_nagle_off():
    # asyncio turns Nagle's algorithm off only on sockets whose protocol says TCP. Left on, an
    # answer written as headers then body waits for the client's delayed ACK (~40 ms on Linux):
    # a long poll answered 45 ms after the push that woke it.
    sock = listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    nodelay: list[int] = []

    async def go() -> None:
        accepted = asyncio.Event()

        def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            conn = writer.get_extra_info("socket")
            nodelay.append(conn.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()
            accepted.set()

        server = await asyncio.start_server(on_connect, sock=sock)
        async with server:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            await asyncio.wait_for(accepted.wait(), 10)
            writer.close()

    asyncio.run(go())
    assert len(nodelay) == 1
    assert nodelay[0] != 0


def test_the_server_keeps_an_idle_connection_longer_than_clients_keep_theirs():
    # A client that reuses a kept-alive connection just as the server closes it gets a reset
    # it cannot retry (a POST): the server must outlast the clients' own idle expiry (Go's
    # transport: 90 s; httpx: 5 s, which is uvicorn's default).
    sock = listen("127.0.0.1", 0)
    try:
        config = server_config(object(), sock, access_log=False, log_level="warning")
        assert config.timeout_keep_alive > 90
    finally:
        sock.close()
