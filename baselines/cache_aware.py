"""Cache-aware routers of production serving stacks, as servegym/Routing-v0 policies.

Each reads, per instance, how much of the arriving request's prompt it holds cached
(``prefix_match_tokens``, exact: what the engine's prefix cache would find, as routers fed
by KV-cache events see it), its cache occupancy and its load, from the observation of a
scenario with prefix caching (``envs.observation``). Each follows its project's own
documentation and code, cited below; where a router keeps an approximate index of its own
routing history instead of the engine's events (SGLang's radix trees, the vLLM production
stack's hash trie), the exact match stands in for it, which can only help the router. Ties
go to the lower slot (the projects break them at random or by iteration order).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from baselines.policy import register
from baselines.routing_classic import RoutingPolicy, SeededRouting, first_minimum
from envs.schema import DecodedObservation


class CacheAwarePolicy(RoutingPolicy):
    """Base: refuses scenarios without prefix caching (no ``prefix_match_tokens`` to read)."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        if "prefix_match_tokens" not in {f.name for f in self.schema.instance_fields}:
            raise ValueError(f"policy {self.name!r} reads prefix_match_tokens, which scenario "
                             f"{self.scenario.name!r} does not observe: its instances do not cache prefixes")

    @staticmethod
    def match_rate(view: DecodedObservation) -> np.ndarray:
        """Cached share of the request's prompt per instance (0 without a prompt)."""
        prompt = view.context["prompt_tokens"]
        return view.instances["prefix_match_tokens"] / prompt if prompt > 0 else np.zeros(len(view.instances["waiting"]))


@register
class SGLangCacheAware(CacheAwarePolicy):
    """SGLang's cache-aware router (sgl-project/sglang ``sgl-router/src/policies/cache_aware.rs``):
    when the load is imbalanced, (max − min) > ``balance_abs_threshold`` and max >
    ``balance_rel_threshold`` × min over the requests each instance holds, route to the least
    loaded; otherwise to the instance with the longest prefix match if its match rate (matched /
    prompt) exceeds ``cache_threshold``, else to the one with the smallest tree. The tree holds
    the prompts routed to an instance, each adding what it did not share with the tree; here a
    count kept by the policy over the episode (prompt − match at each decision), the trees'
    LRU eviction left out (``max_tree_size`` 2^26 characters, some 16 M tokens, beyond an
    episode). Defaults: the ``sglang_router`` launcher's (``RouterArgs``): 0.3, 64, 1.5. Among
    equal matches, the less loaded instance."""

    name = "sglang_cache_aware"

    def __init__(self, env: gym.Env, cache_threshold: float = 0.3, balance_abs_threshold: float = 64,
                 balance_rel_threshold: float = 1.5) -> None:
        super().__init__(env)
        if not 0.0 <= cache_threshold <= 1.0:
            raise ValueError(f"cache_threshold must be in [0, 1], got {cache_threshold!r}")
        if not (balance_abs_threshold >= 0 and balance_rel_threshold >= 1.0):
            raise ValueError(f"balance thresholds must be >= 0 and >= 1, got {balance_abs_threshold!r}, "
                             f"{balance_rel_threshold!r}")
        self.cache_threshold = cache_threshold
        self.balance_abs_threshold = balance_abs_threshold
        self.balance_rel_threshold = balance_rel_threshold
        self.tree_tokens = np.zeros(self.max_instances)

    def reset(self) -> None:
        self.tree_tokens = np.zeros(self.max_instances)

    def route(self, view: DecodedObservation, valid: np.ndarray) -> int:
        load = self.outstanding(view)
        high, low = load[valid].max(), load[valid].min()
        rate = self.match_rate(view)
        if high - low > self.balance_abs_threshold and high > low * self.balance_rel_threshold:
            choice = first_minimum(load, valid)
        else:
            best = np.where(valid, rate, -1.0).max()
            if best > self.cache_threshold:
                choice = first_minimum(load, valid & (rate == best))
            else:
                choice = first_minimum(self.tree_tokens, valid)
        self.tree_tokens[choice] += view.context["prompt_tokens"] * (1.0 - rate[choice])
        return choice


