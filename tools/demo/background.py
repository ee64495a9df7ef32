"""A uvicorn server on a background thread, for the demo and tests that need a live server."""

from __future__ import annotations

import asyncio
import socket
import threading
from types import TracebackType
from typing import Any

from ..http import listen


class BackgroundServer:
    """Serves an ASGI app on 127.0.0.1 from a daemon thread; `url` is set once it listens.

    The port is bound in the caller's thread by `start()`: a busy one raises PortInUseError there.
    """

    def __init__(self, app: Any, *, host: str = "127.0.0.1", port: int = 0) -> None:
        import uvicorn

        config = uvicorn.Config(
            app,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            lifespan="off",
            server_header=False,
        )
        self._host, self._port = host, port
        self._socket: socket.socket | None = None
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._run, name="flightlog-http", daemon=True)
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self.url = ""

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as e:  # noqa: BLE001 - reported by start() in the caller's thread
            self._error = e
            self._ready.set()

    async def _serve(self) -> None:
        server = self._server
        config = server.config
        if not config.loaded:
            config.load()
        server.lifespan = config.lifespan_class(config)
        await server.startup(sockets=[self._socket] if self._socket is not None else None)
        if server.servers:
            host, port = server.servers[0].sockets[0].getsockname()[:2]
            self.url = f"http://{host}:{port}"
        self._ready.set()
        if server.should_exit:
            return
        await server.main_loop()
        await server.shutdown()

    def start(self, timeout: float = 30.0) -> str:
        self._socket = listen(self._host, self._port)
        self._thread.start()
        if not self._ready.wait(timeout):
            raise RuntimeError("the HTTP server did not start in time")
        if self._error is not None or not self.url:
            raise RuntimeError(f"the HTTP server failed to start: {self._error}") from self._error
        return self.url

    def stop(self) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        if self._socket is not None:
            self._socket.close()

    def __enter__(self) -> BackgroundServer:
        self.start()
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()
