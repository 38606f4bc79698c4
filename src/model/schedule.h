// Learning-rate schedules as pure functions of the step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gossip::model {

enum class ScheduleKind { kConstant, kStep, kCosine };
// "constant", "step", "cosine" (the YAML's names); nullopt for any other.
std::optional<ScheduleKind> parse_schedule_kind(const std::string& name);

struct ScheduleConfig {
  ScheduleKind kind = ScheduleKind::kConstant;
  double base_lr = 0.05;          // peak learning rate
  int64_t warmup_steps = 0;       // linear warm-up from 0 to base_lr over these steps
  int64_t step_every = 0;         // kind=step: multiply by gamma every this many steps
  double gamma = 0.1;             // kind=step: decay factor
  double min_lr = 0.0;            // kind=cosine: floor at the end
};

// Learning rate for `step` (0-based) of a run of `total_steps`.
double learning_rate(const ScheduleConfig& s, int64_t step, int64_t total_steps);

}  // namespace gossip::model
