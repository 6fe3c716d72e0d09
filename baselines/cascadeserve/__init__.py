"""CascadeServe: the offline gear planner (Alg. 1: cascade search §4.2,
workload adaption §4.3, hardware mapping §4.4 eq. 1-4, batch tuning §4.5) and the online
``cascadeserve`` policy (gear switching with α hysteresis, §5)."""
