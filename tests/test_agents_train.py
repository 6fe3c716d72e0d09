"""agents.train / agents.config / agents.callbacks: every algorithm trains on Routing-v0 and logs
serving metrics to TensorBoard, resume continues the step count, periodic evaluation logs the
agent beside baselines, and hyper-parameter resolution is strict."""

from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.plugins.custom_scalar import layout_pb2

import envs
from agents import config as agent_config
from agents.config import (
    ALGORITHMS,
    TrainConfig,
    build_config,
    check_action_space,
    load_hyperparams,
    resolve_device,
    run_name,
    vecnormalize_path,
)
from agents.rollout import evaluate as rollout_evaluate
from agents.train import main, make_env, resolve_vec_env, resume, train, uses_subprocess_envs
from baselines import Policy, policy_names, register
from simulator.metrics import meets_slo

ROUTING = "servegym/Routing-v0"
EPISODE_REQUESTS = 30
TINY = {
    "ppo": ["n_steps=64", "batch_size=32", "n_epochs=1"],
    "maskable_ppo": ["n_steps=64", "batch_size=32", "n_epochs=1"],
    "recurrent_ppo": ["n_steps=64", "batch_size=32", "n_epochs=1", "policy_kwargs.lstm_hidden_size=16"],
    "a2c": ["n_steps=8"],
    "dqn": ["learning_starts=32", "buffer_size=1000", "batch_size=16", "target_update_interval=50"],
}


class _FirstValid(Policy):
    """Test policy: the first valid instance."""

    name = "test_train_first_valid"
    env_ids = (ROUTING,)

    def act(self, observation):
        return int(np.flatnonzero(observation["action_mask"])[0])


class _LastValid(Policy):
    """Test policy: the last valid instance."""

    name = "test_train_last_valid"
    env_ids = (ROUTING,)

    def act(self, observation):
        return int(np.flatnonzero(observation["action_mask"])[-1])


for _cls in (_FirstValid, _LastValid):
    if _cls.name not in policy_names():
        register(_cls)


def tiny_config(algo: str, timesteps: int = 128, extra: tuple[str, ...] = (), **kwargs) -> TrainConfig:
    # reward "slo" (the Routing-v0 sections default to "latency_balance"): returns below check SLO attainment
    overrides = [*TINY[algo], "policy_kwargs.net_arch=[32]", f"env_kwargs.episode_requests={EPISODE_REQUESTS}",
                 "env_kwargs.reward=slo", *extra]
    return build_config(ROUTING, "default", algo, 0, n_timesteps=timesteps, n_envs=1, device="cpu",
                        overrides=overrides, **kwargs)


def scalars(run_dir: Path) -> EventAccumulator:
    accumulator = EventAccumulator(str(run_dir), size_guidance={"scalars": 0, "tensors": 0})
    accumulator.Reload()
    return accumulator


def normalizer_stats(path: Path) -> dict[str, np.ndarray]:
    """Saved VecNormalize statistics (``agents.model_files``: plain arrays, read without pickle)."""
    with np.load(path, allow_pickle=False) as stored:
        return {key: stored[key] for key in stored.files}


def episode_ends(run_dir: Path) -> list[tuple[int, float]]:
    """(env step at which the episode ended, its return) from Monitor's CSV (one env)."""
    with open(run_dir / "monitor" / "0.monitor.csv") as handle:
        handle.readline()
        rows = list(csv.DictReader(handle))
    return list(zip(np.cumsum([int(r["l"]) for r in rows]).tolist(), [float(r["r"]) for r in rows]))


