// What our GPT saves for backward, as the memory tracker attributes it (activations: allocated
// in forward and still alive when backward starts), against the formula derived from the model
// (profiling/projection/memory_projection.cpp): fp32 and bf16, with and without activation
// checkpointing, on tiny, small and gpt2-small at two micro-batch sizes. gpt2-small runs 2 of its
// 12 blocks (the formula is per block plus the head, so two blocks test both; all 12 would take the
// suite's seconds for nothing).
#include <gtest/gtest.h>

#include <torch/torch.h>

#include "engine/model/gpt_model.h"
#include "engine/model/mixed_precision.h"
#include "engine/train/config.h"
#include "engine/train/config_bounds.h"
#include "profiling/projection/memory_projection.h"
#include "profiling/record/memory_tags.h"
#include "profiling/record/memory_tracker.h"

namespace shardscope {
namespace {

using profiling::MemoryKind;
using profiling::RankMemoryTracker;

// One forward (and, with `backward`, its backward) of `model` on `batch` sequences, under a
// rank's tracker in the trainer's phases. Without backward, what forward left live as
// activations is what backward would find when it begins (the tracker's own figure, taken
// then, is compared on tiny and small; gpt2-small's backward would only add minutes).
int64_t measure(const ModelConfig& m, int batch, const StrategyOptions& options,
                bool backward = true) {
  RankMemoryTracker tracker(0, nullptr);
  RankMemoryTracker::ThreadScope scope(&tracker);
  profiling::set_memory_phase(MemoryKind::kParameters);
  GptModel model(m, 1);
  model->activation_checkpointing = options.activation_checkpointing;
  auto tokens = torch::randint(m.vocab, {batch, m.seq}, torch::kLong);
  auto targets = torch::randint(m.vocab, {batch, m.seq}, torch::kLong);
  profiling::set_memory_phase(MemoryKind::kActivations);
  torch::Tensor loss;
  {
    ComputePrecisionScope precision(options, c10::DeviceType::CPU);
    loss = GptModelImpl::loss_of(model->forward(tokens), targets);
  }
  if (!backward) {
    return tracker.live_categories()[static_cast<int>(MemoryKind::kActivations)];
  }
  loss.backward();
  profiling::set_memory_phase(MemoryKind::kTemporaries);
  return tracker.activations_at_backward();
}

double formula(const ModelConfig& m, int batch, const StrategyOptions& options) {
  profiling::TrainingLayout layout;
  layout.mixed_precision = false;
  layout.compute_bytes = options.precision == "bf16" ? 2 : 4;
  layout.activation_checkpointing = options.activation_checkpointing;
  layout.micro_batch = batch;
  return profiling::project_memory(model_shape(m), layout).activations;
}

void expect_within_10_percent(const ModelConfig& m, int batch, const StrategyOptions& options,
                              const std::string& what, bool backward = true) {
  const double expected = formula(m, batch, options);
  const double measured = static_cast<double>(measure(m, batch, options, backward));
  EXPECT_NEAR(measured, expected, 0.10 * expected)
      << what << " batch " << batch << ": measured " << measured / 1e6 << " MB, formula "
      << expected / 1e6 << " MB";
}

TEST(ActivationMemory, Fp32MatchesTheFormulaOnEveryPreset) {
  torch::manual_seed(0);
  StrategyOptions fp32;
  for (const char* preset : {"tiny", "small"}) {
    for (int batch : {1, 4}) expect_within_10_percent(preset_model(preset), batch, fp32, preset);
  }
  ModelConfig gpt2 = preset_model("gpt2-small");
  gpt2.layers = 2;
  for (int batch : {1, 2})
    expect_within_10_percent(gpt2, batch, fp32, "gpt2-small (2 blocks)", /*backward=*/false);
}

TEST(ActivationMemory, Bf16AndCheckpointingMatchTheFormula) {
  torch::manual_seed(0);
  StrategyOptions bf16;
  bf16.precision = "bf16";
  StrategyOptions checkpointed;
  checkpointed.activation_checkpointing = true;
  StrategyOptions both = bf16;
  both.activation_checkpointing = true;
  const ModelConfig small = preset_model("small");
  for (int batch : {1, 4}) {
    expect_within_10_percent(small, batch, bf16, "small bf16", /*backward=*/false);
    expect_within_10_percent(small, batch, checkpointed, "small checkpointed", false);
    expect_within_10_percent(small, batch, both, "small bf16 checkpointed", false);
  }
}

// Unfused attention saves its softmax, s x s a head (the largest term of the paper's 5as/h);
// selective recompute keeps neither that nor SDPA's logsumexp, only the attention's input.
TEST(ActivationMemory, UnfusedAttentionAndSelectiveRecomputeMatchTheFormula) {
  torch::manual_seed(0);
  StrategyOptions fp32;
  StrategyOptions bf16;
  bf16.precision = "bf16";
  for (const char* kernel : {"unfused", "sdpa"}) {
    for (const bool recompute : {false, true}) {
      if (std::string(kernel) == "sdpa" && !recompute) continue;  // the presets' own tests
      ModelConfig small = preset_model("small");
      small.attention = kernel;
      small.selective_recompute = recompute;
      const std::string what =
          std::string("small, ") + kernel + (recompute ? ", selective recompute" : "");
      for (int batch : {1, 4}) {
        expect_within_10_percent(small, batch, fp32, what);
        expect_within_10_percent(small, batch, bf16, what + " bf16", /*backward=*/false);
      }
    }
  }
  // The softmax is what unfused adds: at seq 128 and 6 heads, 6 x 128 x 128 elements a sequence
  // and block (half the block's other activations at this width), in each of the 6 blocks.
  ModelConfig unfused = preset_model("small");
  unfused.attention = "unfused";
  EXPECT_GT(measure(unfused, 2, fp32),
            measure(preset_model("small"), 2, fp32) + int64_t(6) * 6 * 128 * 128 * 4 * 2 * 9 / 10);
}

// A mixture of experts saves each routed token's expert activations k times over, plus the
// router's probabilities and the routing's indices (profiling/projection/memory_projection.cpp).
TEST(ActivationMemory, AMixtureOfExpertsMatchesTheFormula) {
  torch::manual_seed(0);
  StrategyOptions fp32;
  StrategyOptions bf16;
  bf16.precision = "bf16";
  for (auto [experts, k] : {std::pair{4, 1}, std::pair{4, 2}, std::pair{8, 4}}) {
    ModelConfig tiny = preset_model("tiny");
    tiny.experts = experts;
    tiny.top_k = k;
    const std::string what =
        "tiny, " + std::to_string(experts) + " experts, top " + std::to_string(k);
    for (int batch : {1, 4}) {
      expect_within_10_percent(tiny, batch, fp32, what);
      expect_within_10_percent(tiny, batch, bf16, what + " bf16", /*backward=*/false);
    }
  }
  ModelConfig small = preset_model("small");
  small.experts = 8;
  small.top_k = 2;
  expect_within_10_percent(small, 2, fp32, "small, 8 experts, top 2", /*backward=*/false);
}

// The rule, not just the total: a forward's scratch freed before backward is no activation,
// and checkpointing keeps far less than the full forward.
TEST(ActivationMemory, ScratchFreedInForwardIsATemporary) {
  RankMemoryTracker tracker(0, nullptr);
  {
    RankMemoryTracker::ThreadScope scope(&tracker);
    profiling::set_memory_phase(MemoryKind::kActivations);
    auto kept = torch::ones({1 << 16}, torch::requires_grad());
    auto scratch = torch::empty({1 << 18});  // 1 MiB, gone before backward
    const int64_t peak = tracker.peak_bytes();
    scratch = torch::Tensor();
    auto y = (kept * 2).sum();
    y.backward();
    const auto at_peak = tracker.peak_categories();
    int64_t sum = 0;
    for (int64_t b : at_peak) sum += b;
    EXPECT_EQ(sum, tracker.peak_bytes());
    EXPECT_GE(at_peak[static_cast<int>(MemoryKind::kTemporaries)], 1 << 20);
    EXPECT_LT(tracker.activations_at_backward(), 1 << 20);
    EXPECT_GE(tracker.peak_bytes(), peak);
  }
}

}  // namespace
}  // namespace shardscope
