"""A decision may carry a reason: kept in the decision record's meta, bounded, and shown with each vote."""

from __future__ import annotations

from .conftest import OPERATOR, head


def ask(client, register, run_id: str) -> str:
    token = register(run_id)
    body = {"run_id": run_id, "token": token, "request_id": "r1", "tool_name": "bash", "description": "rm"}
    assert client.post("/permission_request", json=body).status_code == 200
    (approval,) = client.get("/api/v1/approvals", headers=OPERATOR).json()["approvals"]
    return str(approval["id"])


def test_a_rejection_keeps_its_reason(client, register, system):
    approval_id = ask(client, register, "run-a")
    response = client.post(
        f"/api/v1/approvals/{approval_id}/reject", json={"reason": "  not on a Friday  "}, headers=OPERATOR
    )
    assert response.status_code == 200, response.text
    decided = [r for r in system.log.read(f"approval-{approval_id}") if r.type == "ApprovalDecided"]
    assert decided[0].meta["reason"] == "not on a Friday"
    voters = client.get(f"/api/v1/console/approvals/{approval_id}", headers=OPERATOR).json()["voters"]
    assert [v["reason"] for v in voters] == ["not on a Friday"]


def test_a_reason_too_long_or_not_text_changes_nothing(client, register, system):
    approval_id = ask(client, register, "run-b")
    before = head(system)
    path = f"/api/v1/approvals/{approval_id}/reject"
    assert client.post(path, json={"reason": "x" * 501}, headers=OPERATOR).status_code == 413
    assert client.post(path, json={"reason": 42}, headers=OPERATOR).status_code == 400
    assert head(system) == before