@pytest.mark.parametrize("algo", sorted(ALGORITHMS))
def test_each_algorithm_logs_episode_serving_metrics_averaged_between_dumps(algo, tmp_path):
    result = train(tiny_config(algo, checkpoint_freq=64), tmp_path)
    run_dir = result.run_dir
    assert result.num_timesteps == 128 and result.trained_steps == 128
    assert run_dir.name.startswith(f"servegym_Routing-v0__default__{algo}__0__")
    for name in ("config.yml", "final_model.zip", "checkpoints/model_64_steps.zip", "checkpoints/model_128_steps.zip"):
        assert (run_dir / name).is_file(), name
    assert TrainConfig.load(run_dir / "config.yml") == tiny_config(algo, checkpoint_freq=64)

    events = scalars(run_dir)
    tags = set(events.Tags()["scalars"])
    for metric in ("ttft_p50_s", "ttft_p99_s", "tbt_p99_s", "e2e_p50_s", "e2e_p99_s", "slo_attainment",
                   "slo_attainment_tier0", "goodput_rps", "cost_usd", "output_tokens_per_usd"):
        assert f"serving/{metric}" in tags, metric
    assert "serving/qoe_violation_rate" not in tags  # NaN without reasoning: not logged
    assert "custom_scalars__config__" in events.Tags()["tensors"]
    assert "_hparams_/experiment" in events.PluginTagToContent("hparams")

    # With reward="slo" and one tier, an episode's return is N (2 a - 1): a = (r / N + 1) / 2.
    # Each logged value is the mean attainment of the episodes that ended since the last dump.
    ends = episode_ends(run_dir)
    assert len(ends) == 128 // EPISODE_REQUESTS
    dump_steps = sorted({e.step for tag in tags for e in events.Scalars(tag)})
    logged = {e.step: e.value for e in events.Scalars("serving/slo_attainment")}
    previous = 0
    for step in dump_steps:
        window = [(r / EPISODE_REQUESTS + 1) / 2 for end, r in ends if previous < end <= step]
        if window:
            assert logged[step] == pytest.approx(np.mean(window), abs=1e-6)
        else:
            assert step not in logged
        previous = step
    tier0 = {e.step: e.value for e in events.Scalars("serving/slo_attainment_tier0")}
    assert tier0 == logged


def test_tier_metrics_split_slo_attainment_by_priority_tier():
    env = make_env(ROUTING, "default", {"episode_requests": 60, "num_tiers": 2, "priorities": "uniform",
                                        "tier_weights": [1.0, 2.0]}, flat=False)
    env.reset(seed=1)
    while True:
        _, _, terminated, truncated, info = env.step(int(np.flatnonzero(env.unwrapped.action_masks())[0]))
        if terminated or truncated:
            break
    metrics = info["episode_metrics"]
    outcomes = env.unwrapped.cluster.outcomes
    counts = [sum(o.tier == k for o in outcomes) for k in (0, 1)]
    met = [sum(o.tier == k and o.completed and meets_slo(o) for o in outcomes) for k in (0, 1)]
    assert min(counts) > 0
    for k in (0, 1):
        assert metrics[f"slo_attainment_tier{k}"] == pytest.approx(met[k] / counts[k])
    weighted = sum(metrics[f"slo_attainment_tier{k}"] * counts[k] for k in (0, 1)) / sum(counts)
    assert weighted == pytest.approx(metrics["slo_attainment"])


def test_resume_continues_model_normalizer_and_step_count(tmp_path):
    config = tiny_config("maskable_ppo", extra=("normalize=true",), checkpoint_freq=64)
    run_dir = train(config, tmp_path).run_dir
    stats_128 = normalizer_stats(run_dir / "checkpoints/model_vecnormalize_128_steps.npz")
    with pytest.raises(ValueError, match="trained 128 of its 128 steps"):
        resume(run_dir)
    result = resume(run_dir, timesteps=64)
    assert result.num_timesteps == 192 and result.trained_steps == 64
    assert TrainConfig.load(run_dir / "config.yml").n_timesteps == 192
    stats_192 = normalizer_stats(run_dir / "checkpoints/model_vecnormalize_192_steps.npz")
    # The statistics continue (64 more observations and one reset), they do not restart.
    assert stats_192["obs/context/count"] == pytest.approx(stats_128["obs/context/count"] + 65)
    steps = sorted({e.step for e in scalars(run_dir).Scalars("time/fps")})
    assert steps == [64, 128, 192]
    # One log for the whole run: the resumed iteration is the third, after the first two.
    with open(run_dir / "progress.csv") as handle:
        rows = list(csv.DictReader(handle))
    logged = [(int(r["time/iterations"]), int(r["time/total_timesteps"])) for r in rows if r["time/iterations"]]
    assert logged == [(1, 64), (2, 128), (3, 192)]
    assert [p.name for p in run_dir.glob("progress*.csv")] == ["progress.csv"]
    with pytest.raises(SystemExit):
        main(["--resume", str(run_dir), "--algo", "ppo"])


