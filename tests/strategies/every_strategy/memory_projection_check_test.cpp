// The memory projection (profiling/memory_projection) against what runs here measure at small
// scale: the bytes each rank's strategy reports holding, in fp32 with AdamW.
#include <gtest/gtest.h>

#include <cstdio>

#include <nlohmann/json.hpp>

#include "engine/train/config.h"
#include "engine/train/run.h"
#include "profiling/projection/memory_projection.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

profiling::ModelShape shape_of(const ModelConfig& m) {
  return {m.vocab, m.d_model, m.heads, m.layers, m.seq, m.mlp_ratio, m.tie_embeddings};
}

// The largest of the ranks' reported bytes: the projection is for the busiest GPU.
MemoryBytes busiest(const RunSummary& s) {
  MemoryBytes most;
  for (const auto& r : s.ranks) {
    most.parameters = std::max(most.parameters, r.memory.parameters);
    most.gradients = std::max(most.gradients, r.memory.gradients);
    most.optimizer_state = std::max(most.optimizer_state, r.memory.optimizer_state);
  }
  return most;
}

struct Case {
  std::string strategy;
  int world;
  profiling::TrainingLayout layout;
  double tolerance;  // relative; ZeRO-1 balances whole parameters, so its shares are uneven
  bool tied_embeddings = false, prefetch = true;
};

TEST(MemoryProjectionCheck, MatchesWhatRunsHoldPerRank) {
  auto layout = [](const char* zero, int dp, int tp, int pp) {
    profiling::TrainingLayout l;
    l.zero = zero;
    l.dp = dp;
    l.tp = tp;
    l.pp = pp;
    l.mixed_precision = false;  // our runs: fp32 weights, gradients and AdamW moments
    return l;
  };
  const std::vector<Case> cases = {
      {"torch_ddp", 2, layout("ddp", 2, 1, 1), 0.0},
      {"zero1", 4, layout("zero1", 4, 1, 1), 0.15},
      {"zero2", 4, layout("zero2", 4, 1, 1), 0.01},
      {"tp", 4, layout("ddp", 1, 4, 1), 0.0},
      {"pp", 2, layout("ddp", 1, 1, 2), 0.0},
      // Its shards are padded to a multiple of the ranks; with prefetch it holds two blocks
      // gathered at once. Tied, the embeddings' unit stays gathered through backward beside
      // them (one block without prefetch).
      {"fsdp", 4, layout("zero3", 4, 1, 1), 0.002},
      {"fsdp", 4, layout("zero3", 4, 1, 1), 0.002, true, true},
      {"fsdp", 4, layout("zero3", 4, 1, 1), 0.002, true, false},
  };
  for (const auto& c : cases) {
    Config config = test::tiny_config(c.strategy, 2, 1);
    config.world = c.world;
    config.model.layers = 4;
    config.model.tie_embeddings = c.tied_embeddings;
    config.strategy_options.prefetch = c.prefetch;
    config.reference = false;
    config.steps = 1;
    finalize(config);
    RunSummary s = run_training(config);
    ASSERT_TRUE(s.ok) << c.strategy << ": " << s.failure;
    const MemoryBytes measured = busiest(s);
    profiling::TrainingLayout l = c.layout;
    l.prefetch = c.prefetch;
    const auto projected = profiling::project_memory(shape_of(config.model), l);
    auto expect_close = [&](double p, int64_t m, const char* what) {
      EXPECT_NEAR(p, double(m), c.tolerance * double(m) + 1)
          << c.strategy << (c.tied_embeddings ? " tied" : "") << (c.prefetch ? "" : " no prefetch")
          << " " << what;
    };
    expect_close(projected.parameters, measured.parameters, "parameters");
    expect_close(projected.gradients, measured.gradients, "gradients");
    expect_close(projected.optimizer_state, measured.optimizer_state, "optimizer state");
  }
}

// Sequence parallelism: what one more block of a tp rank loses with it, measured against the
// formula. It divides a block's LayerNorm inputs and statistics by t, not the outputs our tp
// gathers and the Linears after them save whole. (Counting those as divided too, the formula
// promised twice the saving that runs measure.) A block's saving is the difference between 3
// blocks and 2: the head's is not checked here.
TEST(MemoryProjectionCheck, SequenceParallelSavesWhatRunsSaveInABlock) {
  auto activations = [](bool sp, bool formula, int layers) {
    // small's width, so that the step's peak is in backward, where the activations are (on
    // tiny it is the optimizer's step, with none).
    Config config = test::tiny_config("tp", 2, 1);
    config.model = config_from_json(nlohmann::json{{"preset", "small"}}).model;
    config.model.layers = layers;
    config.micro_batch = 4;
    config.reference = false;
    config.steps = 1;
    config.strategy_options.sequence_parallel = sp;
    finalize(config);
    const RunSummary s = run_training(config);
    EXPECT_TRUE(s.ok) << s.failure;
    const auto& bytes = formula ? s.ranks.at(0).formula_bytes : s.ranks.at(0).peak_breakdown;
    const double held = double(bytes[static_cast<int>(profiling::MemoryKind::kActivations)]);
    EXPECT_GT(held, 0) << "the peak was not in backward";
    return held;
  };
  auto block_saving = [&](bool formula) {
    return (activations(false, formula, 3) - activations(true, formula, 3)) -
           (activations(false, formula, 2) - activations(true, formula, 2));
  };
  const double measured = block_saving(false), projected = block_saving(true);
  std::printf("sequence parallelism saves %.1f kB a block measured, %.1f kB by the formula\n",
              measured / 1e3, projected / 1e3);
  ASSERT_GT(measured, 0);
  EXPECT_NEAR(projected / measured, 1.0, 0.05);
}

// bf16 pipelines: a stage keeps one bf16 copy of its weights however many micro-batches it holds
// (TensorParallelStage::share_weight_casts), and the formula counts it once. small's 3 blocks a
// stage copy 10.6 MB of weights, as much as one micro-batch's activations, so counting a copy
// per micro-batch in flight (1f1b's first stage holds 2, gpipe's stages 4) would miss by 10.6 to
// 32 MB (+33 % to +60 %). The 15 % held here: the runtime also keeps each micro-batch's stage
// output and received input beside what autograd saves, which the formula leaves out; runs
// measure 3 to 10 % above it (2026-11-27).
TEST(MemoryProjectionCheck, Bf16PipelineStagesHoldOneCopyOfTheirWeights) {
  for (const char* schedule : {"1f1b", "gpipe"}) {
    Config config = test::tiny_config("pp", 2, 1);
    config.model = config_from_json(nlohmann::json{{"preset", "small"}}).model;
    config.micro_batch = 4;
    config.reference = false;
    config.steps = 2;
    config.strategy_options.precision = "bf16";
    config.strategy_options.micro_batches = 4;
    config.strategy_options.schedule = schedule;
    finalize(config);
    const RunSummary s = run_training(config);
    ASSERT_TRUE(s.ok) << s.failure;
    for (const auto& rank : s.ranks) {
      const double measured = double(rank.most_activation_bytes);
      const double formula =
          double(rank.formula_bytes[static_cast<int>(profiling::MemoryKind::kActivations)]);
      std::printf("%s rank %d: activations %.1f MB measured, %.1f MB by the formula\n", schedule,
                  rank.rank, measured / 1e6, formula / 1e6);
      EXPECT_NEAR(measured / formula, 1.0, 0.15) << schedule << " rank " << rank.rank;
    }
  }
}

}  // namespace
}  // namespace shardscope