@register
class DynamoKVRouter(CacheAwarePolicy):
    """NVIDIA Dynamo's KV router (ai-dynamo/dynamo ``docs/router/README.md``, "Cost Function"):
    the lowest ``kv_overlap_score_weight`` × potential prefill blocks + potential active blocks,
    where prefill blocks are the prompt's blocks not cached there ((prompt − match) / block) and
    active blocks those its requests hold or will hold (KV in use, waiting prompts, and this
    request's). Temperature 0 (the default): the lowest cost, no sampling. Both terms are counted
    in tokens (blocks × block size), which orders the instances the same way."""

    name = "dynamo_kv"

    def __init__(self, env: gym.Env, kv_overlap_score_weight: float = 1.0) -> None:
        super().__init__(env)
        if not kv_overlap_score_weight >= 0:
            raise ValueError(f"kv_overlap_score_weight must be >= 0, got {kv_overlap_score_weight!r}")
        self.kv_overlap_score_weight = kv_overlap_score_weight

    def route(self, view: DecodedObservation, valid: np.ndarray) -> int:
        prompt = view.context["prompt_tokens"]
        prefill = prompt - view.instances["prefix_match_tokens"]
        active = (view.instances["kv_used_fraction"] * view.instances["kv_capacity"]
                  + view.instances["pending_prefill_tokens"] + prompt)
        return first_minimum(self.kv_overlap_score_weight * prefill + active, valid)


@register
class LlmdScorers(CacheAwarePolicy):
    """llm-d's inference scheduler (the Gateway API Inference Extension's endpoint picker with
    llm-d's default profile, ``default-plugins.yaml``): the highest weighted sum of
    ``prefix-cache-scorer`` (weight 3: matched / prompt blocks), ``queue-scorer`` (weight 2:
    (max − waiting) / (max − min) over the candidates, 1 when all wait alike) and
    ``kv-cache-utilization-scorer`` (weight 2: 1 − KV in use), then ``max-score-picker``
    (kubernetes-sigs/gateway-api-inference-extension ``pkg/epp/scheduling/framework/plugins``)."""

    name = "llmd_scorers"

    def __init__(self, env: gym.Env, prefix_weight: float = 3.0, queue_weight: float = 2.0,
                 kv_weight: float = 2.0) -> None:
        super().__init__(env)
        for label, weight in (("prefix_weight", prefix_weight), ("queue_weight", queue_weight), ("kv_weight", kv_weight)):
            if not weight >= 0:
                raise ValueError(f"{label} must be >= 0, got {weight!r}")
        self.weights = (prefix_weight, queue_weight, kv_weight)

    def route(self, view: DecodedObservation, valid: np.ndarray) -> int:
        waiting = view.instances["waiting"].astype(float)
        high, low = waiting[valid].max(), waiting[valid].min()
        queue = np.ones_like(waiting) if high == low else (high - waiting) / (high - low)
        kv = 1.0 - view.instances["kv_used_fraction"]
        prefix_weight, queue_weight, kv_weight = self.weights
        score = prefix_weight * self.match_rate(view) + queue_weight * queue + kv_weight * kv
        return first_minimum(-score, valid)


@register
class ProductionStackPrefixAware(SeededRouting, CacheAwarePolicy):
    """The vLLM production stack's prefix-aware routing (vllm-project/production-stack
    ``src/vllm_router/routers/routing_logic.py``, ``PrefixAwareRouter``): among the instances
    with the longest prefix match, one at random (all of them when none matches, ``seed``'s
    generator rebuilt at every episode start); no load term."""

    name = "production_stack_prefix"

    def route(self, view: DecodedObservation, valid: np.ndarray) -> int:
        match = np.where(valid, view.instances["prefix_match_tokens"], -1.0)
        best = match.max()
        candidates = np.flatnonzero(valid & (match == best)) if best > 0 else np.flatnonzero(valid)
        return int(self.rng.choice(candidates))
