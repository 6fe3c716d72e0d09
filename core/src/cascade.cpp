#include "cascade.hpp"

#include <stdexcept>
#include <utility>

namespace servegym_core {

namespace {

std::string stage_list(const std::vector<std::int32_t>& stage_models, const std::vector<std::string>& names) {
  std::string list;
  for (const std::int32_t model : stage_models) {
    list += (list.empty() ? "['" : "', '") + names[static_cast<std::size_t>(model)];
  }
  return list + "']";
}

}  // namespace

Cascade::Cascade(std::vector<std::int32_t> stage_models, double judge_latency_s, std::vector<std::string> model_names)
    : stage_models_(std::move(stage_models)), model_names_(std::move(model_names)), judge_latency_s_(judge_latency_s) {
  if (stage_models_.empty()) throw std::invalid_argument("a cascade needs at least one model");
  stage_of_model_.assign(model_names_.size(), -1);
  for (std::size_t stage = 0; stage < stage_models_.size(); ++stage) {
    const std::int32_t model = stage_models_[stage];
    if (model < 0 || static_cast<std::size_t>(model) >= model_names_.size() || stage_of_model_[model] >= 0) {
      throw std::invalid_argument("cascade stage " + std::to_string(stage) + ": model index " +
                                  std::to_string(model) + " is unknown or repeated");
    }
    stage_of_model_[static_cast<std::size_t>(model)] = static_cast<std::int32_t>(stage);
  }
  thresholds_.assign(stage_models_.size() - 1, 0.0);
}

void Cascade::set_thresholds(std::vector<double> thresholds) {
  if (thresholds.size() != stage_models_.size() - 1) {
    throw std::invalid_argument(std::to_string(stage_models_.size()) + " stages need " +
                                std::to_string(stage_models_.size() - 1) + " thresholds, got " +
                                std::to_string(thresholds.size()));
  }
  thresholds_ = std::move(thresholds);
}

void Cascade::set_entry_stage(std::int32_t stage) {
  if (stage < 0 || stage >= stages()) throw std::invalid_argument("entry stage " + std::to_string(stage));
  entry_stage_ = stage;
}

void Cascade::set_values(Values& table, const std::vector<std::int32_t>& rows, const std::vector<double>& values,
                         const std::vector<std::uint8_t>& present) const {
  const std::size_t width = stage_models_.size();
  if (values.size() != rows.size() * width || present.size() != values.size()) {
    throw std::invalid_argument("cascade values: " + std::to_string(rows.size()) + " rows x " +
                                std::to_string(width) + " stages, got " + std::to_string(values.size()) +
                                " values and " + std::to_string(present.size()) + " flags");
  }
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i] < 0) throw std::invalid_argument("cascade values: row " + std::to_string(rows[i]));
    const std::size_t row = static_cast<std::size_t>(rows[i]);
    if (table.present.size() < (row + 1) * width) {
      table.values.resize((row + 1) * width, 0.0);
      table.present.resize((row + 1) * width, 0);
    }
    for (std::size_t stage = 0; stage < width; ++stage) {
      table.values[row * width + stage] = values[i * width + stage];
      table.present[row * width + stage] = present[i * width + stage];
    }
  }
}

void Cascade::set_scores(const std::vector<std::int32_t>& rows, const std::vector<double>& values,
                         const std::vector<std::uint8_t>& present) {
  set_values(scores_, rows, values, present);
}

void Cascade::set_signals(const std::vector<std::int32_t>& rows, const std::vector<double>& values,
                          const std::vector<std::uint8_t>& present) {
  if (!signals_set_) signals_ = Values{};
  set_values(signals_, rows, values, present);
  signals_set_ = true;
}

void Cascade::clear_signals() {
  signals_ = Values{};
  signals_set_ = false;
}

void Cascade::forwarded(Req row, Req from) {
  const Req root = origin(from);
  if (origin_.size() <= static_cast<std::size_t>(row)) origin_.resize(static_cast<std::size_t>(row) + 1, -1);
  origin_[static_cast<std::size_t>(row)] = root;
}

const std::string& Cascade::model_name(std::int32_t stage) const {
  return model_names_[static_cast<std::size_t>(stage_models_[static_cast<std::size_t>(stage)])];
}

std::int32_t Cascade::stage_of(const Instance& instance) const {
  const std::int32_t stage = stage_of_model_[static_cast<std::size_t>(instance.settings.model_index)];
  if (stage < 0) {
    throw std::invalid_argument("instance " + std::to_string(instance.instance_id) + " serves " +
                                model_names_[static_cast<std::size_t>(instance.settings.model_index)] +
                                ", which is not in the cascade " + stage_list(stage_models_, model_names_));
  }
  return stage;
}

bool Cascade::has(const Values& table, Req origin, std::int32_t stage) const {
  const std::size_t at = static_cast<std::size_t>(origin) * stage_models_.size() + static_cast<std::size_t>(stage);
  return at < table.present.size() && table.present[at] != 0;
}

double Cascade::score(const RequestTable& requests, Req r, std::int32_t stage) const {
  const Req root = origin(r);
  if (!has(scores_, root, stage)) {
    throw std::invalid_argument("request " + std::to_string(requests.request_id[r]) + " has no quality score for " +
                                model_name(stage));
  }
  return scores_.values[static_cast<std::size_t>(root) * stage_models_.size() + static_cast<std::size_t>(stage)];
}

double Cascade::signal(const RequestTable& requests, Req r, std::int32_t stage) const {
  if (!signals_set_) return score(requests, r, stage);
  const Req root = origin(r);
  if (!has(signals_, root, stage)) {
    throw std::invalid_argument("request " + std::to_string(requests.request_id[r]) + " has no judge signal for " +
                                model_name(stage));
  }
  return signals_.values[static_cast<std::size_t>(root) * stage_models_.size() + static_cast<std::size_t>(stage)];
}

std::int32_t Cascade::instance_for(const std::vector<std::unique_ptr<Instance>>& instances, std::int32_t stage) const {
  const std::int32_t model = stage_models_[static_cast<std::size_t>(stage)];
  std::int32_t best_id = -1;
  std::size_t best_load = 0;
  for (const auto& instance : instances) {  // in id order: the first of the fewest is the lowest id
    if (!instance->routable() || instance->settings.model_index != model) continue;
    const std::size_t load = instance->num_requests();
    if (best_id < 0 || load < best_load) {
      best_id = instance->instance_id;
      best_load = load;
    }
  }
  if (best_id < 0) {
    throw std::runtime_error("no serving instance of " + model_name(stage) + " for cascade stage " +
                             std::to_string(stage));
  }
  return best_id;
}

std::int64_t Cascade::add_judgement(const Judgement& judgement) {
  judgements_.push_back(judgement);
  return static_cast<std::int64_t>(judgements_.size()) - 1;
}

}  // namespace servegym_core
