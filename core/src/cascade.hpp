// A model cascade's router and judge (simulator/routers/cascade.py's CascadeRouter, Cascadia
// §3.3): arrivals enter the entry stage's model, a stage's answer is judged and accepted or
// forwarded to the next stage. This holds the cascade's state; the engine runs its events
// (Engine::on_complete, EventKind::Judge).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "instance.hpp"
#include "request_table.hpp"
#include "sim_types.hpp"

namespace servegym_core {

// A judgement under way: row r's stage-`stage` answer, its score and what the judge compares.
struct Judgement {
  Req r;
  std::int32_t stage;
  double score;
  double signal;
};

class Cascade {
 public:
  // stage_models[i]: the engine's model index of stage i (distinct, checked in Python);
  // model_names: the engine's model names, for messages.
  Cascade(std::vector<std::int32_t> stage_models, double judge_latency_s, std::vector<std::string> model_names);

  std::int32_t stages() const { return static_cast<std::int32_t>(stage_models_.size()); }
  double judge_latency_s() const { return judge_latency_s_; }
  // CascadeRouter.set_thresholds (checked in Python): one per stage but the last.
  void set_thresholds(std::vector<double> thresholds);
  double threshold(std::int32_t stage) const { return thresholds_[static_cast<std::size_t>(stage)]; }
  // CascadeRouter.set_entry_stage (checked in Python).
  void set_entry_stage(std::int32_t stage);
  std::int32_t entry_stage() const { return entry_stage_; }
  // Each row of `rows`' values per stage (values and present: rows x stages, row-major;
  // present 0: the request has none for that stage's model). Signals: what the judge compares
  // (set_judge_signals); scores: quality_by_model.
  void set_scores(const std::vector<std::int32_t>& rows, const std::vector<double>& values,
                  const std::vector<std::uint8_t>& present);
  void set_signals(const std::vector<std::int32_t>& rows, const std::vector<double>& values,
                   const std::vector<std::uint8_t>& present);
  // The judge compares the scores themselves (set_judge_signals(None)).
  void clear_signals();
  // Row `row` is a new sequence of row `from`'s request (a forward, or Python's redispatch).
  void forwarded(Req row, Req from);
  // The stage of the instance's model (CascadeRouter.stage_of); throws std::invalid_argument
  // for a model outside the cascade.
  std::int32_t stage_of(const Instance& instance) const;
  // CascadeRouter.score / judge_signal of row r's request for stage `stage`; throw
  // std::invalid_argument when it has none.
  double score(const RequestTable& requests, Req r, std::int32_t stage) const;
  double signal(const RequestTable& requests, Req r, std::int32_t stage) const;
  // CascadeRouter.instance_for: the routable instance of the stage's model with the fewest
  // requests, the lowest id on ties; throws std::runtime_error when none serves.
  std::int32_t instance_for(const std::vector<std::unique_ptr<Instance>>& instances, std::int32_t stage) const;
  // A new judgement; returns its index (the Judge event's payload).
  std::int64_t add_judgement(const Judgement& judgement);
  const Judgement& judgement(std::int64_t index) const { return judgements_[static_cast<std::size_t>(index)]; }
  // The row whose request row r serves: r itself unless it was forwarded.
  Req origin(Req r) const {
    return static_cast<std::size_t>(r) < origin_.size() && origin_[static_cast<std::size_t>(r)] >= 0
               ? origin_[static_cast<std::size_t>(r)] : r;
  }

 private:
  struct Values {
    std::vector<double> values;         // by origin row x stage
    std::vector<std::uint8_t> present;  // the same shape
  };
  void set_values(Values& table, const std::vector<std::int32_t>& rows, const std::vector<double>& values,
                  const std::vector<std::uint8_t>& present) const;
  bool has(const Values& table, Req origin, std::int32_t stage) const;
  const std::string& model_name(std::int32_t stage) const;

  std::vector<std::int32_t> stage_models_;
  std::vector<std::int32_t> stage_of_model_;  // by engine model index; -1 outside the cascade
  std::vector<std::string> model_names_;
  double judge_latency_s_;
  std::vector<double> thresholds_;
  std::int32_t entry_stage_ = 0;
  Values scores_;
  Values signals_;
  bool signals_set_ = false;
  std::vector<Req> origin_;  // by row; -1: its own
  std::vector<Judgement> judgements_;
};

}  // namespace servegym_core
