// The memory projection against the closed-form formulas it implements (ZeRO paper, Korthikanti
// et al.); tests/strategies/memory_projection_check_test.cpp holds it against measured runs.
#include "profiling/memory_projection.h"

#include <gtest/gtest.h>

namespace shardscope::profiling {
namespace {

// About 6.9 B parameters.
ModelShape seven_b() {
  return {50257, 4096, 32, 32, 2048, 4, false};
}

TEST(MemoryProjection, ZeroStagesDivideStateGradientsAndParameters) {
  const ModelShape m = seven_b();
  const double psi = double(model_parameters(m));
  TrainingLayout layout;
  layout.dp = 8;
  auto at = [&](const char* zero) {
    layout.zero = zero;
    return project_memory(m, layout);
  };
  // DDP (2 + 2 + K) psi, ZeRO-1 4 psi + K psi / N, ZeRO-2 2 psi + (2 + K) psi / N,
  // ZeRO-3 (4 + K) psi / N, with K = 12.
  const double ddp = at("ddp").parameters + at("ddp").gradients + at("ddp").optimizer_state;
  EXPECT_NEAR(ddp, 16 * psi, 1);
  const auto z1 = at("zero1");
  EXPECT_NEAR(z1.parameters + z1.gradients + z1.optimizer_state, 4 * psi + 12 * psi / 8, 1);
  const auto z2 = at("zero2");
  EXPECT_NEAR(z2.parameters + z2.gradients + z2.optimizer_state, 2 * psi + 14 * psi / 8, 1);
  const auto z3 = at("zero3");
  EXPECT_NEAR(z3.parameters + z3.gradients + z3.optimizer_state, 16 * psi / 8, 1);
  // 7 B under plain DDP is about 110 GB of state alone: more than an 80 GB GPU.
  EXPECT_GT(ddp / 1e9, 80);
}

TEST(MemoryProjection, ActivationsFollowKorthikanti) {
  const ModelShape m = seven_b();
  const double s = 2048, b = 1, h = 4096, a = 32, L = 32;
  TrainingLayout layout;
  layout.mixed_precision = true;
  const double logits = 4 * s * b * m.vocab;
  EXPECT_NEAR(project_memory(m, layout).activations, L * s * b * h * (34 + 5 * a * s / h) + logits,
              1);
  layout.tp = 8;
  EXPECT_NEAR(project_memory(m, layout).activations,
              L * s * b * h * (10 + 24.0 / 8 + 5 * a * s / (h * 8)) + logits / 8, 1);
  layout.sequence_parallel = true;
  EXPECT_NEAR(project_memory(m, layout).activations,
              L * s * b * h / 8 * (34 + 5 * a * s / h) + logits / 8, 1);
  layout.activation_checkpointing = true;
  EXPECT_NEAR(project_memory(m, layout).activations, L * 2 * s * b * h + logits / 8, 1);
}

TEST(MemoryProjection, PipelinesHoldStagesOrAllMicroBatches) {
  const ModelShape m = seven_b();
  TrainingLayout layout;
  layout.pp = 4;
  layout.micro_batches = 16;
  const double per_layer = 2048.0 * 4096 * (34 + 5 * 32 * 2048.0 / 4096);
  layout.schedule = "1f1b";
  EXPECT_NEAR(project_memory(m, layout).activations, per_layer * 8 * 4, 1);  // p in flight
  layout.schedule = "gpipe";
  EXPECT_NEAR(project_memory(m, layout).activations, per_layer * 8 * 16, 1);  // m in flight
  // Parameters: the first stage's 8 blocks plus the token and position embeddings.
  const int64_t block = 12 * 4096LL * 4096 + 13 * 4096LL;
  EXPECT_EQ(project_memory(m, layout).parameters_per_gpu,
            8 * block + 50257LL * 4096 + 2048LL * 4096);
}

TEST(MemoryProjection, RejectsImpossibleLayouts) {
  TrainingLayout layout;
  layout.pp = 64;
  EXPECT_THROW(project_memory(seven_b(), layout), std::invalid_argument);
  layout.pp = 1;
  layout.zero = "zero4";
  EXPECT_THROW(project_memory(seven_b(), layout), std::invalid_argument);
}

}  // namespace
}  // namespace shardscope::profiling
