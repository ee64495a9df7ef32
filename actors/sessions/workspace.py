"""Workspaces on disk: the directory layout of agents, users and groups, and project containment."""

from __future__ import annotations

import os
import stat
from typing import Final, TypeAlias

from .._errors import InvalidBaseDirError, WorkspaceIdError, WorkspaceSetupError

StrPath: TypeAlias = str | os.PathLike[str]

# The subdirectories of a user or group home, created by the setup functions: the shared
# user-data root (mounted as /user in a sandbox), its cache, user-level skills and
# delegates, and uploaded assets.
_HOME_SUBDIRS: Final = (
    ("data",),
    ("data", ".cache"),
    ("data", ".agents", "skills"),
    ("data", ".agents", "delegates"),
    ("data", "assets"),
)
_DIR_MODE: Final = 0o755
# Linux gives up after 40 symlinks in one lookup (ELOOP); so do we.
_MAX_SYMLINKS: Final = 40


def agent_workspace_dir(base: StrPath, agent_id: str) -> str:
    """`base/agents/<agent>`: the user-independent directory of an agent and its skills."""
    return _join(base, "agents", _component("agent", agent_id))


def user_home_dir(base: StrPath, user_id: str) -> str:
    """`base/users/<user>`: a user's home, shared by all the user's agents."""
    return _join(base, "users", _component("user", user_id))


def group_home_dir(base: StrPath, group_id: str) -> str:
    """`base/users/group-<group>`: a group's home; the prefix keeps it apart from a user's."""
    return _join(base, "users", "group-" + _component("group", group_id))


def user_agent_dir(base: StrPath, user_id: str, agent_id: str) -> str:
    """`<user home>/agents/<agent>`: the per-(user, agent) area where the agent's projects live."""
    return _join(user_home_dir(base, user_id), "agents", _component("agent", agent_id))


def group_agent_dir(base: StrPath, group_id: str, agent_id: str) -> str:
    """`<group home>/agents/<agent>`: the per-(group, agent) area under a group home."""
    return _join(group_home_dir(base, group_id), "agents", _component("agent", agent_id))


def user_data_dir(home: StrPath) -> str:
    """`<home>/data`: the shared user-data root of a user or group home."""
    return _join(home, "data")


def user_assets_dir(home: StrPath) -> str:
    """`<home>/data/assets`: uploaded files, shared across the home's agents."""
    return _join(home, "data", "assets")


def user_skills_dir(home: StrPath) -> str:
    """`<home>/.agents/skills`: the user-level skills directory of a home."""
    return _join(home, ".agents", "skills")


def system_db_skills_dir(base: StrPath) -> str:
    """`base/.agents/db-skills`: system-scope skills installed at run time, apart from built-ins."""
    return _join(base, ".agents", "db-skills")


def setup_agent_workspace(base: StrPath, agent_id: str) -> str:
    """Create `agents/<agent>/.agents/skills` under `base` and return the agent directory."""
    _require("agent", agent_id)
    directory = agent_workspace_dir(base, agent_id)
    _make_dirs(_join(directory, ".agents", "skills"))
    return directory


def setup_user_workspace(base: StrPath, user_id: str, agent_id: str) -> str:
    """Create a user's home, its shared subdirectories and the agent's area; return the home."""
    _require("user", user_id)
    _require("agent", agent_id)
    return _setup_home(user_home_dir(base, user_id), user_agent_dir(base, user_id, agent_id))


def setup_group_workspace(base: StrPath, group_id: str, agent_id: str) -> str:
    """Create a group's home, its shared subdirectories and the agent's area; return the home."""
    _require("group", group_id)
    _require("agent", agent_id)
    return _setup_home(group_home_dir(base, group_id), group_agent_dir(base, group_id, agent_id))


