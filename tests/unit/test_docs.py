"""The documentation a newcomer walks: every doc is reachable from docs/README.md, and no link is dead.

A doc that no index links is a doc nobody finds; a link to a file that moved sends the reader nowhere.
Links are read with a Markdown parser (markdown-it-py, CommonMark), so that a path inside a code span
or a code block is not taken for a link, and reference-style links count as links.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
INDEX = DOCS / "README.md"
CHECKED = sorted([ROOT / "README.md", ROOT / "bench" / "README.md", *DOCS.rglob("*.md")])


def _tokens(tokens: list[Token]) -> list[Token]:
    flat: list[Token] = []
    for token in tokens:
        flat.append(token)
        flat.extend(_tokens(token.children or []))
    return flat


def links(markdown: str) -> list[str]:
    """Every link and image target in a Markdown text, as written."""
    found = []
    for token in _tokens(MarkdownIt("commonmark").parse(markdown)):
        target = token.attrs.get("href") if token.type == "link_open" else token.attrs.get("src")
        if token.type in ("link_open", "image") and isinstance(target, str):
            found.append(target)
    return found


def local_targets(doc: Path) -> dict[str, Path]:
    """The relative links of a doc, each resolved against the doc's folder (anchors and queries dropped)."""
    resolved = {}
    for target in links(doc.read_text()):
        parts = urlsplit(target)
        if parts.scheme or parts.netloc or not parts.path:  # a URL, a mail address, or an anchor in this doc
            continue
        resolved[target] = (doc.parent / unquote(parts.path)).resolve()
    return resolved


def test_links_are_read_as_markdown_reads_them() -> None:
    text = "See [a](a.md), ![b](img/b.png) and [c][ref], not `[d](d.md)`.\n\n    [e](e.md)\n\n[ref]: c.md#x\n"
    assert links(text) == ["a.md", "img/b.png", "c.md#x"]


@pytest.mark.parametrize("doc", CHECKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves_to_a_file_of_the_repository(doc: Path) -> None:
    for target, path in local_targets(doc).items():
        assert path.is_relative_to(ROOT), f"{doc.relative_to(ROOT)} links {target}, outside the repository"
        assert path.exists(), f"{doc.relative_to(ROOT)} links {target}, which does not exist"


def test_every_doc_is_linked_from_the_index() -> None:
    linked = set(local_targets(INDEX).values())
    docs = {doc.resolve() for doc in DOCS.rglob("*.md")} - {INDEX.resolve()}
    missing = sorted(str(doc.relative_to(ROOT)) for doc in docs - linked)
    assert not missing, f"docs/README.md must link {missing}"


def test_the_readme_leads_to_the_index() -> None:
    assert INDEX.resolve() in local_targets(ROOT / "README.md").values()