@pytest.mark.parametrize(("metric", "best_of"), [("return", np.maximum), ("ttft_p99_s", np.minimum)])
def test_periodic_evaluation_logs_agent_and_baselines_on_fixed_seeds(tmp_path, metric, best_of):
    baselines = [_FirstValid.name, _LastValid.name]
    config = tiny_config("maskable_ppo", eval_freq=64, eval_seeds=[10_000, 10_001], eval_baselines=baselines,
                         eval_metric=metric)
    run_dir = train(config, tmp_path).run_dir
    events = scalars(run_dir)
    for name in baselines:
        expected = rollout_evaluate(name, ROUTING, [10_000, 10_001], episode_requests=EPISODE_REQUESTS)
        logged = [e.value for e in events.Scalars(f"eval/{name}/slo_attainment")]
        assert logged == pytest.approx([np.mean([m["slo_attainment"] for m in expected])] * 3, abs=1e-6)
    agent_values = [e.value for e in events.Scalars(f"eval/agent/{metric}")]
    assert [e.step for e in events.Scalars(f"eval/agent/{metric}")] == [0, 64, 128]
    history = json.loads((run_dir / "evaluations.json").read_text())
    assert [entry["timesteps"] for entry in history] == [0, 64, 128]
    assert [entry["agent"][metric] for entry in history] == pytest.approx(agent_values, rel=1e-6)
    assert (run_dir / "best_model.zip").is_file()
    best = [e.value for e in events.Scalars(f"eval/best_{metric}")]
    assert best == pytest.approx(best_of.accumulate(agent_values), rel=1e-6)


def _layout(events: EventAccumulator) -> dict[str, dict[str, list[str]]]:
    """The run's custom-scalars layout: {category: {chart: [tag regexes]}}."""
    (event,) = events.Tensors("custom_scalars__config__")
    layout = layout_pb2.Layout()
    layout.ParseFromString(event.tensor_proto.string_val[0])
    return {c.title: {chart.title: list(chart.multiline.tag) for chart in c.chart} for c in layout.category}


