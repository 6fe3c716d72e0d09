"""One module per scenario preset; ``PRESETS`` maps names to builders."""

from __future__ import annotations

from collections.abc import Callable

from envs.scenario import Scenario
from envs.scenarios.cascadeserve import cascadeserve
from envs.scenarios.cascadia import cascadia
from envs.scenarios.cauchy import cauchy, cauchy_dailymail, cauchy_longwriter
from envs.scenarios.cauchy_autoscaling import cauchy_autoscaling
from envs.scenarios.default import default
from envs.scenarios.mooncake import mooncake
from envs.scenarios.multitier import multitier
from envs.scenarios.pascal import pascal

PRESETS: dict[str, Callable[[], Scenario]] = {
    "default": default,
    "multitier": multitier,
    "pascal": pascal,
    "cauchy": cauchy,
    "cauchy_dailymail": cauchy_dailymail,
    "cauchy_longwriter": cauchy_longwriter,
    "cauchy_autoscaling": cauchy_autoscaling,
    "cascadia": cascadia,
    "cascadeserve": cascadeserve,
    "mooncake": mooncake,
}
