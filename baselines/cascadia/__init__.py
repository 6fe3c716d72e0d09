"""Cascadia: bi-level cascade planner (parallelism search + MILP deployment,
Chebyshev-guided thresholds, Alg. 1) and the ``cascadia`` policy on servegym/Cascade-v0."""
