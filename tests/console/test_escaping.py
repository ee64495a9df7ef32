"""Browser-free: the console renders run-supplied text as text, never as HTML.

Run ids, titles, actors and previews come from runs. The console's script builds every node
with `el()` (textContent) and has no HTML sink at all, so a run id like `<img onerror=…>`
stays characters on the page.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CONSOLE = Path(__file__).resolve().parents[2] / "tools" / "console"
SCRIPTS = sorted(CONSOLE.glob("*.js"))
HTML_SINKS = re.compile(
    r"\.(innerHTML|outerHTML)\b|insertAdjacentHTML|document\.write|\beval\s*\(|new\s+Function\b"
    r"|createContextualFragment|\.srcdoc\b|DOMParser"
)


def test_the_console_has_scripts_to_check():
    assert SCRIPTS, f"no scripts under {CONSOLE}"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_script_writes_html(script):
    source = script.read_text()
    found = [m.group() for m in HTML_SINKS.finditer(source)]
    assert found == [], f"{script.name} parses strings as HTML: {found}"


def test_every_element_gets_its_text_through_text_content():
    source = "\n".join(script.read_text() for script in SCRIPTS)
    builder = re.search(r"function el\(tag, text, cls\) \{(.*?)\n\}", source, re.DOTALL)
    assert builder is not None, "the console builds its nodes with el(tag, text, cls)"
    assert "node.textContent = String(text)" in builder.group(1)
    # Run data reaches the page through el() or textContent, never through an attribute
    # that a browser would run (on*=) or load (href/src) from it.
    assert not re.search(r"setAttribute\(\s*[\"'](on\w+|href|src)[\"']", source)
    assert ".textContent = " in source
