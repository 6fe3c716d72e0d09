"""One headline claim of a paper beside our number, and how the two compare.

Every reproduction script turns its ``results.json`` into ``Headline`` rows
(``headlines(results) -> list[Headline]``); ``experiments.reproductions`` collects them into
``docs/reproductions.md``. An effect is measured against its no-effect value (0 for a relative
change in percent, 1 for a speed-up or a ratio), so a row reproduces in direction when ours
lies on the paper's side of that value, and in magnitude when our effect is within 2x of the
paper's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

MAGNITUDE_FACTOR = 2.0


@dataclass(frozen=True)
class Headline:
    """A paper's headline number and ours, for one setup.

    ``paper_value`` is the paper's representative value (the midpoint where it gives a range,
    ``paper_text`` the range as printed); ``no_effect`` is the value meaning "no difference"
    (0 for a change in percent, 1 for a speed-up); ``setup`` says whether the row runs the
    paper's stated configuration ("paper setup") or a labelled variant; ``cause`` explains a row
    that does not reproduce (required for such a row, see ``check``).
    """

    paper: str
    where: str
    claim: str
    metric: str
    unit: str
    paper_value: float
    paper_text: str
    ours: float
    no_effect: float
    setup: str
    command: str
    cause: str = ""

    @property
    def ratio(self) -> float:
        """Our effect over the paper's, both measured from ``no_effect``."""
        paper_effect = self.paper_value - self.no_effect
        if paper_effect == 0.0:
            raise ValueError(f"{self.paper} {self.where}: paper value equals the no-effect value {self.no_effect}")
        return (self.ours - self.no_effect) / paper_effect

    @property
    def direction_ok(self) -> bool:
        return math.isfinite(self.ours) and self.ratio > 0.0

    @property
    def magnitude_ok(self) -> bool:
        return self.direction_ok and 1.0 / MAGNITUDE_FACTOR <= self.ratio <= MAGNITUDE_FACTOR

    @property
    def reproduced(self) -> bool:
        return self.magnitude_ok

    def check(self) -> None:
        """Raise if a row that does not reproduce names no cause."""
        if not self.reproduced and not self.cause.strip():
            raise ValueError(f"{self.paper} {self.where} ({self.claim}, {self.setup}) does not reproduce "
                             f"(ours {self.ours:g} vs paper {self.paper_value:g}) and names no cause")
