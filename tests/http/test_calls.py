"""`calls.answer`: a broker call's answer awaited on the event loop, without a thread."""

from __future__ import annotations

import asyncio
import gc
import threading
import weakref

from actors.broker.writer import Ready
from tools.http.calls import answer


def test_an_answer_known_at_once_does_not_wait_for_a_turn_of_the_loop():
    # A long poll's take on an empty queue, its leave, a heartbeat on a known state: answered
    # inside the call. Queued behind every other ready callback instead, a thousand polls
    # timing out together each waited for the whole queue, twice.
    async def main() -> list[int]:
        ran: list[int] = []
        asyncio.get_running_loop().call_soon(ran.append, 1)
        assert await answer(lambda done: Ready("now", done)) == "now"
        return list(ran)  # what ran before the answer came back

    assert asyncio.run(main()) == []


def test_an_answer_from_another_thread_wakes_the_loop():
    class Later:
        def __init__(self, done) -> None:
            self.value = None
            self.thread = threading.Thread(target=self.finish, args=(done,))
            self.thread.start()

        def finish(self, done) -> None:
            self.value = "later"
            done()

        def result(self) -> str | None:
            return self.value

    async def main() -> str:
        return await asyncio.wait_for(answer(Later), 10)

    assert asyncio.run(main()) == "later"


def test_an_answer_that_comes_after_its_waiter_was_cancelled_is_dropped():
    # A client that went away: its request's task is cancelled while the call is on its way.
    # The call's done() then still comes, on the loop's thread (a delivery settled there).
    class Pending:
        done = None

        def __init__(self, done) -> None:
            Pending.done = done

        def result(self) -> None:
            return None

    async def main() -> None:
        waiter = asyncio.ensure_future(answer(Pending))
        await asyncio.sleep(0)
        waiter.cancel()
        await asyncio.sleep(0)
        assert waiter.cancelled()
        Pending.done()  # nobody waits any more: nothing to settle, nothing raised

    asyncio.run(main())


def test_a_loop_that_was_answered_from_another_thread_is_not_kept_alive():
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    class Later:
        def __init__(self, done) -> None:
            self.thread = threading.Thread(target=done)
            self.thread.start()

        def result(self) -> str:
            return "later"

    async def main() -> str:
        loops.append(weakref.ref(asyncio.get_running_loop()))
        return await asyncio.wait_for(answer(Later), 10)

    assert asyncio.run(main()) == "later"
    gc.collect()
    assert loops[0]() is None  # its inbox held it alive when the inbox held the loop


def test_a_refused_body_is_freed_with_its_request_not_by_the_collector(client, register):
    # A call keeps the error it raised, and the error's traceback the frames that held the
    # call: a cycle that only the collector frees, with the request's megabyte in it. A
    # server collects rarely (tools.http.binding.GC_THRESHOLDS): such cycles piled up there.
    token = register("big")
    payload = "x" * 1_000_000  # fits a body, not the payload quota: 413
    body = {"run_id": "big", "token": token, "state": "working", "payload": payload}
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)  # what the collector finds is kept in gc.garbage, to be looked at
    try:
        for _ in range(3):
            assert client.post("/report", json=body).status_code == 413
        gc.collect()
        # Strings are not tracked: they are found among what the garbage refers to. (Only the
        # server decodes the payload to a str; the test client's own cycles hold the bytes.)
        held = gc.get_referents(*gc.garbage)
        big = [o for o in held if isinstance(o, str) and len(o) >= 1_000_000]
        kept = [type(o).__name__ for o in gc.garbage][:10]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()
    assert big == [], kept
