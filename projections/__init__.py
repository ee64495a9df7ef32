"""Read models folded from the event log: live, on replay, or as of any past moment."""

# Layering: projections imports only eventlog. It never imports actors or tools, and every
# view is pure: no clock, no I/O, no randomness (a test enforces the imports).

from ._runner import ViewRunner
from ._view import View
from ._views import Views
from .approvals import ApprovalHistoryView, ApprovalRow, PendingApprovalsView, RefusedAttempt
from .runs import FinishStatus, FinishStatusView, RunRegistryView, RunRow
from .timeline import TimelineEntry, TimelineView

__all__ = [
    "ApprovalHistoryView",
    "ApprovalRow",
    "FinishStatus",
    "FinishStatusView",
    "PendingApprovalsView",
    "RefusedAttempt",
    "RunRegistryView",
    "RunRow",
    "TimelineEntry",
    "TimelineView",
    "View",
    "ViewRunner",
    "Views",
]