def validate_project_dir(base_dir: StrPath, user_root: StrPath) -> str:
    """Check that `base_dir` lies inside `user_root` and return it cleaned lexically.

    Both paths are cleaned (`.`, `..` and repeated slashes resolved as text), then every
    symlink that exists on disk is followed, including a dangling one; for a path that does
    not exist yet, the nearest existing ancestor is resolved and the missing tail appended.
    `base_dir` equal to `user_root` is allowed. The returned path is the cleaned
    `base_dir` with its symlinks left in place: the form a project stores.
    """
    base, root = os.fspath(base_dir), os.fspath(user_root)
    if not base:
        raise InvalidBaseDirError("base_dir must not be empty")
    if not os.path.isabs(base):
        raise InvalidBaseDirError("base_dir must be absolute")
    if not os.path.isabs(root):
        raise InvalidBaseDirError("user_root must be absolute")
    # A NUL byte cannot be part of any path the kernel accepts; refusing it here keeps
    # it out of stored projects and out of the os calls below.
    if "\0" in base:
        raise InvalidBaseDirError("base_dir must not contain a NUL byte")
    if "\0" in root:
        raise InvalidBaseDirError("user_root must not contain a NUL byte")
    clean_base, clean_root = _clean(base), _clean(root)
    real_base = _resolve(clean_base, "base_dir")
    real_root = _resolve(clean_root, "user_root")
    if real_base != real_root:
        rel = os.path.relpath(real_base, real_root)
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            raise InvalidBaseDirError("base_dir must be under user workspace")
    return clean_base


def ensure_project_dir(base_dir: StrPath, user_root: StrPath) -> str:
    """Validate `base_dir` against `user_root`, create it, and return it cleaned.

    Nothing is created unless validation passes.
    """
    directory = validate_project_dir(base_dir, user_root)
    _make_dirs(directory)
    return directory


def _setup_home(home: str, agent_dir: str) -> str:
    for parts in _HOME_SUBDIRS:
        _make_dirs(_join(home, *parts))
    _make_dirs(agent_dir)
    return home


def _require(kind: str, value: str) -> None:
    if not value:
        raise WorkspaceIdError(f"{kind} ID must not be empty")


def _component(kind: str, value: str) -> str:
    # The seed joins ids into paths unchecked, so an id of "../x" would land outside the
    # tree; an id must be one path component. Empty stays allowed, as in the seed's joins.
    separators = [sep for sep in (os.sep, os.altsep) if sep]
    if value in (os.curdir, os.pardir) or "\0" in value or any(s in value for s in separators):
        raise WorkspaceIdError(f"{kind} ID must be a single path component")
    return value


def _join(first: StrPath, *rest: str) -> str:
    # Go's filepath.Join: empty elements are skipped and the result is cleaned.
    parts = [part for part in (os.fspath(first), *rest) if part]
    return _clean(os.path.join(*parts)) if parts else ""


def _clean(path: str) -> str:
    cleaned = os.path.normpath(path)
    # POSIX lets normpath keep exactly two leading slashes; Go's Clean does not.
    return os.sep + cleaned.lstrip(os.sep) if cleaned.startswith(os.sep * 2) else cleaned


def _make_dirs(path: str) -> None:
    try:
        os.makedirs(path, mode=_DIR_MODE, exist_ok=True)
    except OSError as error:
        raise WorkspaceSetupError(f"create {path!r}: {error.strerror or error}") from error


def _resolve(path: str, name: str) -> str:
    """The physical form of an absolute, cleaned path: each existing symlink followed.

    Walks one component at a time. The first component that does not exist ends the walk:
    the rest is appended as text, so a missing path under a symlinked parent resolves to
    where it would be created.
    """
    pending = path.split(os.sep)[::-1]
    resolved = os.sep
    followed = 0
    while pending:
        part = pending.pop()
        if part in ("", os.curdir):
            continue
        if part == os.pardir:
            resolved = os.path.dirname(resolved)
            continue
        candidate = os.path.join(resolved, part)
        try:
            mode = os.lstat(candidate).st_mode
        except (FileNotFoundError, NotADirectoryError):
            rest = pending[::-1]
            if os.pardir not in rest:
                return _clean(os.path.join(candidate, *rest))
            # A link target like `missing/../elsewhere`: as text it climbs back into
            # directories that exist, whose symlinks must still be followed, so walk the
            # cleaned text again (only a further symlink can bring `..` back, and those
            # are counted, so this ends).
            pending = _clean(os.path.join(candidate, *rest)).split(os.sep)[::-1]
            resolved = os.sep
            continue
        except OSError as error:
            # Fail closed: a path we cannot inspect cannot be shown to be contained.
            raise InvalidBaseDirError(f"{name} could not be resolved: {error.strerror or error}") from error
        if not stat.S_ISLNK(mode):
            resolved = candidate
            continue
        followed += 1
        if followed > _MAX_SYMLINKS:
            raise InvalidBaseDirError(f"{name} could not be resolved: too many levels of symbolic links")
        target = os.readlink(candidate)
        if os.path.isabs(target):
            resolved = os.sep
        pending.extend(target.split(os.sep)[::-1])
    return resolved
