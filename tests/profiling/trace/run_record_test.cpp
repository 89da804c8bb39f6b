// The run record is read by one conversion, from every trace this project ever wrote, and
// tolerates what it does not understand.
#include "profiling/trace/run_record.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "profiling/io/trace_io.h"
#include "profiling/trace/run_record_json.h"

namespace shardscope::profiling {
namespace {

using nlohmann::json;

std::string file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The run description exactly as the file holds it: the payload's first string, after the
// 32-byte header, a little-endian 32-bit length and the text.
json stored_description(const std::string& bytes) {
  uint32_t n = 0;
  std::memcpy(&n, bytes.data() + 32, sizeof(n));
  return json::parse(bytes.substr(36, n));
}

// Everything `stored` says, `written` says too (objects may gain keys, nothing else changes).
void expect_kept(const json& stored, const json& written, const std::string& where) {
  if (stored.is_object()) {
    ASSERT_TRUE(written.is_object()) << where;
    for (const auto& [key, value] : stored.items()) {
      ASSERT_TRUE(written.contains(key)) << where << "." << key << " was lost";
      expect_kept(value, written[key], where + "." + key);
    }
  } else if (stored.is_array()) {
    ASSERT_TRUE(written.is_array()) << where;
    ASSERT_EQ(stored.size(), written.size()) << where;
    for (size_t i = 0; i < stored.size(); ++i)
      expect_kept(stored[i], written[i], where + "[" + std::to_string(i) + "]");
  } else {
    EXPECT_EQ(stored, written) << where;
  }
}

// Every trace in assets/traces, version 1 included: the record keeps all its description says,
// and what a reader needs is there.
TEST(RunRecord, EveryRecordedTraceIsReadWhole) {
  int files = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces")) {
    if (entry.path().extension() != ".sst") continue;
    ++files;
    const std::string name = entry.path().filename().string();
    const std::string bytes = file_bytes(entry.path());
    const json stored = stored_description(bytes);
    const RunRecord run = from_native(bytes).run;
    expect_kept(stored, run_record_json(run), name);
    EXPECT_TRUE(run.has_config()) << name;
    EXPECT_FALSE(run.strategy.empty()) << name;
    EXPECT_GT(run.world, 0) << name;
    ASSERT_TRUE(run.result.has_value()) << name;
    EXPECT_EQ(run.result->ok, name.rfind("failed", 0) != 0) << name;
    if (run.result->ok) {
      EXPECT_EQ(static_cast<int>(run.result->ranks.size()), run.world) << name;
      EXPECT_FALSE(run.result->steps.empty()) << name;
      for (const auto& rank : run.result->ranks) EXPECT_GT(rank.peak_allocated_bytes, 0) << name;
    } else {
      EXPECT_GE(run.result->failed_rank, 0) << name;
      EXPECT_FALSE(run.result->failure.empty()) << name;
    }
    // Written and read again, it is the same record.
    EXPECT_EQ(run_record_to_json(run_record_from_json(run_record_to_json(run))),
              run_record_to_json(run))
        << name;
  }
  EXPECT_GE(files, 5);
}

// A description from another tool or version: what has the wrong type reads as its default,
// and nothing throws.
TEST(RunRecord, WrongTypesReadAsDefaults) {
  const RunRecord run = run_record_from_json(R"({
    "world": "four", "strategy": 3, "device": "cpu", "config": [1, 2],
    "result": {"ok": "yes", "failed_rank": 1.5,
               "steps": [{"step": 1, "loss": null, "step_time_s": "fast"}, 7],
               "ranks": [5, {"rank": 1, "peak_allocated_bytes": "big",
                             "formula_bytes": {"parameters": 12, "gradients": "x"}}],
               "reference": "none", "rank_losses": [[1.5, null], "x"]}})");
  EXPECT_EQ(run.world, 0);
  EXPECT_EQ(run.strategy, "");
  EXPECT_EQ(run.device, "cpu");
  EXPECT_FALSE(run.has_config());  // a configuration is an object
  ASSERT_TRUE(run.result.has_value());
  EXPECT_FALSE(run.result->ok);
  ASSERT_EQ(run.result->steps.size(), 1u);
  EXPECT_TRUE(std::isnan(run.result->steps[0].loss));
  EXPECT_EQ(run.result->steps[0].step_time_s, 0);
  ASSERT_EQ(run.result->ranks.size(), 1u);
  EXPECT_EQ(run.result->ranks[0].peak_allocated_bytes, 0);
  ASSERT_TRUE(run.result->ranks[0].formula_bytes.has_value());
  EXPECT_EQ((*run.result->ranks[0].formula_bytes)[static_cast<int>(MemoryKind::kParameters)], 12);
  EXPECT_EQ((*run.result->ranks[0].formula_bytes)[static_cast<int>(MemoryKind::kGradients)], 0);
  EXPECT_FALSE(run.result->reference.has_value());
  ASSERT_EQ(run.result->rank_losses.size(), 2u);
  EXPECT_EQ(run.result->rank_losses[0][0], 1.5);
  EXPECT_TRUE(std::isnan(run.result->rank_losses[0][1]));
  EXPECT_TRUE(run.result->rank_losses[1].empty());
}

// Tokens routed per expert: an integer that fits is kept, a float (1e300 would overflow a cast),
// a string or an integer beyond int64 reads as 0, a level that is not an array as empty; and
// a record written is read back the same.
TEST(RunRecord, RoutedTokensAreIntegersOrZero) {
  const RunRecord run = run_record_from_json(R"({"result": {"rank_losses": [[1.0]],
    "routed_tokens": [[[3, 1e300, "x", -2, 18446744073709551615], "no"], 5]}})");
  ASSERT_TRUE(run.result.has_value());
  const auto& routed = run.result->routed_tokens;
  ASSERT_EQ(routed.size(), 2u);
  ASSERT_EQ(routed[0].size(), 2u);
  EXPECT_EQ(routed[0][0], (std::vector<int64_t>{3, 0, 0, -2, 0}));
  EXPECT_TRUE(routed[0][1].empty());
  EXPECT_TRUE(routed[1].empty());
  RunRecord written;
  written.result = RunResult{};
  written.result->has_rank_detail = true;
  written.result->routed_tokens = {{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}};
  const RunRecord back = run_record_from_json(run_record_to_json(written));
  ASSERT_TRUE(back.result.has_value());
  EXPECT_EQ(back.result->routed_tokens, written.result->routed_tokens);
}

TEST(RunRecord, WhatIsNoObjectReadsAsAnEmptyRecord) {
  for (const char* text : {"", "nonsense", "[1, 2]", "42", "{\"a\": ", "{}"}) {
    const RunRecord run = run_record_from_json(text);
    EXPECT_TRUE(run.empty()) << text;
    EXPECT_EQ(run_record_to_json(run), "{}") << text;
  }
}

// Older descriptions named strategy and world only in their configuration.
TEST(RunRecord, StrategyAndWorldFallBackToTheConfiguration) {
  const RunRecord run = run_record_from_json(R"({"config": {"strategy": "zero2", "world": 4}})");
  EXPECT_EQ(run.strategy, "zero2");
  EXPECT_EQ(run.world, 4);
}

}  // namespace
}  // namespace shardscope::profiling
