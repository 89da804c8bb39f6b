// The collective cost model against published nccl-tests measurements (within 15 %) and against
// its own definitions (factors, steps, hierarchy).
#include "profiling/projection/collective_model.h"

#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

namespace shardscope::profiling {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(CollectiveModel, LargeAllReduceBusBandwidthMatchesNcclTests) {
  // nccl-tests all_reduce busbw at large sizes (DESIGN.md): 8 x A100 NVLink about 235 GB/s,
  // 8 x H100 NVSwitch about 370 GB/s with the ring algorithm.
  const auto a100 = estimate_collective("all_reduce", kGiB, 8, load_hardware_profile("8xA100"));
  EXPECT_NEAR(a100.busbw_gbps, 235, 0.15 * 235);
  const auto h100 =
      estimate_collective("all_reduce", kGiB, 8, load_hardware_profile("8xH100"), "ring");
  EXPECT_NEAR(h100.busbw_gbps, 370, 0.15 * 370);
  EXPECT_EQ(h100.algorithm, "ring");
  EXPECT_EQ(h100.protocol, Protocol::kSimple);
  // Without NVSwitch, over PCIe: 35-45 GB/s.
  const auto pcie =
      estimate_collective("all_reduce", kGiB, 8, load_hardware_profile("8xH100-PCIe"));
  EXPECT_GE(pcie.busbw_gbps, 35 * 0.85);
  EXPECT_LE(pcie.busbw_gbps, 45 * 1.15);
}

TEST(CollectiveModel, SmallMessagesTakeTensOfMicroseconds) {
  // A published 8-GPU NVSwitch all_reduce_perf run (kvcache-ai/Mooncake pull request 3484):
  // 32 KiB in 18.7 us, 256 KiB in 19.5 us, 1 MiB in 27.8 us, 16 MiB in 121 us.
  const auto hw = load_hardware_profile("8xH100");
  const std::vector<std::pair<int64_t, double>> measured = {
      {32 << 10, 18.66}, {256 << 10, 19.54}, {1 << 20, 27.76}, {16 << 20, 121.33}};
  for (const auto& [bytes, us] : measured) {
    const auto e = estimate_collective("all_reduce", bytes, 8, hw);
    EXPECT_NEAR(e.time_s * 1e6, us, 0.15 * us) << bytes << " bytes";
  }
  // The smallest are latency-bound and use the low-latency protocol.
  EXPECT_EQ(estimate_collective("all_reduce", 8, 8, hw).protocol, Protocol::kLL);
}

TEST(CollectiveModel, BusBandwidthUsesTheNcclTestsFactors) {
  const auto hw = load_hardware_profile("8xH100");
  for (const char* op : {"all_reduce", "all_gather_into", "reduce_scatter_tensor", "broadcast"}) {
    const auto e = estimate_collective(op, kGiB, 8, hw, "ring");
    EXPECT_NEAR(e.algbw_gbps, double(kGiB) / e.time_s / 1e9, 1e-9);
    // At 1 GiB every ring collective moves data at the link's achievable rate.
    EXPECT_NEAR(e.busbw_gbps, 450 * 0.82, 0.02 * 450 * 0.82) << op;
  }
  // All-gather moves half the bytes of an all-reduce of the same buffer through each GPU.
  const double ar = estimate_collective("all_reduce", kGiB, 8, hw, "ring").time_s;
  const double ag = estimate_collective("all_gather_into", kGiB, 8, hw, "ring").time_s;
  EXPECT_NEAR(ar / ag, 2.0, 0.05);
}

TEST(CollectiveModel, InsideANodeTheTreeIsAChainAndTheRingWins) {
  const auto hw = load_hardware_profile("8xH100");
  for (int64_t bytes : {int64_t{8}, int64_t{4096}, kGiB}) {
    const auto ring = estimate_collective("all_reduce", bytes, 8, hw, "ring");
    const auto tree = estimate_collective("all_reduce", bytes, 8, hw, "tree");
    EXPECT_LE(ring.time_s, tree.time_s) << bytes;  // same 14 steps, fewer bytes
    EXPECT_EQ(estimate_collective("all_reduce", bytes, 8, hw).algorithm, "ring");
  }
  // At large sizes the chain moves 2 S per GPU against the ring's 2 (n-1)/n S.
  EXPECT_NEAR(estimate_collective("all_reduce", kGiB, 8, hw, "tree").time_s /
                  estimate_collective("all_reduce", kGiB, 8, hw, "ring").time_s,
              8.0 / 7.0, 0.02);
  EXPECT_THROW(estimate_collective("all_gather_into", 1, 8, hw, "tree"), std::invalid_argument);
}

TEST(CollectiveModel, AcrossNodesTheNetworkRailsSetThePace) {
  const auto hw = load_hardware_profile("2x8xH100-IB");
  const auto inside = estimate_collective("all_reduce", kGiB, 8, hw);
  const auto across = estimate_collective("all_reduce", kGiB, 16, hw);
  EXPECT_EQ(inside.algorithm, "ring");
  EXPECT_EQ(across.algorithm, "hierarchical");
  EXPECT_GT(across.time_s, inside.time_s);
  // Inside: 2 x 7/8 of 1 GiB over NVLink. Between nodes each GPU's rail all-reduces 1/8 of the
  // buffer with its peer: 2 x 1/2 x 1/8 GiB at 50 GB/s x 0.9.
  const double network = 2 * 0.5 * (double(kGiB) / 8) / (50e9 * 0.9);
  EXPECT_NEAR(across.time_s - inside.time_s, network, 0.1 * network);
}

TEST(CollectiveModel, RejectsWhatItCannotModel) {
  const auto hw = load_hardware_profile("8xH100");
  EXPECT_THROW(estimate_collective("all_reduce", 1, 9, hw), std::invalid_argument);
  EXPECT_THROW(estimate_collective("frobnicate", 1, 8, hw), std::invalid_argument);
  EXPECT_THROW(estimate_collective("all_reduce", 1, 8, hw, "butterfly"), std::invalid_argument);
  EXPECT_EQ(estimate_collective("all_reduce", kGiB, 1, hw).time_s, 0.0);  // nothing to do
}

TEST(CollectiveModel, ParsesSizes) {
  EXPECT_EQ(parse_bytes("1GiB"), kGiB);
  EXPECT_EQ(parse_bytes("256MB"), 256000000);
  EXPECT_EQ(parse_bytes("4KiB"), 4096);
  EXPECT_EQ(parse_bytes("1000"), 1000);
  EXPECT_EQ(parse_bytes("1.5K"), 1536);
  EXPECT_THROW(parse_bytes("lots"), std::invalid_argument);
  EXPECT_THROW(parse_bytes("3 parsecs"), std::invalid_argument);
}

TEST(HardwareProfiles, EveryShippedProfileLoads) {
  const auto names = hardware_profile_names();
  for (const char* expected : {"8xH100", "8xA100", "8xH100-PCIe", "2x8xH100-IB"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
  for (const auto& name : names) {
    const auto hw = load_hardware_profile(name);
    EXPECT_EQ(hw.name, name);
    EXPECT_GT(hw.intra.bandwidth_gbps, 0);
  }
  EXPECT_EQ(load_hardware_profile("2x8xH100-IB").gpus(), 16);
}

TEST(HardwareProfiles, AFittedProfileReproducesItsCalibration) {
  CalibrationPoints c;
  c.small_world = 2;
  c.large_world = 4;
  c.large_bytes = 4 << 20;
  c.t_small_at_small_world_s = 50e-6;
  c.t_small_at_large_world_s = 80e-6;
  c.t_large_at_small_world_s = 2e-3;
  c.matmul_tflops = 0.1;
  c.memory_gib = 24;
  const auto fitted = fit_profile(c, "this-machine", "test");
  // Through the file format and back, as `calibrate` writes it and `project` reads it.
  const auto hw = parse_hardware_profile(profile_json(fitted), "this-machine.json");
  EXPECT_FALSE(hw.nccl_protocols);
  EXPECT_NEAR(hw.intra.hw_latency_us[2], 30.0 / 4, 1e-9);  // 4 more ring steps cost 30 us
  EXPECT_NEAR(estimate_collective("all_reduce", 8, 2, hw).time_s, 50e-6, 0.5e-6);
  EXPECT_NEAR(estimate_collective("all_reduce", 8, 4, hw).time_s, 80e-6, 0.5e-6);
  EXPECT_NEAR(estimate_collective("all_reduce", 4 << 20, 2, hw).time_s, 2e-3, 1e-9);
  EXPECT_EQ(estimate_collective("all_reduce", 8, 2, hw).protocol, Protocol::kSimple);
}

TEST(HardwareProfiles, MalformedProfilesNameTheField) {
  try {
    parse_hardware_profile(R"({"name":"x","gpus_per_node":8,"nodes":1,"gpu_memory_gib":80,
      "peak_bf16_tflops":1,"intra":{"bandwidth_gbps":-3,"efficiency":1,
      "hw_latency_us":{"ll":1,"ll128":1,"simple":1}}})",
                           "test.json");
    ADD_FAILURE() << "accepted a negative bandwidth";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bandwidth_gbps"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_hardware_profile("[1,2]", "t"), std::runtime_error);
  // Positive but out of any machine's range (sweep 3: 1e-300 GB/s priced a step in 63 digits).
  for (const char* bandwidth : {"1e-300", "1e300"}) {
    try {
      parse_hardware_profile(
          std::string(R"({"name":"x","gpus_per_node":8,"nodes":1,
        "gpu_memory_gib":80,"peak_bf16_tflops":1,"intra":{"bandwidth_gbps":)") +
              bandwidth + R"(,"efficiency":1,"hw_latency_us":{"ll":1,"ll128":1,"simple":1}}})",
          "test.json");
      ADD_FAILURE() << "accepted a bandwidth of " << bandwidth;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("'bandwidth_gbps' must lie between 1e-6 and 1e9"),
                std::string::npos)
          << e.what();
    }
  }
  // A truncated file, or a NaN JSON cannot spell, says where it broke.
  for (const char* text : {R"({"name":"x","gpus_per_node":8,"nod)", R"({"name":"x","sms":NaN})"}) {
    try {
      parse_hardware_profile(text, "cut.json");
      ADD_FAILURE() << "accepted " << text;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("cut.json: not valid JSON (at byte"), std::string::npos)
          << e.what();
    }
  }
  // A number no double holds says so, naming the file.
  try {
    parse_hardware_profile(R"({"name":"x","sms":1e400})", "huge.json");
    ADD_FAILURE() << "accepted 1e400";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("huge.json: not valid JSON"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("1e400"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_hardware_profile(R"({"name":"x","gpus_per_node":8,"nodes":2,
      "gpu_memory_gib":80,"peak_bf16_tflops":1,"intra":{"bandwidth_gbps":3,"efficiency":1,
      "hw_latency_us":{"ll":1,"ll128":1,"simple":1}}})",
                                      "t"),
               std::runtime_error);  // two nodes need an inter link
  EXPECT_THROW(load_hardware_profile("no-such-machine"), std::runtime_error);
  // A hidden share is a fraction: above 1 a GEMM would make its neighbour's time negative.
  nlohmann::json h200 = nlohmann::json::parse(
      std::ifstream(std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/hardware/8xH200.json"));
  h200["gpu"]["collective_hidden_beside_gemm"] = 1.5;
  try {
    parse_hardware_profile(h200.dump(), "h.json");
    ADD_FAILURE() << "accepted a hidden share of 1.5";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("collective_hidden_beside_gemm"), std::string::npos)
        << e.what();
  }
  // The two streams' paces beside each other: each at most 1 (faster than alone is no
  // contention), and measured together, so one without the other is refused, naming it.
  h200["gpu"]["collective_hidden_beside_gemm"] = 0.41;
  for (const auto& [field, value, named] :
       {std::tuple{"gemm_rate_beside_collective", 1.2, "gemm_rate_beside_collective"},
        {"collective_rate_beside_gemm", 0.0, "give both, each above 0, or neither"}}) {
    nlohmann::json bad = h200;
    bad["gpu"][field] = value;
    try {
      parse_hardware_profile(bad.dump(), "h.json");
      ADD_FAILURE() << "accepted " << field << " " << value;
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find(named), std::string::npos) << e.what();
    }
  }
  // A profile with the share alone runs both streams at 1 / (2 - share): the same pairs.
  h200["gpu"].erase("gemm_rate_beside_collective");
  h200["gpu"].erase("collective_rate_beside_gemm");
  const GpuCompute::Contention from_share =
      parse_hardware_profile(h200.dump(), "h.json").gpu.contention();
  EXPECT_TRUE(from_share.measured);
  EXPECT_DOUBLE_EQ(from_share.compute_rate, 1 / (2 - 0.41));
  EXPECT_DOUBLE_EQ(from_share.collective_rate, 1 / (2 - 0.41));
  EXPECT_FALSE(load_hardware_profile("8xA100").gpu.contention().measured);
  // A misspelt key would leave its figure unused without a word: refused, naming it, at every
  // level of the profile.
  const nlohmann::json h100 = nlohmann::json::parse(
      std::ifstream(std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/hardware/8xH100.json"));
  for (const nlohmann::json& typo :
       {nlohmann::json::parse(R"({"gpus_per_nod": 8})"),
        nlohmann::json::parse(R"({"gpu": {"matmul_tflop": 9}})"),
        nlohmann::json::parse(R"({"gpu": {"host": {"op": 1}}})"),
        nlohmann::json::parse(R"({"intra": {"bandwith_gbps": 1}})"),
        nlohmann::json::parse(R"({"inter": {"hw_latency_us": {"LL": 1}}})")}) {
    nlohmann::json bad = h100;
    bad.merge_patch(typo);
    const std::string key = typo.flatten().begin().key();
    const std::string last = key.substr(key.rfind('/') + 1);
    try {
      parse_hardware_profile(bad.dump(), "h.json");
      ADD_FAILURE() << "accepted " << typo.dump();
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("unknown key '" + last + "'"), std::string::npos)
          << e.what();
    }
  }
}

// Issue 33: a hand-written profile with a field of the wrong type is told which field, in our
// words; nlohmann's "[json.exception.type_error.302] type must be string" once came through.
TEST(HardwareProfiles, AFieldOfTheWrongTypeIsNamedInOurWords) {
  const std::string base =
      R"("gpus_per_node":8,"nodes":1,"gpu_memory_gib":80,"peak_bf16_tflops":1,)";
  const std::string link = R"({"kind":"nvswitch","bandwidth_gbps":3,"efficiency":1,
      "hw_latency_us":{"ll":1,"ll128":1,"simple":1}})";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"name":5,)" + base + R"("intra":)" + link + "}", "'name' must be text"},
      {R"({"name":"x","description":5,)" + base + R"("intra":)" + link + "}",
       "'description' must be text"},
      {R"({"name":"x",)" + base + R"("intra":5})", "'intra' must be an object"},
      {R"({"name":"x",)" + base + R"("intra":{"kind":3,"bandwidth_gbps":3,"efficiency":1,
        "hw_latency_us":{"ll":1,"ll128":1,"simple":1}}})",
       "'kind' must be text"},
      {R"({"name":"x",)" + base + R"("intra":{"bandwidth_gbps":3,"efficiency":1,
        "hw_latency_us":5}})",
       "'hw_latency_us' must be an object"},
      {R"({"name":"x",)" + base + R"("intra":{"bandwidth_gbps":"x","efficiency":1,
        "hw_latency_us":{"ll":1,"ll128":1,"simple":1}}})",
       "'bandwidth_gbps' must be a number"},
      {R"({"name":"x","gpus_per_node":1.5,"nodes":1,"gpu_memory_gib":80,"peak_bf16_tflops":1,
        "intra":)" +
           link + "}",
       "'gpus_per_node' must be a whole number"},
      {R"({"name":"x",)" + base + R"("launch_us":null,"intra":)" + link + "}",
       "'launch_us' must be a number"},
      {R"({"name":"x",)" + base + R"("protocols":[],"intra":)" + link + "}",
       "'protocols' must be text"},
      {R"({"name":"x",)" + base + R"("compute":1,"intra":)" + link + "}", "'compute' must be text"},
  };
  for (const auto& [text, expected] : cases) {
    try {
      parse_hardware_profile(text, "hw.json");
      ADD_FAILURE() << "accepted " << text;
    } catch (const std::runtime_error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(expected), std::string::npos) << message;
      EXPECT_EQ(message.find("hw.json"), 0u) << message;
      EXPECT_EQ(message.find("json.exception"), std::string::npos) << message;
    }
  }
}

}  // namespace
}  // namespace shardscope::profiling
