"""Synthetic workloads whose prompts share prefixes, with block hashes for prefix caching.

Three generators, each with defaults taken from a public benchmark (source beside each):

- ``shared_prompt_requests``: groups of requests that share a system prompt, each with its own
  question (SGLang's ``bench_serving --dataset-name generated-shared-prefix``);
- the same with a few-shot template (``FEW_SHOT_GSM8K``: every request repeats one 8-shot
  chain-of-thought prompt before its question);
- ``session_requests``: multi-turn conversations, each turn's prompt the whole history (a
  common prefix, the conversation's own context, every earlier user message and answer) plus a
  new message (vLLM's ``benchmarks/multi_turn`` generator).

Hashes name blocks of ``block_tokens`` tokens (16, vLLM's default KV block) by their content:
block i of a text is the same block wherever the same text has the same first (i + 1) blocks.
A shared prompt's full blocks hash alike across its group; a block that straddles the end of the
shared part or of a turn is the request's own. Session turns carry hashes over their answer, so
the next turn finds it cached (vLLM caches decode blocks too). Arrivals are open loop: a
conversation's next turn arrives ``think time`` after the previous one arrived, whether or not
its answer has finished (then the next turn finds less cached).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from simulator.request import BlockHashes, Request
from simulator.workloads._checks import count, positive_float
from simulator.workloads.arrivals import ArrivalProcess

VLLM_BLOCK_TOKENS = 16


@dataclass(frozen=True)
class SharedPromptSpec:
    """Groups of requests sharing a prompt: ``groups`` x ``prompts_per_group`` requests, each
    ``prefix_tokens`` of its group's shared prompt + ``question_tokens`` of its own, answered in
    ``output_tokens``."""

    groups: int
    prompts_per_group: int
    prefix_tokens: int
    question_tokens: int
    output_tokens: int

    def __post_init__(self) -> None:
        for name in ("groups", "prompts_per_group", "question_tokens", "output_tokens"):
            count(f"SharedPromptSpec.{name}", getattr(self, name), minimum=1)
        count("SharedPromptSpec.prefix_tokens", self.prefix_tokens)


SGLANG_SHARED_PREFIX = SharedPromptSpec(groups=64, prompts_per_group=16, prefix_tokens=2048, question_tokens=128,
                                        output_tokens=256)
"""SGLang ``python/sglang/bench_serving.py`` ``generated-shared-prefix`` defaults: ``--gsp-num-groups 64``,
``--gsp-prompts-per-group 16``, ``--gsp-system-prompt-len 2048``, ``--gsp-question-len 128``,
``--gsp-output-len 256``."""

FEW_SHOT_GSM8K = SharedPromptSpec(groups=1, prompts_per_group=1319, prefix_tokens=8 * 177, question_tokens=62,
                                  output_tokens=115)
"""One 8-shot chain-of-thought prompt (Wei et al., Chain-of-Thought Prompting, NeurIPS 2022: 8 GSM8K
exemplars) before each of GSM8K's 1,319 test questions. Lengths from RouteLLM's GSM8K rows
(``lm-sys/RouteLLM`` ``gsm8k_responses.csv``): questions 46.3 words, GPT-4-1106 answers 86.3 words
on average, at 4/3 tokens per word (OpenAI's rule of thumb, 100 tokens ~ 75 words): question 62,
answer 115, exemplar 177 tokens."""


def _own_hashes(counter: list[int], count_: int) -> list[int]:
    """``count_`` hashes no other block has (``counter[0]`` is the next free value)."""
    start = counter[0]
    counter[0] += count_
    return list(range(start, start + count_))


def shared_prompt_requests(
    spec: SharedPromptSpec,
    arrivals: ArrivalProcess,
    rng: np.random.Generator,
    *,
    block_tokens: int = VLLM_BLOCK_TOKENS,
) -> list[Request]:
    """The spec's requests in a random order (as SGLang shuffles them), arriving by ``arrivals``;
    ids 0..n-1 in arrival order."""
    block_tokens = count("block_tokens", block_tokens, minimum=1)
    total = spec.groups * spec.prompts_per_group
    group_of = np.repeat(np.arange(spec.groups), spec.prompts_per_group)
    rng.shuffle(group_of)
    arrival_s = np.asarray(arrivals.sample_arrival_times(total, rng), dtype=np.float64)
    counter = [0]
    shared = [_own_hashes(counter, spec.prefix_tokens // block_tokens) for _ in range(spec.groups)]
    prompt = spec.prefix_tokens + spec.question_tokens
    own_blocks = -(-prompt // block_tokens) - spec.prefix_tokens // block_tokens
    requests = []
    for request_id, (arrival, group) in enumerate(zip(arrival_s.tolist(), group_of.tolist())):
        hashes = shared[group] + _own_hashes(counter, own_blocks)
        requests.append(Request(request_id, arrival, prompt, spec.output_tokens,
                                block_hashes=BlockHashes(block_tokens, tuple(hashes))))
    return requests


@dataclass(frozen=True)
class SessionSpec:
    """Multi-turn conversations. Conversations start as a Poisson process at
    ``conversation_rate_rps``; each has a uniform number of user turns in
    [``min_turns``, ``max_turns``]; every prompt starts with ``common_prefix_tokens`` shared
    by all conversations, then the conversation's own context (lognormal with mean
    ``context_mean_tokens``, median ``context_median_ratio`` x mean, capped at
    ``context_max_tokens``), then the history; each user message is uniform in
    [``message_min_tokens``, ``message_max_tokens``], each answer in [``answer_min_tokens``,
    ``answer_max_tokens``]; a turn arrives an exponential think time of mean ``think_time_s``
    after the one before."""

    conversation_rate_rps: float
    min_turns: int
    max_turns: int
    common_prefix_tokens: int
    context_mean_tokens: float
    context_median_ratio: float
    context_max_tokens: int
    message_min_tokens: int
    message_max_tokens: int
    answer_min_tokens: int
    answer_max_tokens: int
    think_time_s: float

    def __post_init__(self) -> None:
        positive_float("SessionSpec.conversation_rate_rps", self.conversation_rate_rps)
        positive_float("SessionSpec.think_time_s", self.think_time_s)
        positive_float("SessionSpec.context_mean_tokens", self.context_mean_tokens)
        for low, high in (("min_turns", "max_turns"), ("message_min_tokens", "message_max_tokens"),
                          ("answer_min_tokens", "answer_max_tokens")):
            low_value = count(f"SessionSpec.{low}", getattr(self, low), minimum=1)
            if count(f"SessionSpec.{high}", getattr(self, high), minimum=1) < low_value:
                raise ValueError(f"SessionSpec.{high} {getattr(self, high)} is below {low} {low_value}")
        count("SessionSpec.common_prefix_tokens", self.common_prefix_tokens)
        count("SessionSpec.context_max_tokens", self.context_max_tokens, minimum=1)
        if not 0.0 < self.context_median_ratio < 1.0:
            raise ValueError(f"SessionSpec.context_median_ratio must be in (0, 1), got {self.context_median_ratio!r}")


VLLM_MULTI_TURN = SessionSpec(
    conversation_rate_rps=0.1, min_turns=6, max_turns=9, common_prefix_tokens=500, context_mean_tokens=1000.0,
    context_median_ratio=0.85, context_max_tokens=5000, message_min_tokens=120, message_max_tokens=160,
    answer_min_tokens=80, answer_max_tokens=120, think_time_s=20.0,
)
"""vLLM ``benchmarks/multi_turn/generate_multi_turn.json``: 12-18 messages (6-9 user turns), a 500-token
common prefix, per-conversation prefix lognormal of average 1,000 (``bench_dataset.py``'s default
median ratio 0.85) capped at 5,000, user messages uniform 120-160 tokens, answers 80-120. vLLM's
benchmark runs closed loop without think time; the think time here is LMCache's
``multi-round-qa.py`` example (10 users at 0.5 QPS in all: one question per user every 20 s), and
the conversation rate (one new conversation every 10 s) is ours, set per experiment."""


def session_requests(spec: SessionSpec, num_conversations: int, rng: np.random.Generator, *,
                     block_tokens: int = VLLM_BLOCK_TOKENS) -> list[Request]:
    """Every turn of ``num_conversations`` conversations, sorted by arrival (ids 0..n-1 in that
    order); each turn's ``block_hashes`` cover its prompt and answer, its ``session_id`` is its
    conversation's index."""
    num_conversations = count("num_conversations", num_conversations, minimum=1)
    block_tokens = count("block_tokens", block_tokens, minimum=1)
    starts_s = np.cumsum(rng.exponential(1.0 / spec.conversation_rate_rps, num_conversations))
    sigma = math.sqrt(2.0 * math.log(1.0 / spec.context_median_ratio))
    mu = math.log(spec.context_mean_tokens * spec.context_median_ratio)
    counter = [0]
    common = _own_hashes(counter, spec.common_prefix_tokens // block_tokens)
    turns: list[tuple[float, int, int, tuple[int, ...], int]] = []
    for conversation, start_s in enumerate(starts_s.tolist()):
        context = min(int(round(rng.lognormal(mu, sigma))), spec.context_max_tokens)
        num_turns = int(rng.integers(spec.min_turns, spec.max_turns + 1))
        messages = rng.integers(spec.message_min_tokens, spec.message_max_tokens + 1, num_turns).tolist()
        answers = rng.integers(spec.answer_min_tokens, spec.answer_max_tokens + 1, num_turns).tolist()
        gaps_s = rng.exponential(spec.think_time_s, num_turns - 1).tolist()
        history = spec.common_prefix_tokens + context
        text_blocks = -(-(history + sum(messages) + sum(answers)) // block_tokens)
        own = _own_hashes(counter, text_blocks - len(common))
        hashes = common + own  # block i of the conversation's whole text; each turn reads a prefix of it
        arrival_s = start_s
        for turn, (message, answer) in enumerate(zip(messages, answers)):
            prompt = history + message
            covered = -(-(prompt + answer) // block_tokens)
            turns.append((arrival_s, prompt, answer, tuple(hashes[:covered]), conversation))
            history = prompt + answer
            if turn < num_turns - 1:
                arrival_s += gaps_s[turn]
    turns.sort(key=lambda turn: turn[0])
    return [Request(request_id, arrival, prompt, answer, block_hashes=BlockHashes(block_tokens, hashes),
                    session_id=conversation)
            for request_id, (arrival, prompt, answer, hashes, conversation) in enumerate(turns)]
