"""ScriptedHarness: plays a recorded script for every prompt (tests, the demo, replaying a run).

It publishes from its own threads (a permission request blocks only the turn that asked) and
answers an abort with `session.idle` once the turn has stopped, as the controller expects.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._errors import HarnessError
from .harness import (
    ENQUEUE,
    PERMISSION_REQUEST,
    SESSION_ERROR,
    SESSION_IDLE,
    SESSION_SHUTDOWN,
    USER_MESSAGE,
    HarnessEvent,
    Publish,
)

JOIN_TIMEOUT = 10.0  # how long close() waits for a harness thread
TERMINAL = frozenset({SESSION_IDLE, SESSION_ERROR, SESSION_SHUTDOWN})

Script = Sequence[Any] | Mapping[str, Sequence[Any]] | Callable[[str], Sequence[Any]]


@dataclass(frozen=True, slots=True)
class SentPrompt:
    """One prompt a harness was given: the run, the text, the delivery, and whether it steered."""

    run_id: str
    prompt: str
    delivery: str
    steer: bool = False


@dataclass(frozen=True, slots=True)
class _Step:
    type: str
    id: str = ""
    data: dict[str, Any] = field(default_factory=dict)
    when: frozenset[str] | None = None  # play only if the last permission ended so


def _parse_step(step: Any) -> _Step:
    """A step from a dict (keys besides type/id/data/if/run_id go into data) or an event-like object."""
    if isinstance(step, Mapping):
        if not isinstance(step.get("type"), str) or not step["type"]:
            raise ValueError(f"a script step needs a type: {dict(step)!r}")
        data = dict(step.get("data") or {})
        data.update({k: v for k, v in step.items() if k not in ("type", "id", "data", "if", "run_id")})
        when = step.get("if")
        conds = None if when is None else frozenset([when] if isinstance(when, str) else when)
        return _Step(step["type"], str(step.get("id") or ""), data, conds)
    type_ = getattr(step, "type", None)
    if not isinstance(type_, str) or not type_:
        raise ValueError(f"a script step needs a type: {step!r}")
    return _Step(type_, str(getattr(step, "id", "") or ""), dict(getattr(step, "data", None) or {}))


class ScriptedHarness:
    """Plays a recorded script for every prompt.

    `script` is one turn's steps: a list (the same for every prompt), a mapping from prompt to
    steps (`"*"` for any other prompt), or a function of the prompt. A step is a dict such as
    `{"type": "assistant.delta", "data": {"delta": "Hel"}}` or a HarnessEvent; its run id is
    the played run's, and a missing id is made unique. A `permission.request` step blocks until
    it is decided; a later step with `"if": "approve"` (or a list of decisions, or `"error"`
    when the request failed) plays only if the last request ended that way.

    Each new run's turn plays in its own thread, so `send` returns at once; with
    `threaded=False` it plays inside `send`. A prompt for the run being played is a steer: it
    is recorded and echoed, and the turn goes on. With `echo`, each prompt is first published
    as a `user.message` (a steer's with status `steering` or `queued`). An abort stops the turn
    before its next step and publishes `session.idle`. `prompts`, `aborts`, `decisions` and
    `errors` record what happened, for tests.
    """

    def __init__(
        self,
        script: Script,
        *,
        session_id: str = "scripted-session",
        threaded: bool = True,
        echo: bool = True,
    ) -> None:
        if isinstance(script, str | bytes):
            raise TypeError("a script is a list of steps, a mapping of prompts to steps, or a function")
        self.script = script
        self.session_id = session_id
        self.threaded = threaded
        self.echo = echo
        self.prompts: list[SentPrompt] = []
        self.aborts: list[str] = []
        self.decisions: list[str] = []
        self.errors: list[BaseException] = []
        self.starts = 0
        self.closed = False
        self._publish: Publish | None = None
        self._lock = threading.Lock()
        self._playing = ""  # the run whose turn is being played
        self._aborted: set[str] = set()
        self._threads: list[threading.Thread] = []
        self._ids = itertools.count(1)
        self._stop = threading.Event()

    def start(self, publish: Publish) -> str:
        with self._lock:
            self._publish = publish
            self.starts += 1
            self.closed = False
            self._stop = threading.Event()
        return self.session_id

    def send(self, run_id: str, prompt: str, delivery: str) -> None:
        publish = self._publish
        if publish is None or self.closed:
            raise HarnessError("the scripted harness is not started")
        steps: list[_Step] = []
        with self._lock:
            steer = bool(self._playing) and run_id == self._playing
            if not steer:
                steps = [_parse_step(s) for s in self._steps_for(prompt)]
                self._playing = run_id
            self.prompts.append(SentPrompt(run_id, prompt, delivery, steer))
        if steer:
            if self.echo:
                status = "queued" if delivery == ENQUEUE else "steering"
                data = {"content": prompt, "delivery": status}
                self._emit(publish, HarnessEvent(USER_MESSAGE, run_id, self._new_id(run_id), data))
            return
        if not self.threaded:
            self._play(publish, run_id, prompt, steps, self._stop)
            return
        thread = threading.Thread(
            target=self._play,
            args=(publish, run_id, prompt, steps, self._stop),
            name=f"scripted-turn-{run_id[:8]}",
            daemon=True,
        )
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()

    def _steps_for(self, prompt: str) -> Sequence[Any]:
        if isinstance(self.script, Mapping):
            return self.script.get(prompt, self.script.get("*", ()))
        if callable(self.script):
            return self.script(prompt)
        return self.script

    def _new_id(self, run_id: str) -> str:
        return f"{run_id}/{next(self._ids)}"

    def _emit(self, publish: Publish, event: HarnessEvent) -> bool:
        try:
            publish(event)
        except Exception as e:  # noqa: BLE001 - a refused event ends the turn; tests read .errors
            self.errors.append(e)
            return False
        return True

    def _play(
        self, publish: Publish, run_id: str, prompt: str, steps: list[_Step], stop: threading.Event
    ) -> None:
        last = ""
        try:
            if self.echo and not self._emit(
                publish, HarnessEvent(USER_MESSAGE, run_id, self._new_id(run_id), {"content": prompt})
            ):
                return
            for step in steps:
                if stop.is_set() or run_id in self._aborted:
                    return
                if step.when is not None and last not in step.when:
                    continue
                event = HarnessEvent(step.type, run_id, step.id or self._new_id(run_id), dict(step.data))
                if step.type != PERMISSION_REQUEST:
                    if not self._emit(publish, event):
                        return
                    continue
                try:
                    resolution = publish(event)
                    last = str(getattr(resolution, "decision", "") or "error")
                except Exception as e:  # noqa: BLE001 - the script may branch on "error"
                    self.errors.append(e)
                    last = "error"
                self.decisions.append(last)
        finally:
            with self._lock:
                if self._playing == run_id:
                    self._playing = ""
                aborted = run_id in self._aborted
            if aborted and not stop.is_set():
                self._emit(publish, HarnessEvent(SESSION_IDLE, run_id, f"{run_id}/aborted"))

    def abort(self, run_id: str) -> None:
        """Stop the run's turn before its next step; `session.idle` follows once it has stopped."""
        with self._lock:
            self.aborts.append(run_id)
            self._aborted.add(run_id)
            playing = self._playing == run_id
        publish = self._publish
        if not playing and publish is not None:
            self._emit(publish, HarnessEvent(SESSION_IDLE, run_id, f"{run_id}/aborted"))

    def join(self, timeout: float = JOIN_TIMEOUT) -> bool:
        """Wait until every turn played in a thread has finished; False if one is still playing."""
        with self._lock:
            threads = list(self._threads)
        for t in threads:
            t.join(timeout)
        return not any(t.is_alive() for t in threads)

    def close(self) -> None:
        with self._lock:
            self.closed = True
            self._stop.set()
        self.join()
