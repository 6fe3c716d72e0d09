"""Reading generated markdown tables in tests: ``to_markdown`` pads columns to a common width."""

from __future__ import annotations

import re


def unpadded(text: str) -> str:
    """``text`` with every run of spaces as one, so a row reads ``| key | value |``."""
    return re.sub(r" {2,}", " ", text)
