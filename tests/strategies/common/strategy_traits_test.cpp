// A strategy describes itself (engine/train/strategy_registry.h) so that the rest of the program
// never compares its name. The description must be true: what its traits say it shards is what it
// holds when it runs, and every strategy says what it teaches.
#include <gtest/gtest.h>

#include <string>

#include "engine/train/config.h"
#include "engine/train/run.h"
#include "engine/train/strategy_registry.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

TEST(StrategyTraits, EveryStrategyTeachesAndOneIsTheBaseline) {
  int baselines = 0;
  for (const auto& name : StrategyRegistry::instance().names()) {
    const StrategyTraits t = strategy_traits(name);
    EXPECT_FALSE(t.teaching.empty()) << name;
    // Every family has a name people read (the enum and family_name agree).
    EXPECT_STRNE(family_name(t.family), "?") << name;
    EXPECT_GE(t.zero_stage, 0) << name;
    EXPECT_LE(t.zero_stage, 3) << name;
    if (t.baseline) ++baselines;
  }
  EXPECT_EQ(baselines, 1);
  EXPECT_EQ(strategy_traits("no such strategy").teaching, "");
}

// What the ZeRO stage says is sharded is far less than the replicated size at world 4, by the
// strategy's own account of what it holds; what it leaves replicated is whole. Eight blocks, so
// that the units FSDP gathers at once (counted with its parameters) are a small part.
TEST(StrategyTraits, TheZeroStageIsWhatTheStrategyShards) {
  auto held = [](const std::string& strategy) {
    Config c = test::tiny_config(strategy, 4, 1);
    c.reference = false;
    c.steps = 1;
    c.model.layers = 8;
    const RunSummary s = run_training(c);
    EXPECT_TRUE(s.ok) << strategy << ": " << s.failure;
    return s.ranks.empty() ? MemoryBytes{} : s.ranks.front().memory;
  };
  const MemoryBytes whole = held("ddp_bucketed");
  ASSERT_GT(whole.optimizer_state, 0);
  for (const auto& name : StrategyRegistry::instance().names()) {
    const StrategyTraits t = strategy_traits(name);
    if (t.family != StrategyFamily::kDataParallel) continue;
    const MemoryBytes m = held(name);
    auto expect = [&](const char* what, int64_t bytes, int64_t full, bool sharded) {
      if (sharded) {
        EXPECT_LT(bytes, full * 6 / 10) << name << " (ZeRO " << t.zero_stage << ") " << what << ": "
                                        << bytes << " of " << full << " bytes";
      } else {
        EXPECT_GE(bytes, full * 9 / 10) << name << " (ZeRO " << t.zero_stage << ") " << what;
      }
    };
    expect("optimizer state", m.optimizer_state, whole.optimizer_state, t.zero_stage >= 1);
    expect("gradients", m.gradients, whole.gradients, t.zero_stage >= 2);
    expect("parameters", m.parameters, whole.parameters, t.zero_stage >= 3);
  }
}

}  // namespace
}  // namespace shardscope
