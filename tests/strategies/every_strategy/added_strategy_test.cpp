// Adding a strategy touches only strategies/ and its tests: its registration carries everything
// the rest of the program asks of it. This file adds one (ddp_flat's engine under a new name and
// new traits, registered here alone, in a test binary of its own so that no other suite sees it)
// and asks the command line, the config validation, the memory formula and the trainer about it.
#include <gtest/gtest.h>

#include <string>

#include "engine/train/config.h"
#include "engine/train/run.h"
#include "engine/train/strategy_registry.h"
#include "strategies/common/memory_formula.h"
#include "tests/support/cli_runner.h"
#include "tests/support/reference_check.h"

namespace shardscope {
namespace {

constexpr const char* kAdded = "added_in_a_test";

StrategyTraits added_traits() {
  StrategyTraits t;
  t.zero_stage = 0;
  t.data_parallel_sync = true;
  t.teaching = "A strategy this test registered: nothing outside its registration names it.";
  return t;
}

// The engine is looked up when a run starts: registration order across files is unspecified.
const StrategyRegistrar kRegistrar({
    kAdded,
    "ddp_flat's sync, registered by a test",
    [] { return StrategyRegistry::instance().find("ddp_flat")->make(); },
    [](const Config& config) {
      const StrategyInfo* base = StrategyRegistry::instance().find("ddp_flat");
      if (base->validate) base->validate(config);
    },
    added_traits(),
});

TEST(AddedStrategy, TheCommandLineListsItAndItsDataParallelRole) {
  const test::CliResult listed = test::cli({"strategies"});
  EXPECT_EQ(listed.code, 0);
  const auto line = listed.out.find(std::string(kAdded) + "  ddp_flat's sync, registered");
  ASSERT_NE(line, std::string::npos) << listed.out;
  const std::string rest = listed.out.substr(line, listed.out.find('\n', line) - line);
  EXPECT_NE(rest.find("--dp-sync"), std::string::npos) << rest;
}

TEST(AddedStrategy, ValidationAsksItsRegistration) {
  Config c = test::tiny_config(kAdded, 2, 1);
  EXPECT_NO_THROW(finalize(c));
  // Its own validation runs: ddp_flat takes no tensor-parallel degree.
  c.strategy_options.tensor_parallel = 2;
  EXPECT_THROW(finalize(c), ConfigError);
  // Its traits say it can sync a hybrid's data-parallel dimension, so validation accepts it
  // there, and still refuses a strategy whose traits do not.
  Config hybrid = test::tiny_config("tp", 4, 1);
  hybrid.strategy_options.tensor_parallel = 2;
  hybrid.strategy_options.data_parallel_sync = kAdded;
  EXPECT_NO_THROW(validate(hybrid));
  hybrid.strategy_options.data_parallel_sync = "fsdp";
  try {
    validate(hybrid);
    ADD_FAILURE() << "fsdp accepted as a data-parallel sync";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(kAdded), std::string::npos) << e.what();
  }
}

TEST(AddedStrategy, TheMemoryFormulaReadsItsZeroStage) {
  Config added = test::tiny_config(kAdded, 4, 1);
  Config flat = test::tiny_config("ddp_flat", 4, 1);
  EXPECT_EQ(memory_layout(added).zero, profiling::kZeroStages[0]);
  const auto a = memory_formula(added, 0), f = memory_formula(flat, 0);
  for (size_t k = 0; k < a.size(); ++k) EXPECT_EQ(a[k], f[k]) << "category " << k;
}

TEST(AddedStrategy, ItTrainsLikeOneDevice) {
  Config c = test::tiny_config(kAdded, 2, 2);
  finalize(c);
  test::expect_matches_reference(run_training(c));
}

TEST(AddedStrategy, ItRunsFromTheCommandLine) {
  const test::CliResult run = test::cli({"run", "--strategy", kAdded, "--world", "2", "--preset",
                                         "tiny", "--steps", "2", "--no-tracing"});
  EXPECT_EQ(run.code, 0) << run.err;
}

}  // namespace
}  // namespace shardscope
