"""One module per scenario preset; ``PRESETS`` maps names to builders."""

from __future__ import annotations

from collections.abc import Callable

from envs.scenario import Scenario
from envs.scenarios.default import default

PRESETS: dict[str, Callable[[], Scenario]] = {
    "default": default,
}