def test_training_dashboard_has_the_scenarios_metrics_and_a_stochastic_learning_curve(tmp_path):
    config = tiny_config("maskable_ppo", eval_freq=64, eval_seeds=[10_000], eval_baselines=[_FirstValid.name],
                         eval_metric="slo_attainment", eval_mode="stochastic")
    run_dir = train(config, tmp_path).run_dir
    assert TrainConfig.load(run_dir / "config.yml").eval_mode == "stochastic"
    events = scalars(run_dir)
    layout = _layout(events)
    serving_title = "serving metrics of training episodes (x: env steps)"
    evaluation_title = "periodic evaluation on held-out seeds: agent vs heuristics (x: env steps)"
    assert list(layout) == [evaluation_title, serving_title]  # the learning curve against the heuristics first
    training, evaluation = layout[serving_title], layout[evaluation_title]
    # no chart for QoE (no reasoning here) nor quality (no cascade); the tiers share one chart
    assert "qoe_violation_rate" not in training and "quality_mean (higher is better)" not in evaluation
    assert training["slo_attainment"] == ["^serving/slo_attainment$"]
    assert training["slo_attainment per tier"] == ["^serving/slo_attainment_tier\\d+$"]
    tags = set(events.Tags()["scalars"])
    for chart, regexes in training.items():
        assert any(re.match(regexes[0], tag) for tag in tags), chart  # every chart has data
    # the learning curve in the run, each heuristic's level in its own run beside it (its own colour)
    reference = scalars(run_dir / "reference_lines" / _FirstValid.name)
    chart = evaluation["slo_attainment (higher is better)"][0]
    assert {tag for tag in tags if re.match(chart, tag)} == {"eval/agent/slo_attainment"}
    assert [tag for tag in reference.Tags()["scalars"] if re.match(chart, tag)] == ["eval/reference/slo_attainment"]
    assert [(e.step, e.value) for e in reference.Scalars("eval/reference/slo_attainment")] == [
        (e.step, e.value) for e in events.Scalars(f"eval/{_FirstValid.name}/slo_attainment")]
    hparams = events.PluginTagToContent("hparams")["_hparams_/experiment"]
    assert b"eval/agent/slo_attainment" in hparams and b"serving/slo_attainment" in hparams
    with pytest.raises(ValueError, match="unknown eval_mode 'sampled'"):
        tiny_config("ppo", eval_mode="sampled")


def test_cli_trains_with_subprocess_envs_and_masks(tmp_path, capsys):
    main(["--env", ROUTING, "--algo", "maskable_ppo", "--timesteps", "128", "--n-envs", "2", "--vec-env", "subproc",
          "--device", "cpu", "--set", "n_steps=32", "batch_size=32", "n_epochs=1", "env_kwargs.episode_requests=20",
          "--checkpoint-freq", "0", "--run-dir", str(tmp_path), "--no-progress-bar", "--verbose", "0"])
    assert "trained 128 steps (total 128)" in capsys.readouterr().out
    (run_dir,) = tmp_path.iterdir()
    assert sorted(p.name for p in (run_dir / "monitor").iterdir()) == ["0.monitor.csv", "1.monitor.csv"]
    config = TrainConfig.load(run_dir / "config.yml")
    assert (config.n_envs, config.vec_env, config.checkpoint_freq) == (2, "subproc", 0)
    # maskable_ppo.yml's Routing-v0 section scales rewards with VecNormalize: its statistics are saved too
    assert config.normalize == {"norm_obs": False, "norm_reward": True}
    assert sorted(p.name for p in (run_dir / "checkpoints").iterdir()) == ["model_128_steps.zip",
                                                                           "model_vecnormalize_128_steps.npz"]


def test_hyperparameter_files_resolve_for_every_algorithm_and_env():
    for algo in ALGORITHMS:
        for env_id in envs.ENV_IDS:
            config = build_config(env_id, "default", algo, 0, device="cpu")
            assert config.n_timesteps > 0 and config.n_envs > 0
            assert set(config.algo_kwargs) <= set(ALGORITHMS[algo].constructor_args())


def test_overrides_take_precedence_and_parse_yaml_values(tmp_path):
    path = tmp_path / "ppo.yml"
    path.write_text("defaults:\n  policy: MultiInputPolicy\n  n_envs: 2\n  n_timesteps: 2e5\n"
                    "  learning_rate: 3e-4\n  env_kwargs: {reward: slo, rate_rps: 10}\n"
                    f"{ROUTING}:\n  n_envs: 4\n  env_kwargs: {{rate_rps: 12}}\n")
    assert load_hyperparams("ppo", ROUTING, path)["env_kwargs"] == {"reward": "slo", "rate_rps": 12}
    config = build_config(ROUTING, "default", "ppo", 3, hyperparams_path=path,
                          overrides=["learning_rate=1e-4", "env_kwargs.rate_rps=14", "policy_kwargs.net_arch=[16, 16]"])
    assert config.n_envs == 4 and config.n_timesteps == 200_000
    assert config.algo_kwargs == {"learning_rate": 1e-4}
    assert config.env_kwargs == {"reward": "slo", "rate_rps": 14}
    assert config.policy_kwargs == {"net_arch": [16, 16]}
    assert build_config(ROUTING, "default", "ppo", 3, hyperparams_path=path, n_envs=1, n_timesteps=500).n_envs == 1
    assert run_name(config, "20250101-000000") == "servegym_Routing-v0__default__ppo__3__20250101-000000"


