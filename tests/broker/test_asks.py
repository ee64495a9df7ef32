"""Asks between runs: the decider given/when/then, and the Broker API with a manual clock."""

from __future__ import annotations

from datetime import timedelta

import pytest

from actors import AskConflictError, AskInvalidError, AskNotFoundError, NotAskPartyError
from actors.broker.asks import AnswerAsk, CancelAsk, ExpireAsk, OpenAsk, TakeReply, WithdrawAsk
from eventlog.events import AskAnswered, AskCancelled, AskReplyTaken, AskSent, AskTimedOut, AskWithdrawn

from .conftest import WAIT
from .test_run_decider import EARLIER, NOW, REGISTERED, RID, given

DEADLINE = NOW + timedelta(minutes=10)
SENT = AskSent(RID, "q", "b", '{"message":"?"}', DEADLINE, EARLIER)


def test_an_ask_is_recorded_with_its_deadline() -> None:
    sent = AskSent(RID, "q", "b", "{}", DEADLINE, NOW)
    given(REGISTERED).when(OpenAsk("q", "b", "{}", DEADLINE)).then(sent)


def test_an_ask_needs_an_id_and_a_free_one() -> None:
    given(REGISTERED).when(OpenAsk("", "b", "{}", DEADLINE)).then_error(
        AskInvalidError, "expects_reply requires a message id"
    )
    given(REGISTERED, SENT).when(OpenAsk("q", "c", "{}", DEADLINE)).then_error(
        AskConflictError, "message id already in use"
    )


def test_only_the_target_answers_and_only_once() -> None:
    given(REGISTERED, SENT).when(AnswerAsk("q", "c", "{}")).then_error(
        NotAskPartyError, "not the target of this ask"
    )
    given(REGISTERED, SENT).when(AnswerAsk("q", "b", "{}")).then(AskAnswered(RID, "q", "b", "{}", NOW))
    answered = AskAnswered(RID, "q", "b", "{}", EARLIER)
    given(REGISTERED, SENT, answered).when(AnswerAsk("q", "b", "{}")).then_nothing()
    given(REGISTERED).when(AnswerAsk("q", "b", "{}")).then_error(
        AskNotFoundError, "no pending ask for this message id"
    )


def test_the_answer_is_taken_once_and_closes_the_ask() -> None:
    answered = AskAnswered(RID, "q", "b", "{}", EARLIER)
    given(REGISTERED, SENT).when(TakeReply("q", EARLIER)).then_error(
        AskNotFoundError, "no pending ask for this message id"
    )
    given(REGISTERED, SENT, answered).when(TakeReply("q", EARLIER)).then(AskReplyTaken(RID, "q", NOW))
    taken = AskReplyTaken(RID, "q", EARLIER)
    given(REGISTERED, SENT, answered, taken).when(TakeReply("q", EARLIER)).then_error(
        AskNotFoundError, "no pending ask for this message id"
    )
    # The id is free again once the ask closed.
    given(REGISTERED, SENT, answered, taken).when(OpenAsk("q", "b", "{}", DEADLINE)).then(
        AskSent(RID, "q", "b", "{}", DEADLINE, NOW)
    )


def test_cancel_expire_and_withdraw() -> None:
    given(REGISTERED, SENT).when(CancelAsk("q")).then(AskCancelled(RID, "q", NOW))
    given(REGISTERED).when(CancelAsk("q")).then_error(AskNotFoundError, "no pending ask for this message id")
    # Not due yet (NOW < DEADLINE): nothing; an ask sent earlier with a past deadline: timed out.
    given(REGISTERED, SENT).when(ExpireAsk("q", EARLIER)).then_nothing()
    due = AskSent(RID, "q", "b", None, EARLIER, EARLIER)
    given(REGISTERED, due).when(ExpireAsk("q", EARLIER)).then(AskTimedOut(RID, "q", NOW))
    # An expiry of an older ask of the same id leaves the new one alone.
    given(REGISTERED, due).when(ExpireAsk("q", NOW)).then_nothing()
    given(REGISTERED, SENT).when(WithdrawAsk("q", EARLIER, "mutual ask refused")).then(
        AskWithdrawn(RID, "q", "mutual ask refused", NOW)
    )


# -- the Broker API --------------------------------------------------------------------------


@pytest.fixture
def runs(broker):
    broker.create_run("a")
    broker.create_run("b")
    return broker


def test_ask_answer_wait(runs, system):
    runs.ask("a", "b", "q", '{"message":"ready?"}')
    [question] = runs.take_control("b")
    assert (question.from_run_id, question.payload) == ("a", '{"message":"ready?"}')
    assert runs.answer("b", "a", "q", '{"message":"yes"}') == ""
    outcome = runs.wait_reply("a", "q", timeout=WAIT)
    assert (outcome.status, outcome.from_run_id, outcome.payload) == ("replied", "b", '{"message":"yes"}')
    types = [r.type for r in system.log.read("run-a") if r.type.startswith("Ask")]
    assert types == ["AskSent", "AskAnswered", "AskReplyTaken"]
    with pytest.raises(AskNotFoundError):
        runs.wait_reply("a", "q", timeout=WAIT)


def test_a_timeout_is_fired_by_tick_and_ends_the_wait(runs, system, clock):
    runs.ask("a", "b", "slow", "{}")
    [edge] = system.views.open_asks()
    assert edge.deadline == edge.sent_at + timedelta(seconds=600)
    # A waiter's first look finds the ask open (what /wait_reply and wait_reply do first).
    waiting = runs.conversations.wait_step("a", "slow", None)
    assert system.tick() == 0  # not due yet
    clock.advance(601)
    assert system.tick() == 1
    outcome = runs.conversations.wait_step("a", "slow", waiting)
    assert (outcome.status, outcome.message_id) == ("timeout", "slow")
    assert system.views.open_asks() == []
    assert runs.answer("b", "a", "slow", "{}")  # the no-edge note: delivered as a message
    assert [m.payload for m in runs.take_control("a")] == ["{}"]


def test_a_wait_ends_at_the_deadline_even_without_a_tick(runs, clock):
    runs.ask("a", "b", "late", "{}")
    clock.advance(601)
    assert runs.wait_reply("a", "late", timeout=WAIT).status == "timeout"


def test_a_cancel_ends_the_wait(runs):
    runs.ask("a", "b", "q", "{}")
    waiting = runs.conversations.wait_step("a", "q", None)
    runs.cancel_message("a", "q")
    outcome = runs.conversations.wait_step("a", "q", waiting)
    assert (outcome.status, outcome.message_id) == ("cancelled", "q")


def test_cancel_and_mutual_asks(runs):
    runs.ask("a", "b", "q", "{}")
    with pytest.raises(AskConflictError, match="mutual ask refused"):
        runs.ask("b", "a", "back", "{}")
    with pytest.raises(NotAskPartyError):
        runs.answer("a", "a", "q", "{}")
    runs.cancel_message("a", "q")
    with pytest.raises(AskNotFoundError):
        runs.cancel_message("a", "q")
    runs.ask("b", "a", "back", "{}")  # nothing stands in the way any more


def test_sessions_list_every_run_with_what_it_said(runs):
    runs.update_session_info("b", label="reviewer", model="m1", status="idle")
    listed = {s["run_id"]: s for s in runs.sessions()}
    assert listed["a"].keys() == {"run_id", "last_seen"}
    assert listed["b"] == {
        "run_id": "b",
        "label": "reviewer",
        "model": "m1",
        "status": "idle",
        "last_seen": listed["b"]["last_seen"],
    }
