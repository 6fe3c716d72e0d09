#include "tier_vector_engine.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace servegym_core {

TierVectorEngine::TierVectorEngine(const TierSpec& spec, std::int32_t num_envs, std::int32_t num_threads)
    : slots_(static_cast<std::size_t>(spec.max_instances)),
      context_size_(spec.context_k.size()),
      num_tiers_(spec.num_tiers),
      levels_(spec.headroom_levels),
      pool_(num_envs, num_threads) {
  kernels_.reserve(static_cast<std::size_t>(num_envs));
  for (std::int32_t i = 0; i < num_envs; ++i) kernels_.emplace_back(spec);
  const std::size_t n = static_cast<std::size_t>(num_envs);
  instances.assign(n * slots_ * features(), 0.0f);
  context.assign(n * context_size_, 0.0f);
  allocate(n);
  headroom_fractions.assign(n * static_cast<std::size_t>(num_tiers_), 0.0);
}

TierRow TierVectorEngine::row(std::size_t env) {
  return TierRow{&instances[env * slots_ * features()], &context[env * context_size_],
                 &headroom_fractions[env * static_cast<std::size_t>(num_tiers_)]};
}

void TierVectorEngine::attach(std::int32_t env, Engine* engine, TierEpisode episode) {
  if (env < 0 || env >= num_envs()) throw std::out_of_range("env " + std::to_string(env) + " is not in the vector");
  const std::size_t i = static_cast<std::size_t>(env);
  kernels_[i].attach(engine, std::move(episode), row(i));
  done[i] = 0;
}

void TierVectorEngine::step(const std::int64_t* levels) {
  const std::size_t k = static_cast<std::size_t>(num_tiers_);
  for (std::size_t i = 0; i < kernels_.size(); ++i) {
    if (!kernels_[i].attached()) throw std::logic_error("env " + std::to_string(i) + " was never reset");
    for (std::size_t p = 0; p < k; ++p) {
      const std::int64_t level = levels[i * k + p];
      if (level < 0 || level >= levels_) {
        throw std::invalid_argument("level " + std::to_string(level) + " of env " + std::to_string(i) + " tier " +
                                    std::to_string(p) + " is outside [0, " + std::to_string(levels_) + ")");
      }
    }
  }
  pool_.run([&](std::size_t i) {
    const TierStepResult result = kernels_[i].step(levels + i * k, row(i));
    record(i, result, false);  // every level is a valid action
  });
}

}  // namespace servegym_core