def test_linear_schedule_anneals_the_learning_rate_to_zero(tmp_path):
    """``lin_1e-3`` (RL Zoo): SB3 updates the rate before each of the two updates of a 128-step
    run with 64-step rollouts, at progress remaining 1 - 64/128 and then 0."""
    config = tiny_config("ppo", extra=("learning_rate=lin_1e-3",))
    assert config.algo_kwargs["learning_rate"] == "lin_1e-3"  # config.yml keeps the text
    run_dir = train(config, tmp_path).run_dir
    with open(run_dir / "progress.csv") as handle:
        rates = [float(row["train/learning_rate"]) for row in csv.DictReader(handle) if row.get("train/learning_rate")]
    assert rates == [pytest.approx(5e-4), 0.0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"algo": "sac"}, "unknown algorithm 'sac'; known: \\['a2c', 'dqn'"),
        ({"overrides": ["lerning_rate=1"]}, "unknown hyper-parameter 'lerning_rate'"),
        ({"overrides": ["n_steps"]}, "is not key=value"),
        ({"overrides": ["policy=CnnPolicy"]}, "unknown policy 'CnnPolicy'"),
        ({"overrides": ["policy_kwargs.activation_fn=swish"]}, "unknown activation_fn 'swish'"),
        ({"overrides": ["normalize={norm_everything: true}"]}, "unknown normalize option"),
        ({"n_timesteps": 2.5}, "n_timesteps must be an integer, got 2.5"),
        ({"n_envs": 0}, "n_envs must be >= 1, got 0"),
        ({"seed": -1}, "seed must be >= 0, got -1"),
        ({"device": "tpu"}, "unknown device 'tpu'"),
        ({"eval_freq": 100}, "needs at least one evaluation seed"),
        ({"overrides": ["learning_rate=lin_fast"]}, "learning_rate must be a number or 'lin_<positive number>', got 'lin_fast'"),
        ({"overrides": ["clip_range=lin_-0.2"]}, "clip_range must be a number or 'lin_<positive number>', got 'lin_-0.2'"),
        ({"overrides": ["learning_rate=cosine"]}, "learning_rate must be a number or 'lin_<positive number>', got 'cosine'"),
    ],
)
def test_bad_configuration_is_rejected(kwargs, message):
    arguments = {"env_id": ROUTING, "scenario": "default", "algo": "ppo", "seed": 0, **kwargs}
    with pytest.raises(ValueError, match=message):
        build_config(**arguments)


