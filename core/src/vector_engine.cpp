#include "vector_engine.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace servegym_core {

VectorEngine::VectorEngine(const RoutingSpec& spec, std::int32_t num_envs, std::int32_t num_threads)
    : slots_(static_cast<std::size_t>(spec.max_instances)),
      context_size_(spec.context_k.size()),
      pool_(num_envs, num_threads) {
  kernels_.reserve(static_cast<std::size_t>(num_envs));
  for (std::int32_t i = 0; i < num_envs; ++i) kernels_.emplace_back(spec);
  const std::size_t n = static_cast<std::size_t>(num_envs);
  instances.assign(n * slots_ * features(), 0.0f);
  context.assign(n * context_size_, 0.0f);
  mask.assign(n * slots_, 0.0f);
  valid.assign(n * slots_, 0);
  allocate(n);
}

RoutingRow VectorEngine::row(std::size_t env) {
  return RoutingRow{&instances[env * slots_ * features()], &context[env * context_size_], &mask[env * slots_],
                    &valid[env * slots_]};
}

void VectorEngine::attach(std::int32_t env, Engine* engine, RoutingEpisode episode) {
  if (env < 0 || env >= num_envs()) throw std::out_of_range("env " + std::to_string(env) + " is not in the vector");
  const std::size_t i = static_cast<std::size_t>(env);
  kernels_[i].attach(engine, std::move(episode), row(i));
  done[i] = 0;
}

void VectorEngine::step(const std::int64_t* actions) {
  for (std::size_t i = 0; i < kernels_.size(); ++i) {
    if (!kernels_[i].attached()) throw std::logic_error("env " + std::to_string(i) + " was never reset");
    if (actions[i] < 0 || static_cast<std::size_t>(actions[i]) >= slots_) {
      throw std::invalid_argument("action " + std::to_string(actions[i]) + " of env " + std::to_string(i) +
                                  " is outside Discrete(" + std::to_string(slots_) + ")");
    }
  }
  pool_.run([&](std::size_t i) {
    const RoutingStepResult result = kernels_[i].step(actions[i], row(i));
    record(i, result, result.invalid_action);
  });
}

}  // namespace servegym_core
