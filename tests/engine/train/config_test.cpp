// Every invalid combination is rejected with a message naming its field (table-driven); the CLI
// test checks the same table through the command line for exit code 2.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engine/model/gpt_model.h"
#include "engine/train/config.h"
#include "tests/support/bad_configs.h"

namespace shardscope {
namespace {

class BadConfig : public testing::TestWithParam<test::BadConfigCase> {};

TEST_P(BadConfig, IsRejectedNamingItsField) {
  const auto& c = GetParam();
  try {
    Config config = config_from_json(nlohmann::json::parse(c.json));
    finalize(config);
    FAIL() << "accepted: " << c.json;
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), c.field) << e.what();
    EXPECT_NE(std::string(e.what()).find(c.message), std::string::npos)
        << "message '" << e.what() << "' lacks '" << c.message << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Table, BadConfig, testing::ValuesIn(test::bad_config_cases()),
                         [](const auto& info) { return test::bad_config_name(info.param); });

// A config nested 30,000 deep once overflowed the stack (a recursive flatten), and a 1 MB key was
// echoed whole in the error (issue 33).
TEST(Config, DeepNestingAndHugeKeysAreRefusedInAFewWords) {
  std::string deep;
  for (int i = 0; i < 30000; ++i) deep += R"({"a":)";
  deep += "1" + std::string(30000, '}');
  try {
    config_from_json(nlohmann::json::parse(deep));
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "a.a.a.a.a.a.a.a");
    EXPECT_NE(std::string(e.what()).find("nested deeper than 8 levels"), std::string::npos);
  }
  const std::string key(1 << 20, 'k');
  try {
    config_from_json(nlohmann::json{{key, 1}});
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_LT(std::string(e.what()).size(), 200u);
    EXPECT_NE(std::string(e.what()).find("(1048576 characters)"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("unknown key"), std::string::npos);
  }
}

// Freezing every parameter once failed at run time in the optimizer (exit 1): nothing would train,
// which is bad input before anything starts (issue 33).
TEST(Config, FreezingEveryParameterIsRefusedBeforeStart) {
  const auto names = parameter_names(preset_model("tiny"));
  try {
    Config c = config_from_json(nlohmann::json{{"preset", "tiny"}, {"model", {{"frozen", names}}}});
    finalize(c);
    FAIL() << "accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "model.frozen");
    EXPECT_NE(std::string(e.what()).find("nothing would train"), std::string::npos) << e.what();
  }
  // One left to train is fine.
  Config c = config_from_json(nlohmann::json{
      {"preset", "tiny"},
      {"model", {{"frozen", std::vector<std::string>(names.begin() + 1, names.end())}}}});
  EXPECT_NO_THROW(finalize(c));
}

TEST(Config, PresetsHaveTheirShapes) {
  EXPECT_EQ(preset_model("tiny").d_model, 64);
  EXPECT_EQ(preset_model("small").d_model, 384);
  EXPECT_EQ(preset_model("gpt2-small").vocab, 50257);
  EXPECT_THROW(preset_model("huge"), ConfigError);
}

TEST(Config, LaterKeysOverrideThePreset) {
  Config c = config_from_json(
      nlohmann::json::parse(R"({"preset":"small","model":{"layers":3},"world":2})"));
  EXPECT_EQ(c.model.d_model, 384);
  EXPECT_EQ(c.model.layers, 3);
  EXPECT_EQ(c.world, 2);
}

TEST(Config, GlobalBatchSetsTheMicroBatch) {
  Config c = config_from_json(nlohmann::json::parse(
      R"({"strategy":"torch_ddp","world":4,"grad_accum":2,"global_batch":24})"));
  finalize(c);
  EXPECT_EQ(c.micro_batch, 3);
  EXPECT_EQ(c.global_batch_size(), 24);
}

TEST(Config, RoundTripsThroughJson) {
  Config c = config_from_json(nlohmann::json::parse(
      R"({"preset":"small","strategy":"torch_ddp","world":3,"optimizer":{"name":"sgd","lr":0.5},
          "model":{"frozen":["ln_f.weight"]},"inject_fault":"rank=1,step=2"})"));
  Config back = config_from_json(to_json(c));
  EXPECT_EQ(to_json(back), to_json(c));
  EXPECT_EQ(back.fault.rank, 1);
  EXPECT_EQ(back.optimizer.name, "sgd");
}

TEST(Config, DefaultsRoundTripToo) {
  Config c = config_from_json(nlohmann::json::object());
  EXPECT_EQ(to_json(config_from_json(to_json(c))), to_json(c));
  EXPECT_FALSE(config_from_json(to_json(c)).fault.enabled());
}

TEST(Config, ParsesFaultInjection) {
  FaultInjection f = parse_fault("rank=2,step=3,kind=throw");
  EXPECT_EQ(f.rank, 2);
  EXPECT_EQ(f.step, 3);
  EXPECT_THROW(parse_fault("step=3"), ConfigError);
  EXPECT_THROW(parse_fault("rank=x"), ConfigError);
  // Past an int: refused with the field named, not std::stoi's out_of_range.
  EXPECT_THROW(parse_fault("rank=99999999999"), ConfigError);
  EXPECT_THROW(parse_fault("rank=0,step=4294967296"), ConfigError);
  EXPECT_THROW(parse_fault("rank=1,step=2,rank=0"), ConfigError);  // which rank? refused
  EXPECT_THROW(parse_fault("rank=1,kind=hang,kind=throw"), ConfigError);
}

}  // namespace
}  // namespace shardscope

namespace shardscope {
namespace {

Config backend_config(const std::string& backend, const std::string& device, int world) {
  Config c;
  c.backend = backend;
  c.device = device;
  c.world = world;
  return c;
}

TEST(Backend, AutoPicksNcclWithAGpuPerRankSharedMemoryOnASharedGpuOrTheCpu) {
  Config cpu = backend_config("auto", "cpu", 4);
  EXPECT_EQ(resolve_backend(cpu, 8), "auto: shm (shared memory) on the cpu");
  EXPECT_EQ(cpu.backend, "shm");
  EXPECT_EQ(cpu.device, "cpu");

  Config enough = backend_config("auto", "cuda", 4);
  EXPECT_NE(resolve_backend(enough, 8).find("nccl, one GPU per rank"), std::string::npos);
  EXPECT_EQ(enough.backend, "nccl");
  EXPECT_EQ(enough.device, "cuda");

  Config shared = backend_config("auto", "cuda:0", 4);
  const std::string chosen = resolve_backend(shared, 1);
  EXPECT_NE(chosen.find("shm on a shared cuda:0"), std::string::npos) << chosen;
  EXPECT_NE(chosen.find("(1 GPU for 4 ranks)"), std::string::npos) << chosen;
  EXPECT_EQ(shared.backend, "shm");
  EXPECT_EQ(shared.device, "cuda:0");
}

TEST(Backend, ConcreteBackendsStayAndNcclNeedsAGpuPerRank) {
  Config gloo = backend_config("gloo", "cpu", 2);
  EXPECT_EQ(resolve_backend(gloo, 0), "gloo");
  Config nccl = backend_config("nccl", "cuda", 4);
  EXPECT_EQ(resolve_backend(nccl, 4), "nccl, one GPU per rank");
  Config short_of_gpus = backend_config("nccl", "cuda", 4);
  try {
    resolve_backend(short_of_gpus, 2);
    ADD_FAILURE() << "nccl with 2 GPUs for 4 ranks was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "backend");
    EXPECT_NE(std::string(e.what()).find("4 ranks, 2 GPUs"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace shardscope
