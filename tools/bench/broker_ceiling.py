"""The HTTP stack's own ceiling for `flightlog bench broker`: uvicorn + Starlette, nothing stored.

`python -m tools.bench.broker_ceiling` serves `POST /report` on a free loopback port with the
very uvicorn settings of `flightlog serve` (`tools.http.server_config`): the endpoint reads
the body, parses the same JSON the agents send, checks it is an object with a string
`run_id`, and answers `{"ok": true}` as the broker does — without authenticating or storing
anything. Reports/s against it is what the stack itself allows on this machine with this
client; the broker is measured against it in the same run.
"""

from __future__ import annotations

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..http import listen, server_config

LISTENING = "flightlog: listening on http://"
_OK = b'{"ok":true}\n'


async def report(request: Request) -> Response:
    """Parse the report as the broker would, then answer as it does; nothing is kept."""
    body = orjson.loads(await request.body())
    if not isinstance(body, dict) or not isinstance(body.get("run_id"), str):
        return Response("bad request\n", 400, media_type="text/plain; charset=utf-8")
    return Response(_OK, 200, media_type="application/json")


def ceiling_app() -> Starlette:
    return Starlette(routes=[Route("/report", report, methods=["POST"])])


def main() -> None:
    import uvicorn

    sock = listen("127.0.0.1", 0)
    config = server_config(ceiling_app(), sock, access_log=False, log_level="warning")

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[object] | None = None) -> None:  # type: ignore[override]
            await super().startup(sockets)  # type: ignore[arg-type]
            print(f"{LISTENING}127.0.0.1:{sock.getsockname()[1]}", flush=True)

    Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
