"""The console's long lists come a page at a time: pending approvals and the audit trail each
show their first page and a "more" button that follows the cursor to the rest."""

from __future__ import annotations

from actors import ApprovalRequest

from .test_browser import log_in, page, served, sync_api  # noqa: F401 - fixtures

MANY = 205  # more than a page of each list (200)


def test_more_follows_the_cursor_of_the_pending_approvals_and_the_audit_trail(served, page):  # noqa: F811
    url, system, tokens = served
    submit = system.approvals.submit
    ids = [submit(ApprovalRequest("shell", f"step {n:03d}", "ls", "low")).id for n in range(MANY)]
    system.approvals.resolve(ids[0], "reject", "bob")
    log_in(page, url, tokens["alice"], "alice")
    cards = page.locator("#approvals > li")
    sync_api.expect(cards).to_have_count(200)
    sync_api.expect(page.locator("#approvals-panel h2")).to_have_text(f"Pending approvals ({MANY - 1})")
    page.click("#approvals-more")
    sync_api.expect(cards).to_have_count(MANY - 1)
    sync_api.expect(page.locator("#approvals-more")).to_have_count(0)
    assert cards.last.get_attribute("data-approval-id") == ids[-1]
    rows = page.locator("#audit tbody tr")
    sync_api.expect(rows).to_have_count(200)
    page.click("#audit-more")
    sync_api.expect(rows).to_have_count(MANY)
    sync_api.expect(page.locator("#audit-more")).to_have_count(0)
    sync_api.expect(rows.last).to_contain_text("step 204")
