#include "migration_vector_engine.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace servegym_core {

MigrationVectorEngine::MigrationVectorEngine(const MigrationSpec& spec, std::int32_t num_envs,
                                             std::int32_t num_threads)
    : slots_(static_cast<std::size_t>(spec.max_instances)), context_size_(spec.context_k.size()),
      pool_(num_envs, num_threads) {
  kernels_.reserve(static_cast<std::size_t>(num_envs));
  for (std::int32_t i = 0; i < num_envs; ++i) kernels_.emplace_back(spec);
  const std::size_t n = static_cast<std::size_t>(num_envs);
  engines_.assign(n, nullptr);
  instances.assign(n * slots_ * features(), 0.0f);
  context.assign(n * context_size_, 0.0f);
  mask.assign(n * mask_size(), 0.0f);
  allocate(n);
  migrations_started.assign(n, 0);
  migrations_done.assign(n, 0);
  migrations_aborted.assign(n, 0);
}

MigrationRow MigrationVectorEngine::row(std::size_t env) {
  return MigrationRow{&instances[env * slots_ * features()], &context[env * context_size_], &mask[env * mask_size()]};
}

void MigrationVectorEngine::attach(std::int32_t env, Engine* engine, MigrationEpisode episode) {
  if (env < 0 || env >= num_envs()) throw std::out_of_range("env " + std::to_string(env) + " is not in the vector");
  const std::size_t i = static_cast<std::size_t>(env);
  kernels_[i].attach(engine, std::move(episode), row(i));
  engines_[i] = engine;
  done[i] = 0;
  invalid_action[i] = 0;
  migrations_started[i] = engine->migrations_started;
  migrations_done[i] = engine->migrations_done;
  migrations_aborted[i] = engine->migrations_aborted;
}

void MigrationVectorEngine::step(const std::int64_t* actions) {
  const std::int64_t noop = static_cast<std::int64_t>(slots_);
  for (std::size_t i = 0; i < kernels_.size(); ++i) {
    if (!kernels_[i].attached()) throw std::logic_error("env " + std::to_string(i) + " was never reset");
    for (std::size_t d = 0; d < 2; ++d) {
      const std::int64_t a = actions[2 * i + d];
      if (a < 0 || a > noop) {
        throw std::invalid_argument(std::string(d == 0 ? "source" : "destination") + " slot " + std::to_string(a) +
                                    " of env " + std::to_string(i) + " is outside [0, " + std::to_string(noop) + "]");
      }
    }
  }
  pool_.run([&](std::size_t i) {
    const MigrationStepResult result = kernels_[i].step(actions[2 * i], actions[2 * i + 1], row(i));
    record(i, result, result.invalid_action);
    migrations_started[i] = engines_[i]->migrations_started;
    migrations_done[i] = engines_[i]->migrations_done;
    migrations_aborted[i] = engines_[i]->migrations_aborted;
  });
}

}  // namespace servegym_core
