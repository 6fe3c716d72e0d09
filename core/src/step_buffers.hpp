// What every native vector engine writes for each env's step, one row per env: the reward, the
// episode's end, whether the action was masked out, and the step info's numbers (ServingEnv.step).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace servegym_core {

struct StepBuffers {
  std::vector<std::uint8_t> done, invalid_action;
  std::vector<double> reward, time_s, cost_usd;
  std::vector<std::int64_t> finished, slo_met;

  // Zeroed rows for `num_envs` envs.
  void allocate(std::size_t num_envs) {
    done.assign(num_envs, 0);
    invalid_action.assign(num_envs, 0);
    reward.assign(num_envs, 0.0);
    time_s.assign(num_envs, 0.0);
    cost_usd.assign(num_envs, 0.0);
    finished.assign(num_envs, 0);
    slo_met.assign(num_envs, 0);
  }

  // Row `env` from a kernel's step result (its reward, done, finished, slo_met, time_s and cost_usd).
  template <class Result>
  void record(std::size_t env, const Result& result, bool invalid) {
    reward[env] = result.reward;
    done[env] = result.done ? 1 : 0;
    invalid_action[env] = invalid ? 1 : 0;
    finished[env] = result.finished;
    slo_met[env] = result.slo_met;
    time_s[env] = result.time_s;
    cost_usd[env] = result.cost_usd;
  }
};

}  // namespace servegym_core
