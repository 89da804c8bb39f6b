// Runs a person can tell apart, and what the GUI says about what it opens and projects: run
// labels and Compare columns, the Launch form's one-bucket warning, the What-if's node
// placement, and opening what is not a trace.
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "app/gui/gui_app.h"
#include "app/gui/gui_session.h"
#include "tests/app/gui/virtual_display.h"
#include "tests/support/temp_dir.h"

namespace shardscope::gui {
namespace {

using testing::HasSubstr;
using testing::Not;

std::string asset(const std::string& name) {
  return std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces/" + name;
}

class GuiLabels : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(display_.ok()) << display_.error();
    dir_ = test::test_temp_dir().string();
  }

  // Runs `script` in the app; its state at the end.
  nlohmann::json play(const std::string& script, int* code = nullptr) {
    const std::string script_file = dir_ + "/session.script";
    std::ofstream(script_file) << script;
    GuiOptions options;
    options.script = script_file;
    options.state_out = dir_ + "/state.json";
    options.frames = 2;
    std::ostringstream out, err;
    const int rc = gui_main(options, out, err);
    if (code != nullptr) {
      *code = rc;  // the caller judges it
    } else {
      EXPECT_EQ(rc, 0) << err.str();
    }
    std::ifstream state(options.state_out);
    return state ? nlohmann::json::parse(state, nullptr, false) : nlohmann::json();
  }

  std::string dir_;

 private:
  test::VirtualDisplay display_;
};

// Two ddp_bucketed runs that differ only in overlap, and a zero2 run: overlap names them.
TEST_F(GuiLabels, ThreeRunsAreNamedByWhatSetsThemApart) {
  const auto state = play("open " + asset("ddp_bucketed-w2.sst") + "\nopen " +
                          asset("ddp_bucketed-no-overlap-w2.sst") + "\nopen " +
                          asset("zero2-w4.sst") + "\ntab compare\n");
  ASSERT_EQ(state["runs"].size(), 3u);
  std::set<std::string> labels;
  for (const auto& r : state["runs"]) labels.insert(r["label"].get<std::string>());
  EXPECT_EQ(labels.size(), 3u) << state["runs"].dump();
  EXPECT_THAT(state["runs"][0]["label"].get<std::string>(), HasSubstr("overlap on"));
  EXPECT_THAT(state["runs"][1]["label"].get<std::string>(), HasSubstr("overlap off"));
  EXPECT_THAT(state["runs"][2]["label"].get<std::string>(), HasSubstr("zero2 w4"));
}

// Bucket cap above every gradient: one bucket, and the form says there is nothing to overlap;
// a small cap: no warning.
TEST_F(GuiLabels, LaunchWarnsWhenOneBucketLeavesNothingToOverlap) {
  const auto one = play("tab launch\nset strategy_options.bucket_mb 100\nframes 2\n");
  EXPECT_THAT(one["launch_warnings"].value("strategy_options.bucket_mb", ""),
              HasSubstr("nothing to overlap"));
  const auto many = play("tab launch\nset strategy_options.bucket_mb 0.01\nframes 2\n");
  EXPECT_FALSE(many["launch_warnings"].contains("strategy_options.bucket_mb"));
}

// Two ranks on two nodes of eight: the What-if says the network is unused.
TEST_F(GuiLabels, WhatIfSaysWhenAllRanksFitInOneNode) {
  const auto state = play("open " + asset("ddp_bucketed-w2.sst") + "\nproject 2x8xH100-IB 0.05\n");
  EXPECT_EQ(state["what_if"]["nodes"], 1);
  EXPECT_FALSE(state["what_if"]["inter_node_link_used"].get<bool>());
  EXPECT_THAT(state["what_if"]["placement"].get<std::string>(),
              HasSubstr("inter-node infiniband link is unused"));
}

// A small model's CPU trace on 8xH100: priced kernel by kernel, bound by launches, and the
// What-if says so in words (issue 34), instead of projecting it as all communication.
TEST_F(GuiLabels, WhatIfSaysASmallModelOnAnH100IsBoundByLaunches) {
  // Data-parallel, and a pipeline whose schedule splits backward (the tour's shot).
  for (const char* trace : {"ddp_bucketed-w2.sst", "pp-zbv-w2.sst"}) {
    const auto state = play("open " + asset(trace) + "\nproject 8xH100 0\n");
    EXPECT_THAT(state["what_if"].value("compute_model", ""), HasSubstr("priced kernel by kernel"))
        << trace;
    EXPECT_THAT(state["what_if"].value("launch_bound", ""), HasSubstr("bound by launches"))
        << trace;
    // What the replay leaves out is no longer the launches but the GPU's two streams slowing
    // each other where compute and collectives overlap (the configuration projection prices it).
    const std::string left_out = state["what_if"].value("not_modelled", "");
    EXPECT_THAT(left_out, Not(HasSubstr("launch"))) << trace;
    EXPECT_THAT(left_out, HasSubstr("slowing each other where they overlap")) << trace;
    EXPECT_THAT(left_out, HasSubstr("0.81 of their pace")) << trace;
  }
}

