"""Group commit: how queued appends take turns leading, are written together, and wake.

The first caller to find no transaction in progress leads: it writes every queued append in
one transaction (at most MAX_GROUP), then wakes the group's callers one after another and
hands the lead to the oldest request still queued. `EventLog` holds the queue and the
condition; this mixin is the part of it that moves requests through them.
"""

from __future__ import annotations

import abc
import itertools
import threading

from ._append import AppendRequest, callers
from ._errors import EventLogError, LogClosedError
from ._recent import RecentCommits

# How many queued appends one group-commit transaction takes at most.
MAX_GROUP = 512


class GroupCommit(abc.ABC):
    """The leading, gathering and waking of `EventLog`'s group commit."""

    url: str
    # How long a group waits at most for the callers of the last one to queue again (_gather).
    GATHER_SECONDS = 0.001
    _cond: threading.Condition
    _queue: list[AppendRequest]
    _leader: bool
    _appenders: int
    _gathering: int
    _closed: bool
    _recent: RecentCommits

    @abc.abstractmethod
    def _write_batch(self, batch: list[AppendRequest]) -> None:
        """Write `batch` in one transaction, setting each request's result or error."""

    @abc.abstractmethod
    def _wake_followers(self) -> None:
        """Tell waiting followers that something may have been committed."""

    def _see_through(self, req: AppendRequest, lead: bool) -> None:
        """Wait as `req`'s caller until it is written, leading its group when the lead is its
        (`append`'s wait for its one request, `append_many`'s for each of its requests)."""
        if not lead:
            # Only this caller wakes: when its request is written, or when the lead is its.
            try:
                req.wake.acquire()  # type: ignore[union-attr]
            except BaseException:
                self._abandon(req)
                raise
            if req.done:
                self._pass_on(req)
        # A leader's request is always first in the queue (the lead passes to the oldest
        # waiting request, and nobody leads an empty queue), so its group holds it.
        while not req.done:
            successor = None
            with self._cond:
                try:
                    self._gather()
                except BaseException:  # an interrupt while gathering: nothing of it is written
                    self._queue.remove(req)
                    successor = self._hand_on()
                    raise
                finally:
                    if successor is not None:
                        successor.release()
                batch, self._queue = self._queue[:MAX_GROUP], self._queue[MAX_GROUP:]
                self._appenders = callers(batch)
            self._lead(batch)

    def _lead(self, batch: list[AppendRequest]) -> None:
        try:
            if self._closed:
                raise LogClosedError(f"{self.url}: the log is closed")
            self._write_batch(batch)
            self._recent.add(r for req in batch if req.result is not None for r in req.result)
        except Exception as exc:  # noqa: BLE001 - the transaction failed: every waiting caller hears why
            for r in batch:
                r.result = None
                r.error = _copy_error(exc)
        finally:
            # The waiters wake one after another, each passing the wake-up on (_pass_on):
            # waking them all at once would have every one of them fight for the GIL with
            # the next leader, which halves the throughput of many appending threads.
            with self._cond:
                # batch[0] is the leader's own; an abandoned caller would not pass it on.
                waiting = [r for r in batch[1:] if r.wake is not None and not r.abandoned]
                for r in batch:
                    r.done = True
                for r, after in itertools.pairwise(waiting):
                    r.chain = after.wake
                self._appenders += callers(self._queue)
                successor = self._hand_on()
            if waiting:
                waiting[0].wake.release()  # type: ignore[union-attr]
            if successor is not None:
                successor.release()
            self._wake_followers()

    def _gather(self) -> None:
        """Before a group is taken, wait (at most GATHER_SECONDS) until as many callers are
        queued as appended around the last one; call with `_cond` held.

        The callers of the group just written are still waking up: without this, the next
        group leaves without them and they form the one after, so many appending threads
        split into two halves taking turns, twice the commits for the same appends. One
        caller appending alone never waits (it was the only one around the last group).
        """
        want = min(self._appenders, MAX_GROUP)
        if callers(self._queue) >= want:
            return
        self._gathering = want
        try:
            self._cond.wait_for(lambda: callers(self._queue) >= want, self.GATHER_SECONDS)
        finally:
            self._gathering = 0

    def _hand_on(self) -> threading.Lock | None:
        """Pass the lead to the oldest queued request, or end it; call with `_cond` held.

        Returns the lock to release to wake the new leader. Waking one thread, rather than
        every waiter, keeps the handoff cheap when many threads append at once.
        """
        if not self._queue:
            self._leader = False
            self._cond.notify_all()  # close() waits for the lead to end
            return None
        nxt = self._queue[0]
        nxt.promoted = True
        return nxt.wake

    @staticmethod
    def _pass_on(req: AppendRequest) -> None:
        """Wake the next waiter of `req`'s group, once `req`'s own caller is awake."""
        after, req.chain = req.chain, None
        if after is not None:
            after.release()

    def _abandon(self, req: AppendRequest) -> None:
        """Withdraw a request whose caller stopped waiting (an interrupt), passing on its lead
        or, if its group was already written, the wake-up its caller would have passed on."""
        successor = None
        with self._cond:
            if req in self._queue:
                self._queue.remove(req)
                if req.promoted:
                    successor = self._hand_on()
            else:  # its group is being written, or was: its wake-up must not stop with it
                req.abandoned = True
                successor, req.chain = req.chain, None
        if successor is not None:
            successor.release()


def _copy_error(exc: Exception) -> BaseException:
    """A fresh exception per waiting caller, so no two threads raise the same object."""
    if isinstance(exc, EventLogError):
        try:
            clone = type(exc).__new__(type(exc))
            clone.__dict__.update(exc.__dict__)
            clone.args = exc.args
            clone.__cause__ = exc.__cause__
            return clone
        except TypeError:
            return exc
    wrapped = EventLogError(f"append failed: {exc}")
    wrapped.__cause__ = exc
    return wrapped
