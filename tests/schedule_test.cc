#include "model/schedule.h"

#include <gtest/gtest.h>

#include "common/error.h"

namespace gossip::model {
namespace {

TEST(Schedule, ConstantAndWarmup) {
  ScheduleConfig s;
  s.base_lr = 0.1;
  EXPECT_DOUBLE_EQ(learning_rate(s, 0, 100), 0.1);
  s.warmup_steps = 10;
  EXPECT_DOUBLE_EQ(learning_rate(s, 0, 100), 0.01);
  EXPECT_DOUBLE_EQ(learning_rate(s, 4, 100), 0.05);
  EXPECT_DOUBLE_EQ(learning_rate(s, 10, 100), 0.1);
}

TEST(Schedule, StepDecay) {
  ScheduleConfig s;
  s.kind = ScheduleKind::kStep;
  s.base_lr = 1.0;
  s.step_every = 10;
  s.gamma = 0.5;
  EXPECT_DOUBLE_EQ(learning_rate(s, 9, 100), 1.0);
  EXPECT_DOUBLE_EQ(learning_rate(s, 10, 100), 0.5);
  EXPECT_DOUBLE_EQ(learning_rate(s, 25, 100), 0.25);
}

TEST(Schedule, CosineFromPeakToFloor) {
  ScheduleConfig s;
  s.kind = ScheduleKind::kCosine;
  s.base_lr = 1.0;
  s.min_lr = 0.1;
  EXPECT_DOUBLE_EQ(learning_rate(s, 0, 100), 1.0);
  EXPECT_NEAR(learning_rate(s, 50, 100), 0.55, 1e-12);
  EXPECT_NEAR(learning_rate(s, 100, 100), 0.1, 1e-12);
}

TEST(Schedule, OnlyTheThreeKindsParse) {
  EXPECT_EQ(parse_schedule_kind("constant"), ScheduleKind::kConstant);
  EXPECT_EQ(parse_schedule_kind("step"), ScheduleKind::kStep);
  EXPECT_EQ(parse_schedule_kind("cosine"), ScheduleKind::kCosine);
  EXPECT_EQ(parse_schedule_kind("wiggly"), std::nullopt);
  EXPECT_EQ(parse_schedule_kind("Step"), std::nullopt);
}

}  // namespace
}  // namespace gossip::model
