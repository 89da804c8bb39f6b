// What each strategy says it holds per rank agrees with the ZeRO paper's formulas (fp32 AdamW:
// parameters 4 bytes, gradients 4, moments 8 per parameter; Psi parameters, N ranks):
// DDP 4+4+8 Psi; ZeRO-1 4Psi + 4Psi + 8Psi/N; ZeRO-2 4Psi + (4+8)Psi/N; ZeRO-3 (4+4+8)Psi/N plus
// the units gathered at once. Padding to a multiple of N adds at most N-1 elements per flat
// vector (bucket or unit).
#include <gtest/gtest.h>

#include <algorithm>

#include "engine/model/gpt_model.h"
#include "engine/train/config.h"
#include "engine/train/run.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

constexpr int kWorld = 4;

struct Totals {
  int64_t sum_optimizer = 0, max_optimizer = 0, max_gradients = 0, max_parameters = 0;
};

Totals totals(const RunSummary& s) {
  Totals t;
  for (const auto& r : s.ranks) {
    t.sum_optimizer += r.memory.optimizer_state;
    t.max_optimizer = std::max(t.max_optimizer, r.memory.optimizer_state);
    t.max_gradients = std::max(t.max_gradients, r.memory.gradients);
    t.max_parameters = std::max(t.max_parameters, r.memory.parameters);
  }
  return t;
}

RunSummary run(const std::string& strategy, bool prefetch = true) {
  Config c = test::tiny_config(strategy, kWorld, 1);
  c.reference = false;
  c.steps = 1;
  c.strategy_options.prefetch = prefetch;
  RunSummary s = run_training(c);
  EXPECT_TRUE(s.ok) << s.failure;
  return s;
}

int64_t psi() {
  return parameter_count(test::tiny_config("single", 1, 1).model);
}

TEST(MemoryFormula, DdpHoldsEverything) {
  RunSummary s = run("ddp_bucketed");
  for (const auto& r : s.ranks) {
    EXPECT_EQ(r.memory.parameters, 4 * psi());
    EXPECT_EQ(r.memory.gradients, 4 * psi());
    EXPECT_EQ(r.memory.optimizer_state, 8 * psi());
  }
}

TEST(MemoryFormula, Zero1ShardsOnlyOptimizerState) {
  Totals t = totals(run("zero1"));
  EXPECT_EQ(t.max_parameters, 4 * psi());
  EXPECT_EQ(t.max_gradients, 4 * psi());
  EXPECT_EQ(t.sum_optimizer, 8 * psi());
  const int64_t largest_tensor = 256 * 64;  // the token embedding: whole tensors move
  EXPECT_LE(t.max_optimizer, 8 * (psi() / kWorld + largest_tensor));
}

TEST(MemoryFormula, Zero2ShardsGradientsToo) {
  Totals t = totals(run("zero2"));  // default bucket cap: the tiny model fits one bucket
  EXPECT_EQ(t.max_parameters, 4 * psi());
  EXPECT_EQ(t.sum_optimizer, 8 * psi());
  EXPECT_LE(t.max_optimizer, 8 * (psi() / kWorld + kWorld));
  EXPECT_GE(t.max_gradients, 4 * psi() / kWorld);
  EXPECT_LE(t.max_gradients, 4 * (psi() / kWorld + kWorld));
}

TEST(MemoryFormula, FsdpShardsParametersPlusTheUnitsGatheredAtOnce) {
  // Units: embeddings 256x64 + 32x64; blocks; final LN + head 2x64 + 64x256. A block is largest.
  const ModelConfig m = test::tiny_config("single", 1, 1).model;
  const int64_t block = (parameter_count(m) - (m.vocab * m.d_model + m.seq * m.d_model) -
                         (2 * m.d_model + m.vocab * m.d_model)) /
                        m.layers;
  const int64_t units = m.layers + 2;
  for (bool prefetch : {true, false}) {
    SCOPED_TRACE(prefetch ? "prefetch" : "no prefetch");
    RunSummary s = run("fsdp", prefetch);
    Totals t = totals(s);
    EXPECT_EQ(t.sum_optimizer, 8 * psi());
    EXPECT_LE(t.max_optimizer, 8 * (psi() / kWorld + units));
    EXPECT_LE(t.max_gradients, 4 * (psi() / kWorld + units));
    const int64_t shard = t.max_gradients;  // parameter and gradient slices have the same size
    const int64_t gathered = t.max_parameters - shard;
    EXPECT_GE(gathered, 4 * block);  // a block must be whole to run
    EXPECT_LE(gathered, (prefetch ? 2 : 1) * 4 * (block + kWorld));
  }
}

}  // namespace
}  // namespace shardscope
