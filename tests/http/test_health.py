"""`/health` answers 200 `ok` to any method, with any body or none, as avenor's broker does."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("method", ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"])
def test_health_is_ok_to_any_method(client, method):
    response = client.request(method, "/health")
    assert response.status_code == 200
    if method != "HEAD":
        assert response.text == "ok"


FORM = "application/x-www-form-urlencoded"


@pytest.mark.parametrize(("body", "content_type"), [(b"", None), (b"x=1", FORM), (b"hi", "text/plain")])
def test_a_post_with_any_body_or_none_is_ok(client, body, content_type):
    headers = {"Content-Type": content_type} if content_type else {}
    response = client.post("/health", content=body, headers=headers)
    assert response.status_code == 200
    assert response.text == "ok"


def test_a_cross_site_page_still_gets_no_answer(client):
    response = client.post("/health", headers={"Origin": "http://evil.example"})
    assert response.status_code == 403
