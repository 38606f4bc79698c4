#include "model/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "common/error.h"

namespace gossip::model {

std::optional<ScheduleKind> parse_schedule_kind(const std::string& name) {
  if (name == "constant") return ScheduleKind::kConstant;
  if (name == "step") return ScheduleKind::kStep;
  if (name == "cosine") return ScheduleKind::kCosine;
  return std::nullopt;
}

double learning_rate(const ScheduleConfig& s, int64_t step, int64_t total_steps) {
  if (s.warmup_steps > 0 && step < s.warmup_steps)
    return s.base_lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_steps);
  switch (s.kind) {
    case ScheduleKind::kConstant:
      return s.base_lr;
    case ScheduleKind::kStep:
      if (s.step_every <= 0) return s.base_lr;
      return s.base_lr * std::pow(s.gamma, static_cast<double>(step / s.step_every));
    case ScheduleKind::kCosine: {
      const int64_t span = std::max<int64_t>(1, total_steps - s.warmup_steps);
      const double t = std::clamp(static_cast<double>(step - s.warmup_steps) / span, 0.0, 1.0);
      return s.min_lr + 0.5 * (s.base_lr - s.min_lr) * (1.0 + std::cos(std::numbers::pi * t));
    }
  }
  throw Error("schedule", "unknown schedule kind " + std::to_string(static_cast<int>(s.kind)));
}

}  // namespace gossip::model
