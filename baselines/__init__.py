"""Baseline policies (paper schedulers as heuristics over env observations) and planners.

    import baselines
    policy = baselines.make("least_outstanding", env)
    action, _ = policy.predict(obs)
"""

from baselines.policy import Policy, make, policy_names, register

__all__ = ["Policy", "make", "policy_names", "register"]