// Ticked fp32, the tab prices the run's kernels at the GPU's measured fp32 rates and says so;
// unticked, bf16, and it says the run itself computed in fp32. Where the GPU measured no fp32
// rates the tab says why in place of a projection.
TEST_F(GuiLabels, WhatIfPricesTheKernelsInThePrecisionTicked) {
  const std::string open = "open " + asset("ddp_bucketed-w2.sst") + "\n";
  const auto fp32 = play(open + "project 8xH100 0 fp32\n");
  EXPECT_THAT(fp32["what_if"].value("compute_model", ""), HasSubstr("(fp32 kernels)"));
  EXPECT_THAT(fp32["what_if"].value("launch_bound", ""), HasSubstr("bound by launches"));
  const auto bf16 = play(open + "project 8xH100 0 bf16\n");
  EXPECT_THAT(bf16["what_if"].value("compute_model", ""), HasSubstr("(bf16 kernels)"));
  EXPECT_THAT(bf16["what_if"].value("compute_model", ""),
              HasSubstr("the run itself computed in fp32"));
  const auto a100 = play(open + "project 8xA100 0 fp32\n");
  EXPECT_THAT(a100.value("what_if_error", ""), HasSubstr("no measured fp32 GEMM"));
  // A scale given replaces the pricing: ticked fp32 then says it does not apply.
  const auto scaled = play(open + "project 8xH100 0.01 fp32\n");
  EXPECT_THAT(scaled.value("what_if_error", ""), HasSubstr("no precision applies"));
}

// What is not a trace says what it is; another tool's trace opens as a trace, not a failure.
TEST(GuiOpen, SaysWhatAPathIsInsteadOfATrace) {
  const auto dir = test::test_temp_dir();
  std::ofstream(dir / "empty.sst");
  std::ofstream(dir / "notes.txt") << "hello";
  std::filesystem::create_directories(dir / "folder");
  std::ofstream(dir / "pytorch.json")
      << R"({"traceEvents":[{"ph":"X","cat":"cpu_op","name":"aten::mm","pid":2841234,)"
      << R"("tid":2841234,"ts":1700000000000.5,"dur":12.5}]})";
  const std::pair<std::string, std::string> cases[] = {
      {"empty.sst", "the file is empty"},
      {"notes.txt", "not a trace"},
      {"folder", "is a directory without trace.sst"},
      {"missing.sst", "does not exist"},
  };
  GuiSession session;
  for (const auto& [name, phrase] : cases) {
    EXPECT_FALSE(session.open_trace((dir / name).string())) << name;
    EXPECT_THAT(session.message, HasSubstr(phrase)) << name;
    EXPECT_THAT(session.message, HasSubstr(name));
  }
  ASSERT_TRUE(session.open_trace((dir / "pytorch.json").string())) << session.message;
  const LoadedRun* run = session.current_run();
  EXPECT_TRUE(run->row.no_result);
  EXPECT_EQ(run->trace.event_count(), 1u);
  EXPECT_THAT(run->label, HasSubstr("pytorch.json"));
}

// The Open dialog takes one job's profiler files separated by ';' and reads them as one run of
// a rank a file, as `report a.json b.json` does; a bad name among them is named.
TEST(GuiOpen, SeveralProfilerFilesOfOneJobAreOneRun) {
  const auto folder = std::filesystem::path(SHARDSCOPE_SOURCE_DIR) / "assets/traces/kineto/ddp-w2";
  std::vector<std::string> files;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    files.push_back(entry.path().string());
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(split_paths(" a.json ;b.json; ;"), (std::vector<std::string>{"a.json", "b.json"}));
  GuiSession session;
  ASSERT_TRUE(session.open_trace(files[0] + " ; " + files[1])) << session.message;
  const LoadedRun* run = session.current_run();
  EXPECT_EQ(run->trace.ranks.size(), 2u);
  EXPECT_THAT(run->label, HasSubstr("and 1 more"));
  EXPECT_FALSE(session.open_trace(files[0] + ";" + (folder / "missing.json").string()));
  EXPECT_THAT(session.message, HasSubstr("missing.json"));
}

// Text size for a lecture hall: Ctrl + grows every text of the app in quarter steps from the
// 13 px default (times the display's own scale), Ctrl - shrinks it but never below 13 px, Ctrl 0
// resets it.
TEST_F(GuiLabels, CtrlPlusAndMinusScaleTheText) {
  const std::string state = dir_ + "/text.json";
  play("open " + asset("ddp_bucketed-w2.sst") + "\nkey Ctrl+Plus\nkey Ctrl+Plus\nstate " + state +
       "\n");
  auto read = [&] { return nlohmann::json::parse(std::ifstream(state)); };
  EXPECT_DOUBLE_EQ(read()["text_scale"].get<double>(), 1.5);
  EXPECT_DOUBLE_EQ(read()["font_px"].get<double>(), 13 * 1.5);  // Xvfb's content scale is 1
  play("key Ctrl+Minus\nstate " + state + "\n");
  EXPECT_DOUBLE_EQ(read()["text_scale"].get<double>(), 1.0);  // a fresh app, at its floor
  play("key Ctrl+Plus\nkey Ctrl+Plus\nkey Ctrl+Plus\nkey Ctrl+0\nstate " + state + "\n");
  EXPECT_DOUBLE_EQ(read()["text_scale"].get<double>(), 1.0);
}

