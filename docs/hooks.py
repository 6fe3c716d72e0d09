"""MkDocs hook: the references page's list comes from ``hardware.references`` (one definition
of each paper), written where a page says ``<!-- references -->``."""

from __future__ import annotations

from typing import Any

from hardware.references import references_markdown

MARKER = "<!-- references -->"


def on_page_markdown(markdown: str, **_: Any) -> str:
    return markdown.replace(MARKER, references_markdown()) if MARKER in markdown else markdown
