"""Finding the checkpoint to resume from in a run's records: by approval, request or seq, and when none."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from flightlog import ConfigurationError
from flightlog.integrations.checkpoints import CHECKPOINT, GATE, ResumePointNotFound, resume_point

APPROVAL = "6f1c0d7e-0000-5000-8000-000000000001"


def report(seq: int, state: str, payload: dict[str, Any]) -> dict[str, Any]:
    data = {"run_id": "r", "state": state, "payload": orjson.dumps(payload).decode()}
    return {"seq": seq, "type": "RunReported", "data": data}


def checkpoint(seq: int, checkpoint_id: str, namespace: str = "") -> dict[str, Any]:
    payload = {"thread_id": "t", "checkpoint_ns": namespace, "checkpoint_id": checkpoint_id, "step": seq}
    return report(seq, CHECKPOINT, payload)


def gate(seq: int, checkpoint_id: str | None, request_id: str = "call-2") -> dict[str, Any]:
    payload = {
        "thread_id": "t",
        "checkpoint_ns": "",
        "checkpoint_id": checkpoint_id,
        "request_id": request_id,
    }
    return report(seq, GATE, {**payload, "tool": "deploy", "tool_call_id": request_id})


def requested(seq: int, approval_id: str = APPROVAL, request_id: str = "call-2") -> list[dict[str, Any]]:
    """A permission request as the server records it: its approval first, then the run's record."""
    approval = {"approval_id": approval_id, "kind": "permission", "run_id": "r", "tool_call_id": request_id}
    permission = {"approval_id": approval_id, "request_id": request_id, "run_id": "r", "tool_name": "deploy"}
    return [
        {"seq": seq, "type": "ApprovalRequested", "data": approval},
        {"seq": seq + 1, "type": "PermissionRequested", "data": permission},
    ]


def decided(seq: int, approval_id: str = APPROVAL) -> dict[str, Any]:
    return {"seq": seq, "type": "ApprovalDecided", "data": {"approval_id": approval_id, "decision": "reject"}}


RECORDS = [
    {"seq": 1, "type": "RunRegistered", "data": {"run_id": "r"}},
    checkpoint(2, "c-1"),
    checkpoint(3, "c-2"),
    gate(4, "c-2"),
    *requested(5),
    decided(7),
    checkpoint(8, "c-3"),
]


NAMES = [{"approval_id": APPROVAL}, {"request_id": "call-2"}, *({"seq": seq} for seq in (4, 5, 6, 7))]


@pytest.mark.parametrize("named", NAMES)
def test_the_gate_report_names_the_checkpoint_however_the_call_is_named(named):
    point = resume_point(RECORDS, **named)
    assert point.config == {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": "c-2"}}
    assert (point.source, point.seq, point.tool, point.request_id) == ("gate", 4, "deploy", "call-2")
    assert point.approval_id == APPROVAL


def test_without_a_gate_report_the_last_root_checkpoint_before_the_request_is_taken():
    records = [
        checkpoint(2, "c-1"),
        checkpoint(3, "c-sub", namespace="tools:1"),
        *requested(4),
        checkpoint(6, "c-2"),
    ]
    point = resume_point(records, approval_id=APPROVAL)
    assert (point.checkpoint_id, point.source, point.seq) == ("c-1", "checkpoint", 2)


def test_a_restarted_agent_filing_again_resumes_where_the_first_filing_was():
    records = [gate(2, "c-old"), gate(3, "c-1"), *requested(4), gate(6, "c-after"), *requested(7)]
    assert resume_point(records, request_id="call-2").checkpoint_id == "c-1"


def test_a_gate_without_a_checkpoint_falls_back_to_the_checkpoints_before_it():
    assert resume_point([checkpoint(2, "c-1"), gate(3, None), *requested(4)], seq=5).checkpoint_id == "c-1"


@pytest.mark.parametrize(
    ("records", "named", "says"),
    [
        (RECORDS, {"approval_id": "nope"}, "no approval 'nope'"),
        (RECORDS, {"request_id": "call-9"}, "no permission request 'call-9'"),
        (RECORDS, {"seq": 99}, "no record at seq 99"),
        (RECORDS, {"seq": 2}, "names no gated call"),
        ([gate(2, None), *requested(3)], {"request_id": "call-2"}, "run the graph with a checkpointer"),
        ([*requested(2), checkpoint(4, "c-late")], {"request_id": "call-2"}, "no LangGraph checkpoint"),
    ],
)
def test_a_call_with_nothing_to_resume_from_is_a_lookup_error_that_says_why(records, named, says):
    with pytest.raises(ResumePointNotFound, match=says) as failed:
        resume_point(records, **named)
    assert isinstance(failed.value, LookupError)


def test_the_call_is_named_by_exactly_one_keyword():
    with pytest.raises(ConfigurationError, match="one of"):
        resume_point(RECORDS, approval_id=APPROVAL, seq=4)
    with pytest.raises(ConfigurationError, match="one of"):
        resume_point(RECORDS)
