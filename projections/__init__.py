"""Read models folded from the event log: live, on replay, or as of any past moment."""

# Layering: projections imports only eventlog. It never imports actors or tools, and every
# view is pure: no clock, no I/O, no randomness (a test enforces the imports).

from ._runner import ViewRunner
from ._view import View
from ._views import Views
from .approvals import ApprovalHistoryView, ApprovalRow, PendingApprovalsView, RefusedAttempt
from .projects import Project, ProjectsView
from .runs import FinishStatus, FinishStatusView, RunRegistryView, RunRow
from .sessions import AgentActivityView, SessionRow, SessionsView, SessionTurn, TurnEvent
from .timeline import TimelineEntry, TimelineView

__all__ = [
    "AgentActivityView",
    "ApprovalHistoryView",
    "ApprovalRow",
    "FinishStatus",
    "FinishStatusView",
    "PendingApprovalsView",
    "Project",
    "ProjectsView",
    "RefusedAttempt",
    "RunRegistryView",
    "RunRow",
    "SessionRow",
    "SessionTurn",
    "SessionsView",
    "TimelineEntry",
    "TimelineView",
    "TurnEvent",
    "View",
    "ViewRunner",
    "Views",
]
