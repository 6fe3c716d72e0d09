#include "scaling_vector_engine.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace servegym_core {

ScalingVectorEngine::ScalingVectorEngine(const ScalingSpec& spec, std::int32_t num_envs, std::int32_t num_threads)
    : slots_(static_cast<std::size_t>(spec.max_instances)), context_size_(spec.context_k.size()),
      action_bound_(spec.one_unit ? 1 + 2 * static_cast<std::int64_t>(spec.kinds()) : 3), pool_(num_envs, num_threads) {
  kernels_.reserve(static_cast<std::size_t>(num_envs));
  for (std::int32_t i = 0; i < num_envs; ++i) kernels_.emplace_back(spec);
  const std::size_t n = static_cast<std::size_t>(num_envs);
  instances.assign(n * slots_ * features(), 0.0f);
  context.assign(n * context_size_, 0.0f);
  mask.assign(n * mask_size(), 0.0f);
  allocate(n);
}

ScalingRow ScalingVectorEngine::row(std::size_t env) {
  return ScalingRow{&instances[env * slots_ * features()], &context[env * context_size_], &mask[env * mask_size()]};
}

const ScalingMDP& ScalingVectorEngine::kernel(std::int32_t env) const {
  if (env < 0 || env >= num_envs()) throw std::out_of_range("env " + std::to_string(env) + " is not in the vector");
  return kernels_[static_cast<std::size_t>(env)];
}

void ScalingVectorEngine::attach(std::int32_t env, Engine* engine, ScalingEpisode episode) {
  if (env < 0 || env >= num_envs()) throw std::out_of_range("env " + std::to_string(env) + " is not in the vector");
  const std::size_t i = static_cast<std::size_t>(env);
  kernels_[i].attach(engine, std::move(episode), row(i));
  done[i] = 0;
  invalid_action[i] = 0;
}

void ScalingVectorEngine::step(const std::int64_t* actions) {
  const std::size_t width = action_size();
  for (std::size_t i = 0; i < kernels_.size(); ++i) {
    if (!kernels_[i].attached()) throw std::logic_error("env " + std::to_string(i) + " was never reset");
    for (std::size_t k = 0; k < width; ++k) {
      const std::int64_t a = actions[i * width + k];
      if (a < 0 || a >= action_bound_) {
        throw std::invalid_argument("action " + std::to_string(a) + " of env " + std::to_string(i) +
                                    (width > 1 ? " (kind " + std::to_string(k) + ")" : std::string()) +
                                    " is outside [0, " + std::to_string(action_bound_) + ")");
      }
    }
  }
  pool_.run([&](std::size_t i) {
    const ScalingStepResult result = kernels_[i].step(&actions[i * width], row(i));
    record(i, result, result.invalid_action);
  });
}

}  // namespace servegym_core
