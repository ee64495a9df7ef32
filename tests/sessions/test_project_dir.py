"""Project base_dir containment on a real filesystem (seed §3.4).

Every test works in a temporary tree:

    tmp/root/       the user workspace (user_root)
    tmp/root2/      a sibling whose name starts with the root's
    tmp/outside/    a sentinel directory that must never be touched
"""

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actors import (
    ActorsError,
    InvalidBaseDirError,
    ProjectError,
    ensure_project_dir,
    validate_project_dir,
)

ESCAPE = "base_dir must be under user workspace"


class Tree:
    def __init__(self, top: Path) -> None:
        self.top = top
        self.root = top / "root"
        self.sibling = top / "root2"
        self.outside = top / "outside"
        for directory in (self.root, self.sibling, self.outside, self.root / "sub"):
            directory.mkdir(parents=True, exist_ok=True)
        (self.outside / "marker").write_text("do not touch")
        self.snapshot = self.outside_state()

    def outside_state(self) -> list[tuple[str, int]]:
        return sorted((str(p), p.lstat().st_mtime_ns) for p in [self.outside, *self.outside.rglob("*")])

    def assert_outside_untouched(self) -> None:
        assert self.outside_state() == self.snapshot, "the sentinel outside the root was touched"

    def link(self, name: str, target: str | Path) -> Path:
        path = self.root / name
        path.symlink_to(target)
        return path


@pytest.fixture
def t(tmp_path):
    tree = Tree(tmp_path)
    yield tree
    tree.assert_outside_untouched()


def refused(base: str, root: str, reason: str = ESCAPE) -> InvalidBaseDirError:
    with pytest.raises(InvalidBaseDirError) as caught:
        validate_project_dir(base, root)
    assert str(caught.value) == reason
    return caught.value


# --- argument rules ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "root", "reason"),
    [
        ("", "/r", "base_dir must not be empty"),
        ("", "relative", "base_dir must not be empty"),  # the empty check comes first
        ("proj", "/r", "base_dir must be absolute"),
        ("./proj", "/r", "base_dir must be absolute"),
        ("../r/proj", "/r", "base_dir must be absolute"),
        ("proj", "relative", "base_dir must be absolute"),
        ("/r/proj", "relative", "user_root must be absolute"),
        ("/r/proj", "", "user_root must be absolute"),
        ("/r/p\0q", "/r", "base_dir must not contain a NUL byte"),
        ("/r/p", "/r\0", "user_root must not contain a NUL byte"),
    ],
)
def test_argument_rules(base, root, reason):
    error = refused(base, root, reason)
    assert isinstance(error, ValueError)
    assert isinstance(error, ProjectError)
    assert isinstance(error, ActorsError)
    assert error.reason == reason
    assert error.sentinel == "invalid base_dir"


# --- lexical rules -----------------------------------------------------------------


def test_the_root_itself_is_allowed(t):
    assert validate_project_dir(str(t.root), str(t.root)) == str(t.root)
    assert validate_project_dir(f"{t.root}/", str(t.root)) == str(t.root)
    assert validate_project_dir(f"{t.root}/./sub/..", f"{t.root}/") == str(t.root)


@pytest.mark.parametrize(
    "tail", ["sub", "sub/new", "new", "new/deeper/still", "..hidden", "...", "a..b", ".x"]
)
def test_paths_under_the_root_are_allowed(t, tail):
    assert validate_project_dir(f"{t.root}/{tail}", str(t.root)) == f"{t.root}/{tail}"


def test_the_cleaned_path_is_returned(t):
    assert validate_project_dir(f"{t.root}//sub/./x/../y/", str(t.root)) == f"{t.root}/sub/y"
    assert validate_project_dir(f"/{t.root}/sub", str(t.root)) == f"{t.root}/sub"  # a leading "//" too
    assert validate_project_dir(t.root / "sub", t.root) == f"{t.root}/sub"  # Path objects


