"""Learned agents against each paper's best heuristic, on that paper's headline metric.

One recipe per paper scenario (``agents/recipes/<scenario>.yml``); ``python -m
experiments.agents_vs_papers`` trains each recipe's agent, evaluates it and the heuristics on
the same held-out seeds and writes ``results/agents_vs_papers/<scenario>/report.md``.
"""