def test_bad_setups_fail_before_creating_a_run(tmp_path):
    with pytest.raises(ValueError, match="algorithm 'dqn' cannot act in MultiDiscrete"):
        check_action_space("dqn", spaces.MultiDiscrete([3, 3]))
    with pytest.raises(ValueError, match="'maskable_ppo' cannot act in Box"):
        check_action_space("maskable_ppo", spaces.Box(0.0, 1.0, (2,)))
    with pytest.raises(ValueError, match="unknown policy 'no_such_baseline'"):
        train(tiny_config("ppo", eval_freq=64, eval_seeds=[0], eval_baselines=["no_such_baseline"]), tmp_path)
    with pytest.raises(ValueError, match="unknown evaluation metric 'slo'; known: \\['arrived'"):
        train(tiny_config("ppo", eval_freq=64, eval_seeds=[0], eval_metric="slo"), tmp_path)
    with pytest.raises(ValueError, match="unknown scenario override"):
        train(tiny_config("ppo", extra=("env_kwargs.no_such_field=1",)), tmp_path)
    with pytest.raises(ValueError, match="unknown env 'servegym/Nope-v0'"):
        make_env("servegym/Nope-v0", "default", {}, flat=False)
    with pytest.raises(ValueError, match="native vector env does not cover reward='cost'.*--vec-env dummy"):
        train(tiny_config("maskable_ppo", vec_env="native", extra=("env_kwargs.reward=cost",)), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_device_resolution():
    assert resolve_device("cpu") == "cpu"
    assert resolve_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device 'cuda' asked but CUDA is not available"):
            resolve_device("cuda")


def test_runs_train_on_the_cpu_unless_told_otherwise(monkeypatch):
    """CUDA present or not, a run asked for no device trains on the CPU (MLP policies train
    faster there, and one seed gives one result on machines with and without a GPU)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert build_config(ROUTING, "default", "ppo", 0).device == "cpu"
    assert resolve_device("auto") == "cuda"


def test_saved_file_names():
    assert vecnormalize_path(Path("r/best_model.zip")) == Path("r/best_model_vecnormalize.npz")
    assert vecnormalize_path(Path("r/checkpoints/model_640_steps.zip")) == Path("r/checkpoints/model_vecnormalize_640_steps.npz")
    assert agent_config.sanitize("servegym/Routing-v0") == "servegym_Routing-v0"
    assert agent_config.as_int("n", 2e5) == 200_000 and math.isclose(agent_config.parse_value("1e-4"), 1e-4)


def test_dummy_and_subprocess_envs_train_the_same_model(tmp_path):
    """Scaling-v0's cost reward is not exact in float32; SB3's DummyVecEnv rounded it to float32
    while SubprocVecEnv kept float64, so one seed trained differently under the two (the
    reward-normalised value loss differed in the eighth digit after the first update)."""
    models = {}
    for vec_env in ("dummy", "subproc"):
        main(["--env", "servegym/Scaling-v0", "--scenario", "cauchy_autoscaling", "--algo", "maskable_ppo",
              "--timesteps", "64", "--n-envs", "2", "--vec-env", vec_env, "--seed", "1", "--device", "cpu",
              "--set", "n_steps=16", "batch_size=16", "n_epochs=2", "env_kwargs.reward=cost",
              "normalize={norm_obs: false, norm_reward: true}",
              "--checkpoint-freq", "0", "--run-dir", str(tmp_path / vec_env), "--no-progress-bar", "--verbose", "0"])
        (run_dir,) = (tmp_path / vec_env).iterdir()
        normalizer = normalizer_stats(run_dir / "final_model_vecnormalize.npz")
        models[vec_env] = (run_dir / "progress.csv").read_text(), normalizer["ret/var"]
    (dummy_log, dummy_var), (subproc_log, subproc_var) = models.values()
    assert dummy_var == subproc_var and dummy_var.dtype == np.float64
    value_losses = [[row["train/value_loss"] for row in csv.DictReader(log.splitlines())] for log in (dummy_log, subproc_log)]
    assert value_losses[0] == value_losses[1] and any(value_losses[0])


def test_auto_vector_env_is_native_where_it_covers_the_configuration(monkeypatch):
    """``auto`` trains Routing-v0, Tier-v0, Migration-v0 (periodic) and Scaling-v0 in the native
    vector env, and a configuration it does not cover (a reward its kernel does not compute, the
    Python engine, Scaling-v0's strict mode) as before: in-process on two cores, in subprocesses with
    a core per env and one for training."""
    import agents.train as train_module

    def config(env_id: str = ROUTING, *overrides: str, vec_env: str = "auto") -> TrainConfig:
        return build_config(env_id, "default", "maskable_ppo", 0, n_envs=2, device="cpu", vec_env=vec_env,
                            overrides=list(overrides))

    monkeypatch.setattr(train_module, "usable_cores", lambda: 2)
    assert resolve_vec_env(config()) == resolve_vec_env(config("servegym/Tier-v0")) == "native"
    assert resolve_vec_env(config("servegym/Migration-v0")) == "native"
    assert resolve_vec_env(config("servegym/Migration-v0", "env_kwargs.reward=cost")) == "dummy"
    for override in ("env_kwargs.reward=cost", "env_kwargs.backend=python"):
        assert resolve_vec_env(config(ROUTING, override)) == "dummy"
    assert resolve_vec_env(config("servegym/Scaling-v0")) == "native"
    assert resolve_vec_env(config("servegym/Scaling-v0", "env_kwargs.strict=true")) == "dummy"
    monkeypatch.setattr(train_module, "usable_cores", lambda: 3)
    assert resolve_vec_env(config("servegym/Scaling-v0", "env_kwargs.strict=true")) == "subproc"
    assert resolve_vec_env(config()) == "native"
    assert resolve_vec_env(config(vec_env="dummy")) == "dummy"


def test_auto_vector_env_uses_subprocesses_only_with_a_core_per_env_and_one_for_training():
    assert not uses_subprocess_envs(2, "auto", cores=2)  # the 2-core machine: both envs in-process
    assert uses_subprocess_envs(2, "auto", cores=3)
    assert not uses_subprocess_envs(1, "auto", cores=16) and not uses_subprocess_envs(1, "subproc", cores=16)
    assert uses_subprocess_envs(4, "subproc", cores=2) and not uses_subprocess_envs(4, "dummy", cores=16)
    with pytest.raises(ValueError, match="unknown vec_env 'threads'"):
        uses_subprocess_envs(2, "threads")


@pytest.mark.parametrize(("env_id", "policy", "timesteps"), [
    (ROUTING, "InstanceScoringPolicy", 128), (ROUTING, "MlpPolicy", 128), ("servegym/Tier-v0", "MultiInputPolicy", 128),
    ("servegym/Migration-v0", "MultiInputPolicy", 256),  # its episodes are ~50 steps: two a rank need 256
    ("servegym/Scaling-v0", "MultiInputPolicy", 128),
])
def test_native_and_dummy_envs_train_the_same_model_and_monitor_files(tmp_path, env_id, policy, timesteps):
    """Routing-v0, Tier-v0, Migration-v0 and Scaling-v0 under the native vector env (agents.vec_env)
    train what DummyVecEnv trains: the same training log (but its times) and the same Monitor rows,
    per-tier metrics included; with the Dict observation and flattened (MLP policies)."""
    runs = {}
    for vec_env in ("dummy", "native"):
        main(["--env", env_id, "--algo", "maskable_ppo", "--timesteps", str(timesteps), "--n-envs", "2", "--vec-env", vec_env,
              "--seed", "1", "--device", "cpu", "--set", f"policy={policy}", "n_steps=32", "batch_size=32", "n_epochs=2",
              f"env_kwargs.episode_requests={EPISODE_REQUESTS}", "env_kwargs.backend=compiled",
              "normalize={norm_obs: false, norm_reward: true}",
              "--checkpoint-freq", "0", "--run-dir", str(tmp_path / vec_env), "--no-progress-bar", "--verbose", "0"])
        (run_dir,) = (tmp_path / vec_env).iterdir()
        rows = list(csv.DictReader((run_dir / "progress.csv").read_text().splitlines()))
        runs[vec_env] = (
            [{k: v for k, v in row.items() if not k.startswith("time/") or k == "time/total_timesteps"} for row in rows],
            [[line.split(",")[:2] for line in (run_dir / "monitor" / f"{rank}.monitor.csv").read_text().splitlines()[1:]]
             for rank in range(2)],
        )
    (dummy_log, dummy_monitor), (native_log, native_monitor) = runs.values()
    assert native_log == dummy_log and "serving/slo_attainment_tier0" in native_log[-1]
    assert native_monitor == dummy_monitor and len(dummy_monitor[0]) > 2  # header + episodes