// The Launch form lists every wrong field at once, each beside its field, not one per try.
TEST_F(GuiLabels, LaunchListsEveryErrorAtOnce) {
  const auto state = play("tab launch\nset steps 0\nset optimizer.lr -1\nset seed 7\nframes 1\n");
  const auto& errors = state["launch_errors"];
  EXPECT_TRUE(errors.contains("steps")) << errors;
  EXPECT_TRUE(errors.contains("optimizer.lr")) << errors;
  EXPECT_FALSE(errors.contains("seed")) << errors;  // a good field is not blamed
  EXPECT_EQ(errors.size(), 2u) << errors;
}

// The form shows what the chosen strategy reads (its traits' options): fsdp's prefetch, not
// ddp_bucketed's buckets; tp's degrees; the reference none of them. A value set for another
// strategy goes back to its default, so nothing hidden blocks the run.
TEST_F(GuiLabels, LaunchShowsOnlyTheChosenStrategysOptions) {
  const auto shown = [&](const std::string& script) {
    const auto state = play("tab launch\n" + script + "frames 2\n");
    std::set<std::string> keys;
    for (const auto& k : state["launch_fields"]) keys.insert(k.get<std::string>());
    return std::make_pair(keys, state);
  };
  const auto [bucketed, s1] = shown("set strategy ddp_bucketed\n");
  EXPECT_TRUE(bucketed.count("strategy_options.bucket_mb"));
  EXPECT_TRUE(bucketed.count("strategy_options.overlap"));
  EXPECT_FALSE(bucketed.count("strategy_options.prefetch"));
  EXPECT_FALSE(bucketed.count("strategy_options.tensor_parallel"));
  EXPECT_TRUE(bucketed.count("strategy_options.precision"));
  EXPECT_TRUE(bucketed.count("world"));
  const auto [fsdp, s2] = shown("set strategy fsdp\n");
  EXPECT_TRUE(fsdp.count("strategy_options.prefetch"));
  EXPECT_FALSE(fsdp.count("strategy_options.bucket_mb"));
  const auto [tp, s3] = shown("set strategy tp\nset strategy_options.tensor_parallel 2\n");
  EXPECT_TRUE(tp.count("strategy_options.tensor_parallel"));
  EXPECT_TRUE(tp.count("strategy_options.sequence_parallel"));
  // Back to a data-parallel strategy: the tp degree no longer shows, nor blocks the run.
  const auto [back, s4] = shown(
      "set strategy tp\nset strategy_options.tensor_parallel 2\nframes 1\n"
      "set strategy ddp_bucketed\n");
  EXPECT_FALSE(back.count("strategy_options.tensor_parallel"));
  EXPECT_TRUE(s4["launch_errors"].empty()) << s4["launch_errors"];
  const auto [single, s5] = shown("set world 1\nset strategy single\n");
  EXPECT_FALSE(single.count("strategy_options.bucket_mb"));
  EXPECT_FALSE(single.count("strategy_options.find_unused_parameters"));
  EXPECT_TRUE(single.count("strategy_options.activation_checkpointing"));
}

// The Launch tab projects a configuration too big to run (issue 34): GPT-3 175B on 64 A100s,
// laid out as Megatron's Table 5 row; the step's breakdown beside the form, its timeline a run.
TEST_F(GuiLabels, LaunchProjectsAConfigurationTooBigToRun) {
  const auto state = play(
      "tab launch\nset preset gpt3-175b\nset strategy hybrid\nset world 64\n"
      "set strategy_options.tensor_parallel 8\nset strategy_options.pipeline_parallel 8\n"
      "set global_batch 64\nset strategy_options.micro_batches 64\n"
      "set strategy_options.schedule interleaved-1f1b\nset strategy_options.stages_per_rank 3\n"
      "project-config 8xA100 8\n");
  const std::string text = state["launch_projection"]["text"];
  EXPECT_THAT(text, HasSubstr("projected step on 64 GPUs of 8xA100 (8 nodes)"));
  EXPECT_THAT(text, HasSubstr("MFU"));
  EXPECT_THAT(text, HasSubstr("memory per GPU"));
  ASSERT_EQ(state["runs"].size(), 1u);
  EXPECT_THAT(state["runs"][0]["label"].get<std::string>(), HasSubstr("projected onto 8xA100"));
  EXPECT_EQ(state["runs"][0]["ranks"], 8) << "one row per pipeline rank";
  // It cannot run here, but only for being too big: no field is blamed for what resetting the
  // model to the default one would make of the form (its 4 heads over tp 8).
  for (const auto& [key, message] : state["launch_errors"].items())
    EXPECT_EQ(key.rfind("model.", 0), std::string::npos) << key << ": " << message;
  int code = 0;
  play("tab launch\nproject-config no-such-gpus\n", &code);
  EXPECT_NE(code, 0) << "an unknown profile is a script error";
}

}  // namespace
}  // namespace shardscope::gui
