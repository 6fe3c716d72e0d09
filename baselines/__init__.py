"""Baseline policies (paper schedulers as heuristics over env observations) and planners.

    import baselines
    policy = baselines.make("least_outstanding", env)
    action, _ = policy.predict(obs)
"""

from baselines.policy import Policy, make, policy_names, register
from baselines import routing_classic  # noqa: F401  (registers round_robin, random, least_outstanding, least_kv)
from baselines import infaas  # noqa: F401  (registers infaas)
from baselines import pascal  # noqa: F401  (registers pascal, pascal_no_migration, pascal_non_adaptive)
from baselines.cauchy import routing as cauchy_routing  # noqa: F401  (registers cauchy_gwrr, basic_rr, token_weighted_rr)
from baselines.cauchy import autoscaler as cauchy_autoscaler  # noqa: F401  (registers cauchy_autoscaler, cauchy_static, cauchy_aggregated)
from baselines import llumnix  # noqa: F401  (registers llumnix, llumnix_binary, no_priority)
from baselines import llumnix_migration  # noqa: F401  (registers llumnix_migration, llumnix_migration_public)
from baselines import llumnix_scaling  # noqa: F401  (registers llumnix_scaling, llumnix_scaling_public)
from baselines.cascadeserve import policy as cascadeserve_policy  # noqa: F401  (registers cascadeserve)
from baselines.cascadia import policy as cascadia_policy  # noqa: F401  (registers cascadia)
from baselines import cache_aware  # noqa: F401  (registers sglang_cache_aware, dynamo_kv, llmd_scorers, production_stack_prefix)

__all__ = ["Policy", "make", "policy_names", "register"]
