// Each strategy declares the options it reads (StrategyTraits::options), and the Launch form shows
// only those. Hiding an option is a claim: the strategy ignores it. Each claim is checked here by
// training: an option a strategy does not declare either is refused by validation, naming the
// option, or leaves the run bitwise the same (losses, weights, every collective's bytes).
#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/state/weights.h"
#include "engine/train/config.h"
#include "engine/train/run.h"
#include "engine/train/strategy_registry.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

// A run of `strategy` small enough to train many times (one step of tiny).
Config small_run(const std::string& strategy) {
  const StrategyTraits traits = strategy_traits(strategy);
  Config c = config_from_json(nlohmann::json{{"preset", "tiny"}, {"strategy", strategy}});
  c.world = traits.family == StrategyFamily::kReference ? 1 : 2;
  if (traits.family == StrategyFamily::kExpertParallel) {
    c.model.experts = 2;
    c.model.top_k = 1;
  }
  c.micro_batch = 2;
  c.steps = 1;
  c.threads_per_rank = 1;
  c.reference = false;
  return c;
}

struct Change {
  const char* key;
  std::function<void(StrategyOptions&)> apply;
};

// Every gated strategy option, each set away from its default.
std::vector<Change> changes() {
  return {
      {"strategy_options.bucket_mb", [](StrategyOptions& o) { o.bucket_mb = 0.01; }},
      {"strategy_options.overlap", [](StrategyOptions& o) { o.overlap = !o.overlap; }},
      {"strategy_options.prefetch", [](StrategyOptions& o) { o.prefetch = !o.prefetch; }},
      {"strategy_options.find_unused_parameters",
       [](StrategyOptions& o) { o.find_unused_parameters = true; }},
      {"strategy_options.reduce_dtype", [](StrategyOptions& o) { o.reduce_dtype = "bf16"; }},
      {"strategy_options.offload", [](StrategyOptions& o) { o.offload = true; }},
      {"strategy_options.activation_checkpointing",
       [](StrategyOptions& o) { o.activation_checkpointing = true; }},
      {"strategy_options.sequence_parallel",
       [](StrategyOptions& o) { o.sequence_parallel = true; }},
      {"strategy_options.tensor_parallel", [](StrategyOptions& o) { o.tensor_parallel = 2; }},
      {"strategy_options.pipeline_parallel", [](StrategyOptions& o) { o.pipeline_parallel = 2; }},
      {"strategy_options.micro_batches", [](StrategyOptions& o) { o.micro_batches = 2; }},
      {"strategy_options.context_parallel", [](StrategyOptions& o) { o.context_parallel = 2; }},
      {"strategy_options.expert_parallel", [](StrategyOptions& o) { o.expert_parallel = 2; }},
  };
}

std::vector<int64_t> collective_bytes(const RunSummary& s) {
  std::vector<int64_t> bytes;
  for (const auto& rank : s.ranks)
    for (const auto& e : rank.comm_events) bytes.push_back(e.bytes);
  return bytes;
}

TEST(OptionSupport, AnOptionAStrategyDoesNotReadIsRefusedOrChangesNothing) {
  for (const std::string& strategy : StrategyRegistry::instance().names()) {
    const OptionSupport read = strategy_traits(strategy).options;
    Config base = small_run(strategy);
    ASSERT_NO_THROW(finalize(base)) << strategy;
    std::optional<RunSummary> plain;
    for (const Change& change : changes()) {
      if (read.offers(change.key)) continue;
      Config changed = small_run(strategy);
      change.apply(changed.strategy_options);
      try {
        finalize(changed);
      } catch (const ConfigError& e) {
        EXPECT_EQ(e.field(), change.key) << strategy << ": " << e.what();
        continue;
      }
      if (!plain) plain = run_training(base);
      ASSERT_TRUE(plain->ok) << strategy << ": " << plain->failure;
      const RunSummary run = run_training(changed);
      ASSERT_TRUE(run.ok) << strategy << " " << change.key << ": " << run.failure;
      EXPECT_EQ(run.steps.front().loss, plain->steps.front().loss) << strategy << " " << change.key;
      EXPECT_EQ(weights_checksum(run.weights), weights_checksum(plain->weights))
          << strategy << " reads " << change.key << ", which its traits do not declare";
      EXPECT_EQ(collective_bytes(run), collective_bytes(*plain))
          << strategy << " reads " << change.key << ", which its traits do not declare";
    }
  }
}

TEST(OptionSupport, ACompositionReadsItsBasesOptionsAndOffload) {
  const OptionSupport base = strategy_traits("torch_ddp").options;
  const OptionSupport composed = strategy_traits("torch_ddp+zero1").options;
  EXPECT_FALSE(base.offers("strategy_options.offload"));
  EXPECT_TRUE(composed.offers("strategy_options.offload"));
  EXPECT_TRUE(composed.offers("strategy_options.bucket_mb"));
  EXPECT_FALSE(composed.offers("strategy_options.overlap"));  // the Reducer always overlaps
  EXPECT_FALSE(composed.offers("strategy_options.activation_checkpointing"));
  EXPECT_TRUE(strategy_traits("zero1").options.offers("strategy_options.overlap"));
  // Options every strategy reads, and keys outside strategy_options, are always offered.
  EXPECT_TRUE(strategy_traits("single").options.offers("strategy_options.precision"));
  EXPECT_TRUE(strategy_traits("single").options.offers("world"));
  EXPECT_FALSE(strategy_traits("single").options.offers("strategy_options.bucket_mb"));
}

}  // namespace
}  // namespace shardscope