@pytest.mark.parametrize(
    "tail",
    ["..", "../outside", "../outside/new", "sub/../../outside", "sub/../..", "x/../../root2", "../../.."],
)
def test_dot_dot_cannot_climb_out(t, tail):
    refused(f"{t.root}/{tail}", str(t.root))


def test_dot_dot_that_stays_inside_is_fine(t):
    assert validate_project_dir(f"{t.root}/sub/../new", str(t.root)) == f"{t.root}/new"


def test_absolute_paths_elsewhere_are_refused(t):
    refused(str(t.outside), str(t.root))
    refused(str(t.outside / "new"), str(t.root))
    refused(str(t.top), str(t.root))
    refused("/", str(t.root))
    refused("/etc", str(t.root))


def test_a_sibling_sharing_the_prefix_is_outside(t):
    # A string-prefix check would let /root2 pass as "under" /root.
    refused(str(t.sibling), str(t.root))
    refused(f"{t.sibling}/proj", str(t.root))
    refused(f"{t.root}2", str(t.root))


def test_a_root_of_slash_contains_everything(t):
    assert validate_project_dir(str(t.outside), "/") == str(t.outside)


def test_a_root_that_does_not_exist_yet_is_compared_as_text(t):
    root = t.top / "later"
    assert validate_project_dir(f"{root}/proj", str(root)) == f"{root}/proj"
    refused(str(t.outside), str(root))


# --- symlinks ------------------------------------------------------------------------


def test_a_symlinked_final_component_pointing_outside_is_refused(t):
    link = t.link("escape", t.outside)
    refused(str(link), str(t.root))


def test_a_symlink_pointing_inside_is_allowed_and_kept_unresolved(t):
    link = t.link("alias", t.root / "sub")
    assert validate_project_dir(str(link), str(t.root)) == str(link)
    assert validate_project_dir(f"{link}/new", str(t.root)) == f"{link}/new"


def test_a_relative_symlink_out_is_refused(t):
    link = t.link("rel", "../outside")
    refused(str(link), str(t.root))
    refused(f"{link}/new", str(t.root))


def test_a_dangling_symlink_pointing_outside_is_refused(t):
    # The seed resolves only existing paths, so it would take a dangling link's own name
    # for a path inside the root; following the link shows where a mkdir would land.
    link = t.link("dangling", t.outside / "not-yet")
    refused(str(link), str(t.root))
    refused(f"{link}/deeper", str(t.root))
    assert not (t.outside / "not-yet").exists()


def test_a_dangling_symlink_pointing_inside_is_allowed(t):
    link = t.link("later", t.root / "not-yet")
    assert validate_project_dir(str(link), str(t.root)) == str(link)


def test_a_symlinked_parent_of_a_missing_path_is_refused(t):
    link = t.link("parent", t.outside)
    refused(f"{link}/new", str(t.root))
    refused(f"{link}/new/deeper/still", str(t.root))


def test_a_chain_of_symlinks_is_followed_to_its_end(t):
    t.link("last", t.outside)
    first = t.link("first", t.root / "middle")
    t.link("middle", t.root / "last")
    refused(str(first), str(t.root))
    refused(f"{first}/new", str(t.root))


def test_a_symlinked_directory_inside_an_existing_path_is_followed(t):
    (t.root / "sub" / "out").symlink_to(t.outside)
    refused(f"{t.root}/sub/out/new", str(t.root))


def test_a_symlink_to_the_sibling_is_refused(t):
    link = t.link("twin", t.sibling)
    refused(f"{link}/x", str(t.root))


def test_dot_dot_inside_a_link_target_is_followed_physically(t):
    # Target text "sub/../../outside" climbs out of the root once resolved.
    link = t.link("climb", "sub/../../outside")
    refused(str(link), str(t.root))
    # Through a missing directory the kernel would fail, but as text it lands on an
    # existing escaping link, which must still be followed.
    t.link("escape", t.outside)
    sneaky = t.link("sneaky", "missing/../escape")
    refused(f"{sneaky}/new", str(t.root))


