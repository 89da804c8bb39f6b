// ZeRO-2 and FSDP (ZeRO-3) train exactly like one device, move the volume of data their design
// says, and hold what the ZeRO paper's formulas say per rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "engine/model/gpt_model.h"
#include "engine/train/config.h"
#include "engine/train/run.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

using test::expect_matches_reference;
using test::tiny_config;

struct ShardedCase {
  std::string strategy;
  bool overlap_or_prefetch;
  int world;
  int accum;
};

void PrintTo(const ShardedCase& c, std::ostream* os) {
  *os << c.strategy << (c.overlap_or_prefetch ? "" : " (no overlap/prefetch)") << ", world "
      << c.world << ", accum " << c.accum;
}

Config case_config(const ShardedCase& c) {
  Config config = tiny_config(c.strategy, c.world, c.accum);
  config.strategy_options.bucket_mb = 0.1;  // several zero2 buckets on the tiny model
  config.strategy_options.overlap = c.overlap_or_prefetch;
  config.strategy_options.prefetch = c.overlap_or_prefetch;
  return config;
}

class ShardedMatchesReference : public testing::TestWithParam<ShardedCase> {};

TEST_P(ShardedMatchesReference, AfterFiveAdamWSteps) {
  RunSummary s = run_training(case_config(GetParam()));
  expect_matches_reference(s);
  EXPECT_EQ(s.replicated, GetParam().strategy == "zero2");
}

TEST_P(ShardedMatchesReference, WithSgdMomentumAndClipping) {
  Config c = case_config(GetParam());
  test::use_sgd_with_momentum(c);
  c.optimizer.clip_grad_norm = 0.5;  // the global norm spans every rank's slices
  expect_matches_reference(run_training(c));
}

std::vector<ShardedCase> cases() {
  std::vector<ShardedCase> out;
  for (const char* s : {"zero2", "fsdp"}) {
    for (int world : {2, 4}) {
      for (int accum : {1, 2}) out.push_back({s, true, world, accum});
    }
    out.push_back({s, false, 4, 2});
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Layouts, ShardedMatchesReference, testing::ValuesIn(cases()),
                         [](const auto& info) {
                           const ShardedCase& c = info.param;
                           return c.strategy + (c.overlap_or_prefetch ? "" : "_sequential") +
                                  "_world" + std::to_string(c.world) + "_accum" +
                                  std::to_string(c.accum);
                         });

class ShardedToyModels : public testing::TestWithParam<std::string> {};

TEST_P(ShardedToyModels, FrozenTiedAndUnusedParameters) {
  test::expect_toy_models_match_reference(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Strategies, ShardedToyModels, testing::Values("zero2", "fsdp"));

int64_t padded(int64_t numel, int world) {
  return (numel + world - 1) / world * world;
}

// FSDP's units on the untied tiny GPT: embeddings, each block, final norm with the LM head;
// the bytes of all their flat vectors, each padded to a multiple of `world`.
int64_t fsdp_flat_bytes(const ModelConfig& m, int world) {
  GptModel model(m, 1);
  std::map<std::string, int64_t> units;
  for (const auto& [name, p] : model->named_params()) {
    std::string unit = "head";
    if (name.rfind("tok_emb", 0) == 0 || name.rfind("pos_emb", 0) == 0) unit = "embeddings";
    if (name.rfind("blocks.", 0) == 0) unit = name.substr(0, name.find('.', 7));
    units[unit] += p.numel();
  }
  int64_t bytes = 0;
  for (const auto& [unit, numel] : units) bytes += padded(numel, world) * 4;
  return bytes;
}

TEST(Fsdp, GathersParametersTwiceAndReduceScattersGradientsOncePerStep) {
  const int world = 4;
  Config c = tiny_config("fsdp", world, 1);
  RunSummary s = run_training(c);
  ASSERT_TRUE(s.ok) << s.failure;
  const int64_t flat_bytes = fsdp_flat_bytes(c.model, world);
  for (const auto& rank : s.ranks) {
    auto steps = test::traffic_per_step(rank);
    ASSERT_EQ(steps.size(), size_t(c.steps));
    for (const auto& step : steps) {
      // Each rank contributes its shard to every gather: world x that = the whole unit.
      EXPECT_EQ(step.all_gather_bytes * world, 2 * flat_bytes);  // forward and backward
      EXPECT_EQ(step.reduce_scatter_bytes, flat_bytes);          // gradients, once
      EXPECT_EQ(step.all_reduce_bytes, 0);
    }
  }
}

TEST(Fsdp, AccumulationReduceScattersEveryMicroBatch) {
  const int world = 2;
  Config c = tiny_config("fsdp", world, 2);
  RunSummary s = run_training(c);
  ASSERT_TRUE(s.ok) << s.failure;
  const int64_t flat_bytes = fsdp_flat_bytes(c.model, world);
  for (const auto& step : test::traffic_per_step(s.ranks[0])) {
    EXPECT_EQ(step.all_gather_bytes * world, 2 * 2 * flat_bytes);
    EXPECT_EQ(step.reduce_scatter_bytes, 2 * flat_bytes);
  }
}

// With prefetch, block 0's all-gather starts while the embeddings compute, also when the head
// shares the embeddings' unit (tied): until 2026-11-27 the next unit was found by unit number,
// and unit 0 then meant the head, so nothing was prefetched there.
TEST(Fsdp, TiedEmbeddingsPrefetchTheFirstBlockUnderTheEmbeddings) {
  for (bool tied : {false, true}) {
    Config c = tiny_config("fsdp", 2, 1);
    c.model.tie_embeddings = tied;
    c.reference = false;
    c.steps = 2;
    RunSummary s = run_training(c);
    ASSERT_TRUE(s.ok) << s.failure;
    const profiling::Trace& t = s.trace;
    int64_t embeddings_end = -1, second_gather = -1;
    int gathers = 0;
    for (const auto& e : t.ranks.at(0).events) {
      if (e.step != 1) continue;
      const std::string name = t.str(e.name);
      if (name.rfind("forward embeddings", 0) == 0 && embeddings_end < 0) embeddings_end = e.t1_ns;
      if (e.category == profiling::Category::kCollective &&
          name.find("all_gather") != std::string::npos && ++gathers == 2)
        second_gather = e.t0_ns;
    }
    ASSERT_GE(embeddings_end, 0) << tied;
    ASSERT_GE(second_gather, 0) << tied;
    EXPECT_LT(second_gather, embeddings_end) << (tied ? "tied" : "untied");
  }
}

TEST(Zero2, ReduceScattersEveryGradientOnceAndGathersEveryParameterOnce) {
  const int world = 4;
  Config c = case_config({"zero2", true, world, 2});
  RunSummary s = run_training(c);
  ASSERT_TRUE(s.ok) << s.failure;
  int64_t gradient_bytes = 0;
  for (const auto& [name, w] : s.weights) gradient_bytes += w.numel() * 4;
  for (const auto& step : test::traffic_per_step(s.ranks[0])) {
    // Bucket padding adds fewer than `world` elements per bucket; tiny has under 30 buckets here.
    EXPECT_GE(step.reduce_scatter_bytes, gradient_bytes);
    EXPECT_LT(step.reduce_scatter_bytes, gradient_bytes + 30 * world * 4);
    EXPECT_EQ(step.all_gather_bytes * world, step.reduce_scatter_bytes);
    EXPECT_EQ(step.all_reduce_bytes, 0);
  }
}

}  // namespace
}  // namespace shardscope