def test_a_symlink_loop_is_refused(t):
    t.link("loop1", t.root / "loop2")
    t.link("loop2", t.root / "loop1")
    refused(
        f"{t.root}/loop1", str(t.root), "base_dir could not be resolved: too many levels of symbolic links"
    )


def test_a_symlinked_root_is_resolved_too(t):
    root_link = t.top / "root-link"
    root_link.symlink_to(t.root)
    assert validate_project_dir(f"{root_link}/p", str(root_link)) == f"{root_link}/p"
    assert validate_project_dir(f"{t.root}/p", str(root_link)) == f"{t.root}/p"
    assert validate_project_dir(f"{root_link}/p", str(t.root)) == f"{root_link}/p"
    refused(str(t.outside), str(root_link))


def test_a_regular_file_in_the_path_does_not_let_it_escape(t):
    (t.root / "file").write_text("")
    assert validate_project_dir(f"{t.root}/file/below", str(t.root)) == f"{t.root}/file/below"
    refused(f"{t.root}/file/../../outside", str(t.root))


# --- creation --------------------------------------------------------------------------


def test_ensure_creates_a_contained_directory(t):
    made = ensure_project_dir(f"{t.root}/proj/a/../b", str(t.root))
    assert made == f"{t.root}/proj/b"
    assert os.path.isdir(made)
    assert ensure_project_dir(made, str(t.root)) == made, "idempotent"


@pytest.mark.parametrize(
    "make_base",
    [
        lambda t: f"{t.root}/../outside/new",
        lambda t: f"{t.link('p', t.outside)}/new",
        lambda t: str(t.link("d", t.outside / "new")),
        lambda t: f"{t.sibling}/new",
    ],
)
def test_ensure_creates_nothing_when_validation_refuses(t, make_base):
    base = make_base(t)
    with pytest.raises(InvalidBaseDirError):
        ensure_project_dir(base, str(t.root))
    assert sorted(p.name for p in t.sibling.iterdir()) == []
    # the fixture checks that nothing appeared under outside/


# --- generated names ------------------------------------------------------------------

# Names that are a single path component: no slash, no NUL, not "." or "..".
names = st.text(st.characters(codec="utf-8", exclude_characters="/\0"), min_size=1, max_size=12).filter(
    lambda s: s not in (".", "..") and len(s.encode()) <= 200
)
segments = st.lists(st.one_of(names, st.sampled_from(["..", ".", ""])), min_size=1, max_size=8)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    tree = Tree(tmp_path_factory.mktemp("generated"))
    tree.link("escape", tree.outside)
    yield tree
    tree.assert_outside_untouched()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=300)
@given(parts=segments)
def test_generated_paths_match_a_lexical_oracle(shared, parts):
    # Without symlinks in the path, containment is exactly the lexical rule.
    parts = [p for p in parts if p != "escape"]
    base = os.path.join(str(shared.root), *parts)
    expected = os.path.normpath(base)
    inside = expected == str(shared.root) or expected.startswith(str(shared.root) + os.sep)
    if inside:
        assert validate_project_dir(base, str(shared.root)) == expected
    else:
        refused(base, str(shared.root))
    shared.assert_outside_untouched()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=200)
@given(parts=st.lists(names, max_size=4))
def test_anything_below_an_escaping_link_is_refused(shared, parts):
    base = os.path.join(str(shared.root), "escape", *parts)
    refused(base, str(shared.root))
    with pytest.raises(InvalidBaseDirError):
        ensure_project_dir(base, str(shared.root))
    shared.assert_outside_untouched()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture], max_examples=100)
@given(parts=st.lists(names, min_size=1, max_size=3))
def test_ensure_creates_generated_names_only_inside(shared, parts):
    parts = [p for p in parts if p != "escape"] or ["fallback"]
    made = ensure_project_dir(os.path.join(str(shared.root), "made", *parts), str(shared.root))
    assert os.path.isdir(made)
    assert os.path.commonpath([made, str(shared.root)]) == str(shared.root)
    shared.assert_outside_untouched()
