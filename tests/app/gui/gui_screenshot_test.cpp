// The app as a person sees it: scripted sessions under a virtual X server of their own, checked
// through the screenshot they write and the GUI state they report.
#include <cstdlib>
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "app/analysis/device_time_lens.h"
#include "app/cli/cli_main.h"
#include "app/gui/gui_app.h"
#include "app/gui/gui_style.h"
#include "profiling/io/trace_io.h"
#include "profiling/trace/trace.h"
#include "tests/app/gui/virtual_display.h"
#include "tests/support/pipeline_trace.h"
#include "tests/support/temp_dir.h"

namespace shardscope::gui {
namespace {

using profiling::Category;
using profiling::MemoryKind;

std::string asset(const std::string& name) {
  return std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces/" + name;
}

struct Session {
  int code = -1;
  std::string out, err;
  nlohmann::json state;
  test::Image image;
};

class GuiScreenshot : public testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(display_.ok()) << display_.error();
    dir_ = test::test_temp_dir().string();
  }

  // Runs `script` in the app and reads back its state and screenshot.
  Session play(const std::string& script) {
    const std::string script_file = dir_ + "/session.script";
    std::ofstream(script_file) << script;
    GuiOptions options;
    options.script = script_file;
    options.state_out = dir_ + "/state.json";
    options.screenshot = dir_ + "/shot.png";
    options.frames = 2;
    std::ostringstream out, err;
    Session s;
    s.code = gui_main(options, out, err);
    s.out = out.str();
    s.err = err.str();
    std::ifstream state(options.state_out);
    if (state) s.state = nlohmann::json::parse(state, nullptr, false);
    s.image.load(options.screenshot);
    return s;
  }

  // The timeline's part of a state a script wrote with `state DIR/NAME`.
  nlohmann::json timeline_at(const std::string& name) const {
    std::ifstream in(dir_ + "/" + name);
    return nlohmann::json::parse(in)["timeline"];
  }

  std::string dir_;

 private:
  test::VirtualDisplay display_;
};

TEST_F(GuiScreenshot, TimelineShowsEveryRankAndLinksASelectedCollective) {
  const Session s = play("open " + asset("ddp_bucketed-w2.sst") +
                         "\ntab timeline\nfit-step 1\nselect 1 all_reduce 4\n"
                         "hover 0 \"optimizer step\" 1\n");
  ASSERT_EQ(s.code, 0) << s.err;
  ASSERT_EQ(s.image.width, 1600);
  EXPECT_EQ(s.state["tab"], "Timeline");
  const auto& t = s.state["timeline"];
  EXPECT_EQ(t["selected"]["name"], "all_reduce");
  EXPECT_EQ(t["selected"]["rank"], 1);
  EXPECT_EQ(t["selected"]["lane"], "comm");
  EXPECT_GT(t["selected"]["bytes"].get<int64_t>(), 0);
  EXPECT_GT(t["selected"]["busbw_gbps"].get<double>(), 0);
  EXPECT_EQ(t["linked_ranks"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(t["hovered"]["name"], "optimizer step");
  EXPECT_EQ(t["hovered"]["rank"], 0);
  EXPECT_GT(t["hovered"]["duration_ms"].get<double>(), 0);
  // Both ranks' rows: forward and backward spans in the top and the bottom half of the canvas.
  const int mid = 330;  // two rank groups of the 1600x900 window split around here
  for (Category c : {Category::kForward, Category::kBackward, Category::kCollective}) {
    EXPECT_GT(s.image.count(category_colour(c), 0, 0, -1, mid), 50u) << category_name(c);
    EXPECT_GT(s.image.count(category_colour(c), 0, mid, -1, -1), 50u) << category_name(c);
  }
  EXPECT_GT(s.image.count(kExposedCommColour), 20u);  // the red exposed-communication line
  EXPECT_GT(s.image.distinct_colours(), 30u);
}

// A pipeline's send is one transfer between two ranks, not a collective: selecting it links it
// to its receive with an arrow, and the line gives its bytes and time in flight, never which
// rank "arrived last".
TEST_F(GuiScreenshot, ASendLinksToItsReceiveNotToEveryRank) {
  const Session s = play("open " + asset("pp-gpipe-w2.sst") + "\ntab timeline\nselect 0 send 0\n");
  ASSERT_EQ(s.code, 0) << s.err;
  const auto& t = s.state["timeline"];
  EXPECT_EQ(t["selected"]["name"], "send");
  EXPECT_EQ(t["linked"], "point-to-point");
  EXPECT_EQ(t["linked_ranks"], nlohmann::json::array({0, 1}));
  const std::string text = t["selection_text"];
  EXPECT_THAT(text, testing::HasSubstr("rank 0 -> rank 1"));
  EXPECT_THAT(text, testing::HasSubstr("in flight"));
  EXPECT_THAT(text, testing::Not(testing::HasSubstr("arrived last")));
  EXPECT_THAT(text, testing::HasSubstr(" kB"));
  // A collective still names who arrived last.
  const Session c = play("open " + asset("ddp_bucketed-w2.sst") +
                         "\ntab timeline\nfit-step 1\nselect 1 all_reduce 4\n");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.state["timeline"]["linked"], "collective");
  EXPECT_THAT(c.state["timeline"]["selection_text"].get<std::string>(),
              testing::HasSubstr("arrived last"));
}

// The keys a person expects: W/S zoom, A/D pan, F fits, Escape clears the selection; and zooming
// out stops at the whole trace with a margin (it once reached -842,000 s of a 94 ms trace).
TEST_F(GuiScreenshot, KeysZoomPanFitAndClearAndZoomOutStopsAtTheTrace) {
  auto at = [&](const std::string& name) { return timeline_at(name); };
  const std::string d = dir_ + "/";
  const Session s =
      play("open " + asset("ddp_bucketed-w2.sst") + "\ntab timeline\nfit-step 1\nstate " + d +
           "k0.json\nkey W\nstate " + d + "k1.json\nkey D\nstate " + d +
           "k2.json\nselect 1 all_reduce 4\nstate " + d + "k3.json\nkey Escape\nstate " + d +
           "k4.json\nwheel 800 400 -200\n" + "frames 2\nstate " + d + "k5.json\nkey S\nkey F\n");
  ASSERT_EQ(s.code, 0) << s.err;
  const auto k0 = at("k0.json"), k1 = at("k1.json"), k2 = at("k2.json");
  EXPECT_NEAR(k1["ns_per_px"].get<double>(), 0.8 * k0["ns_per_px"].get<double>(), 1e-6);
  const double width = k1["visible_ms"][1].get<double>() - k1["visible_ms"][0].get<double>();
  EXPECT_NEAR(k2["visible_ms"][0].get<double>() - k1["visible_ms"][0].get<double>(), width / 10,
              width / 100);
  EXPECT_FALSE(at("k3.json")["selected"].is_null());
  EXPECT_TRUE(at("k4.json")["selected"].is_null());
  // Zoomed out as far as it goes: the whole trace (as shown, in device time) and 5 % either side.
  const profiling::Trace shown =
      analysis::apply_lens(profiling::read_trace_file(asset("ddp_bucketed-w2.sst")), {}).trace;
  int64_t t_min = INT64_MAX, t_max = INT64_MIN;
  for (const auto& rank : shown.ranks) {
    for (const auto& e : rank.events)
      t_min = std::min(t_min, e.t0_ns), t_max = std::max(t_max, e.t1_ns);
    for (const auto& c : rank.counters)
      t_min = std::min(t_min, c.t_ns), t_max = std::max(t_max, c.t_ns);
  }
  const double span = (t_max - t_min) * 1e-6;
  const auto all = at("k5.json")["visible_ms"];
  EXPECT_NEAR(all[0].get<double>(), -0.05 * span, span * 0.01);
  EXPECT_NEAR(all[1].get<double>(), 1.05 * span, span * 0.01);
}

// Search (issue 35): the toolbar counts the matches; N goes to the next one in time, selects it
// and centres the view on it; P goes back; past the last, N wraps to the first.
TEST_F(GuiScreenshot, SearchCountsMatchesAndNAndPStepThroughThem) {
  auto at = [&](const std::string& name) { return timeline_at(name); };
  const std::string d = dir_ + "/";
  const Session s =
      play("open " + asset("ddp_bucketed-w2.sst") +
           "\ntab timeline\nsearch broadcast\nframes 2\nstate " + d + "s0.json\nkey N\nstate " + d +
           "s1.json\nkey N\nstate " + d + "s2.json\nkey P\nstate " + d +
           "s3.json\nsearch no-such-event\n" + "frames 2\nstate " + d + "s4.json\n");
  ASSERT_EQ(s.code, 0) << s.err;
  // The trace's broadcasts: one per rank of the initial weights' broadcast, at least.
  const profiling::Trace shown =
      analysis::apply_lens(profiling::read_trace_file(asset("ddp_bucketed-w2.sst")), {}).trace;
  size_t broadcasts = 0;
  for (const auto& rank : shown.ranks)
    for (const auto& e : rank.events)
      broadcasts += shown.str(e.name).find("broadcast") != std::string::npos;
  ASSERT_GE(broadcasts, 2u);
  const auto s0 = at("s0.json"), s1 = at("s1.json"), s2 = at("s2.json"), s3 = at("s3.json");
  EXPECT_EQ(s0["search_matches"], broadcasts);
  EXPECT_EQ(s0["search_at"], 0);
  EXPECT_EQ(s1["search_at"], 1);
  EXPECT_NE(s1["selected"]["name"].get<std::string>().find("broadcast"), std::string::npos)
      << s1["selected"];
  EXPECT_EQ(s2["search_at"], 2);
  EXPECT_EQ(s3["search_at"], 1);
  // The view is centred on the match it went to.
  const double t0 = s1["selected"]["start_ms"].get<double>(),
               t1 = t0 + s1["selected"]["duration_ms"].get<double>();
  const auto view = s1["visible_ms"];
  EXPECT_NEAR((view[0].get<double>() + view[1].get<double>()) / 2, (t0 + t1) / 2,
              (view[1].get<double>() - view[0].get<double>()) * 0.01);
  EXPECT_EQ(at("s4.json")["search_matches"], 0);
}

// A split backward's two passes are told apart: the weight pass in its own colour (and in the
// legend), the input pass in backward's, on both ranks of a ZBV pipeline; a schedule that does
// not split backward shows no weight pass.
TEST_F(GuiScreenshot, AWeightPassHasItsOwnColour) {
  const Session zbv = play("open " + asset("pp-zbv-w2.sst") + "\ntab timeline\nfit-step 2\n");
  ASSERT_EQ(zbv.code, 0) << zbv.err;
  // Below the toolbar and its legend (whose weight-pass swatch alone is 100 pixels), each rank.
  const int top = 140, mid = 330;
  // Each stage a rank holds has its own shade of a pass colour (ZBV: rank 0 stages 0 and 3, rank
  // 1 stages 1 and 2), so a colour is counted over its four shades.
  const auto shades = [&](uint32_t colour, int y0, int y1) {
    size_t n = 0;
    for (int stage = 0; stage < 4; ++stage)
      n += zbv.image.count(stage_shade(colour, stage), 0, y0, -1, y1);
    return n;
  };
  EXPECT_GT(zbv.image.count(kWeightPassColour, 0, 0, -1, top), 0u);  // the legend says it
  EXPECT_GT(shades(kWeightPassColour, top, mid), 200u);
  EXPECT_GT(shades(kWeightPassColour, mid, -1), 200u);
  const uint32_t backward = category_colour(Category::kBackward);
  EXPECT_GT(shades(backward, top, mid), 200u);
  // Rank 1's two stages in two shades of backward's colour: which stage ran shows unhovered.
  EXPECT_GT(zbv.image.count(stage_shade(backward, 1), 0, mid, -1, -1), 100u);
  EXPECT_GT(zbv.image.count(stage_shade(backward, 2), 0, mid, -1, -1), 100u);
  const Session gpipe = play("open " + asset("pp-gpipe-w2.sst") + "\ntab timeline\nfit-step 2\n");
  ASSERT_EQ(gpipe.code, 0) << gpipe.err;
  EXPECT_EQ(gpipe.image.count(kWeightPassColour), 0u);
}

// Many ranks stay readable: a click on a rank's name folds its band to one row, Shift+click
// pins it on top; a collective on a folded rank still links to it.
TEST_F(GuiScreenshot, RankBandsFoldAndOneIsPinnedOnTop) {
  auto at = [&](const std::string& name) { return timeline_at(name); };
  const std::string d = dir_ + "/";
  const Session s =
      play("open " + asset("torch_ddp-w4.sst") + "\ntab timeline\nfit-step 2\nstate " + d +
           "b0.json\nfold 1\nfold 2\npin 3\nstate " + d + "b1.json\nselect 0 all_reduce 5\nstate " +
           d + "b2.json\n");
  ASSERT_EQ(s.code, 0) << s.err;
  const auto b0 = at("b0.json"), b1 = at("b1.json");
  EXPECT_EQ(b0["rank_order"], nlohmann::json({0, 1, 2, 3}));
  EXPECT_EQ(b1["rank_order"], nlohmann::json({3, 0, 1, 2}));
  EXPECT_EQ(b1["folded_ranks"], nlohmann::json({1, 2}));
  const auto top = [](const nlohmann::json& state, int rank) {
    return state["rank_top_px"][std::to_string(rank)].get<double>();
  };
  EXPECT_LT(top(b1, 3), top(b1, 0));  // pinned first
  // A folded band is one row and a gap: ranks 1 and 2 take far less than an open band.
  const double open_band = top(b1, 1) - top(b1, 0), folded_band = top(b1, 2) - top(b1, 1);
  EXPECT_LT(folded_band * 3, open_band);
  EXPECT_EQ(at("b2.json")["linked_ranks"].size(), 4u);  // folded ranks' copies are still linked
  // And as a person does it: a click on rank 0's name folds it, a second unfolds it.
  const double y0 = top(b0, 0);
  const Session c = play("open " + asset("torch_ddp-w4.sst") + "\ntab timeline\nclick 20 " +
                         std::to_string(y0 + 5) + "\nframes 1\nstate " + d + "c1.json\nclick 20 " +
                         std::to_string(y0 + 5) + "\nframes 1\nstate " + d + "c2.json\n");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(at("c1.json")["folded_ranks"], nlohmann::json({0}));
  EXPECT_EQ(at("c2.json")["folded_ranks"], nlohmann::json::array());
}

TEST_F(GuiScreenshot, WheelZoomsDragPansRightDragMeasures) {
  const std::string dir = dir_;
  const Session s =
      play("open " + asset("ddp_bucketed-w2.sst") + "\ntab timeline\nfit\nframes 1\nstate " + dir +
           "/before.json\n"
           "wheel 800 400 3\nframes 1\nstate " +
           dir +
           "/zoomed.json\n"
           "drag 900 400 700 400\nframes 1\nstate " +
           dir +
           "/panned.json\n"
           "drag 600 300 900 300 right\nframes 1\n");
  ASSERT_EQ(s.code, 0) << s.err;
  auto read = [&](const char* name) {
    std::ifstream in(dir + "/" + name);
    return nlohmann::json::parse(in)["timeline"]["visible_ms"];
  };
  const auto before = read("before.json"), zoomed = read("zoomed.json"),
             panned = read("panned.json");
  const double before_span = before[1].get<double>() - before[0].get<double>();
  const double zoomed_span = zoomed[1].get<double>() - zoomed[0].get<double>();
  EXPECT_NEAR(zoomed_span, before_span * 0.8 * 0.8 * 0.8, before_span * 0.01);
  // Zoom keeps the time under the cursor where it was.
  EXPECT_GT(zoomed[0].get<double>(), before[0].get<double>());
  EXPECT_LT(zoomed[1].get<double>(), before[1].get<double>());
  // Dragging left by 200 px moves the view later by 200 px worth of time.
  const double ms_per_px = zoomed_span / (1600 - 150 - 16);
  EXPECT_NEAR(panned[0].get<double>() - zoomed[0].get<double>(), 200 * ms_per_px, 20 * ms_per_px);
  EXPECT_NEAR(s.state["timeline"]["measured_ms"].get<double>(), 300 * ms_per_px, 20 * ms_per_px);
}

TEST_F(GuiScreenshot, TracesSaveAndReopenInBothFormats) {
  const Session s =
      play("open " + asset("zero2-w4.sst") + "\nsave " + dir_ + "/copy.json\nopen " + dir_ +
           "/copy.json\nsave " + dir_ + "/copy.sst\nopen " + dir_ + "/copy.sst\n");
  ASSERT_EQ(s.code, 0) << s.err;
  ASSERT_EQ(s.state["runs"].size(), 3u);
  for (const auto& r : s.state["runs"]) {
    EXPECT_EQ(r["events"], s.state["runs"][0]["events"]);
    EXPECT_EQ(r["ranks"], 4);
  }
}

TEST_F(GuiScreenshot, MemoryBarsShowEachCategoryAndStrategiesSideBySide) {
  const Session s = play("open " + asset("torch_ddp-w4.sst") + "\nopen " + asset("fsdp-w4.sst") +
                         "\ntab memory\n");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(s.state["tab"], "Memory");
  for (MemoryKind k : {MemoryKind::kParameters, MemoryKind::kGradients, MemoryKind::kOptimizerState,
                       MemoryKind::kActivations}) {
    EXPECT_GT(s.image.count(memory_kind_colour(k)), 200u) << profiling::memory_kind_name(k);
  }
  // The bars' figures, per rank of the current run (fsdp): each block by what it is.
  ASSERT_EQ(s.state["memory_peaks"].size(), 4u);
  for (const auto& peak : s.state["memory_peaks"]) {
    EXPECT_GT(peak["activations"].get<int64_t>(), 0);
    EXPECT_GT(peak["comm_buffers"].get<int64_t>(), 0);  // a gathered unit
    EXPECT_LE(peak["parameters"].get<int64_t>(), peak["allocated"].get<int64_t>());
  }
}

// Memory over time marks where each step began, in the timeline's step colour and words: a
// ramp inside a step reads as that step's forward, not as a trend.
TEST_F(GuiScreenshot, MemoryOverTimeMarksTheSteps) {
  const Session s = play("open " + asset("zero2-w4.sst") + "\ntab memory\n");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_GT(s.image.count(0xFF00D7FF), 40u);  // "step 0", "step 1", "step 2" over the chart
}

TEST_F(GuiScreenshot, WeightSyncGridIsGreenWhenTheRunMatchesTheReference) {
  const Session s = play("open " + asset("torch_ddp-w4.sst") + "\ntab sync\n");
  ASSERT_EQ(s.code, 0) << s.err;
  // Ranks against rank 0: bitwise equal cells; against the reference: within rounding.
  EXPECT_GT(s.image.count(0xFF3CB44B), 1000u);
  EXPECT_GT(s.image.count(0xFF2E8A3A), 1000u);
  EXPECT_EQ(s.image.count(0xFF3030D0), 0u);  // no cell differs
}

// The Experts tab draws the routing the ep run recorded: its figures are the trace's, and the
// busiest expert's bar has the colour of its load against the mean. A run without experts says
// why there is nothing to show.
TEST_F(GuiScreenshot, ExpertsShowTheRecordedRoutingAndItsImbalance) {
  const Session s = play("open " + asset("ep-w4.sst") + "\ntab experts\n");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(s.state["tab"], "Experts");
  const auto& figures = s.state["experts"];
  ASSERT_TRUE(figures.contains("per_expert")) << figures.dump();
  const auto per_expert = figures["per_expert"].get<std::vector<int64_t>>();
  ASSERT_EQ(per_expert.size(), 8u);
  const profiling::Trace trace = profiling::read_trace_file(asset("ep-w4.sst"));
  int64_t total = 0, busiest = 0;
  for (size_t e = 0; e < 8; ++e) {
    int64_t routed = 0;  // over ranks, steps and layers
    for (const auto& rank : trace.run.result->routed_tokens)
      for (const auto& step : rank)
        for (size_t l = 0; l < step.size() / 8; ++l) routed += step[l * 8 + e];
    EXPECT_EQ(per_expert[e], routed) << "expert " << e;
    total += routed;
    busiest = std::max(busiest, routed);
  }
  const double mean = double(total) / 8;
  EXPECT_DOUBLE_EQ(figures["expert_imbalance"].get<double>(), busiest / mean);
  EXPECT_GT(figures["expert_imbalance"].get<double>(), 1.0);
  EXPECT_GT(s.image.count(load_colour(double(busiest), mean)), 2000u);

  const Session dense = play("open " + asset("torch_ddp-w4.sst") + "\ntab experts\n");
  ASSERT_EQ(dense.code, 0) << dense.err;
  EXPECT_NE(dense.state["experts"]["problem"].get<std::string>().find("no experts"),
            std::string::npos);
}

TEST_F(GuiScreenshot, FailedRankIsRedAndTheRankItStoppedIsAmber) {
  const Session s = play("open " + asset("failed-w2.sst") + "\ntab timeline\n");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_FALSE(s.state["runs"][0]["ok"].get<bool>());
  EXPECT_GT(s.image.count(kFailedColour), 100u);
  EXPECT_GT(s.image.count(kStoppedColour), 100u);
  // The step each rank stopped in says so: its figures end there (a rank blocked in a collective
  // that never completed once read "no communication").
  const auto& figures = s.state["timeline"]["step_figures"];
  ASSERT_EQ(figures.size(), 2u);
  for (const auto& rank : figures) {
    ASSERT_FALSE(rank.empty());
    EXPECT_THAT(rank.back().get<std::string>(), testing::HasSubstr("failed in this step"));
    if (rank.size() > 1) {
      EXPECT_THAT(rank.front().get<std::string>(), testing::HasSubstr("overlap"));
    }
  }
}

// A pipeline stage's receive waiting for the other stage's pass is its bubble, said apart from
// the communication it exposes (which once counted it too).
TEST_F(GuiScreenshot, APipelineSaysItsReceivesWaitedForTheOtherStage) {
  const Session s = play("open " + asset("pp-gpipe-w2.sst") + "\ntab timeline\n");
  ASSERT_EQ(s.code, 0) << s.err;
  const auto& figures = s.state["timeline"]["step_figures"];
  ASSERT_EQ(figures.size(), 2u);
  for (const auto& rank : figures) {
    ASSERT_FALSE(rank.empty());
    EXPECT_THAT(rank.back().get<std::string>(), testing::HasSubstr("bubble"));
    EXPECT_THAT(rank.back().get<std::string>(), testing::HasSubstr("waiting for the other stage"));
  }
}

TEST_F(GuiScreenshot, LaunchExplainsABadFieldThenRunsAndShowsTheRun) {
  const Session s =
      play("tab launch\nset world 3\nset strategy \"tp\"\nframes 1\nstate " + dir_ +
           "/invalid.json\nset world 2\nset steps 2\nrun\nwait-runs\ntab timeline\nframes 2\n");
  ASSERT_EQ(s.code, 0) << s.err;
  std::ifstream in(dir_ + "/invalid.json");
  const auto invalid = nlohmann::json::parse(in);
  ASSERT_TRUE(invalid["launch_errors"].contains("model.heads")) << invalid["launch_errors"];
  EXPECT_THAT(invalid["launch_errors"]["model.heads"].get<std::string>(),
              testing::HasSubstr("tensor-parallel degree 3"));
  ASSERT_EQ(s.state["launches"].size(), 1u);
  EXPECT_EQ(s.state["launches"][0]["status"], "done");
  EXPECT_EQ(s.state["launches"][0]["step"], 2);
  ASSERT_EQ(s.state["runs"].size(), 1u);
  EXPECT_TRUE(s.state["runs"][0]["ok"].get<bool>());
  EXPECT_EQ(s.state["runs"][0]["ranks"], 2);
  EXPECT_GT(s.image.count(category_colour(Category::kForward)), 50u);
}

TEST_F(GuiScreenshot, TheRunningRunsTimelineGrowsAndStopEndsIt) {
  const Session s = play("tab launch\nset steps 200\nrun\nwait-live\nframes 30\nstate " + dir_ +
                         "/live.json\nstop\nwait-runs\n");
  ASSERT_EQ(s.code, 0) << s.err;
  std::ifstream in(dir_ + "/live.json");
  const auto live = nlohmann::json::parse(in);
  ASSERT_GE(live["live_run"].get<int>(), 0);
  const auto& running = live["runs"][live["live_run"].get<int>()];
  EXPECT_THAT(running["label"].get<std::string>(), testing::HasSubstr("running"));
  EXPECT_GT(running["events"].get<int>(), 0);
  EXPECT_EQ(live["live_rank_steps"].size(), 2u);
  EXPECT_EQ(live["launches"][0]["status"], "running");
  // Stopped as Ctrl-C stops a run: every rank ends after the same step, and the run is
  // reported stopped (not failed), its trace kept.
  EXPECT_EQ(s.state["launches"][0]["status"], "stopped");
  EXPECT_LT(s.state["launches"][0]["step"].get<int>(), 200);
  ASSERT_EQ(s.state["runs"].size(), 1u);
  EXPECT_TRUE(s.state["runs"][0]["ok"].get<bool>());
  EXPECT_GE(s.state["runs"][0]["events"].get<int>(), running["events"].get<int>());
  EXPECT_EQ(s.state["live_run"], -1);
}

// The Launch form's checkpoint fields: a stopped run names its last checkpoint and offers
// Resume, and the resumed run ends at the last step, starting from that checkpoint's folder.
TEST_F(GuiScreenshot, AStoppedRunResumesFromItsCheckpoint) {
  const std::string checkpoints = dir_ + "/checkpoints";
  // Stopped three frames into the run (at step 6 to 14 of 40 in four tries, idle or beside a
  // busy core); what the resumed run and its reference train is the suite's time.
  const Session s = play("tab launch\nset steps 40\nset checkpoint_dir " + checkpoints +
                         "\nrun\nwait-live\nframes 3\nstop\nwait-runs\nresume 1\nwait-runs\n");
  ASSERT_EQ(s.code, 0) << s.err;
  ASSERT_EQ(s.state["launches"].size(), 2u) << s.state.dump(2);
  const auto& stopped = s.state["launches"][0];
  const auto& resumed = s.state["launches"][1];
  EXPECT_EQ(stopped["status"], "stopped");
  // Resumed once, by run #2: it offers Resume no more.
  EXPECT_EQ(stopped["resumed_as"], 2);
  EXPECT_FALSE(stopped["resumable"].get<bool>());
  const std::string checkpoint = stopped["checkpoint"].get<std::string>();
  const int stopped_at = stopped["step"].get<int>();
  EXPECT_NE(checkpoint.find(checkpoints + "/step-"), std::string::npos) << checkpoint;
  EXPECT_NE(checkpoint.find(std::to_string(stopped_at)), std::string::npos) << checkpoint;
  EXPECT_EQ(resumed["status"], "done") << resumed["failure"];
  EXPECT_EQ(resumed["resumed_from"], checkpoint);
  EXPECT_EQ(resumed["step"], 40);
  EXPECT_FALSE(resumed["resumable"].get<bool>());
  // Both runs' traces are loaded; the resumed one matched the single-device reference.
  ASSERT_EQ(s.state["runs"].size(), 2u);
  EXPECT_TRUE(s.state["runs"][1]["ok"].get<bool>());
}

TEST_F(GuiScreenshot, ResumingARunThatCannotBeResumedIsAScriptError) {
  const Session s = play("tab launch\nset steps 2\nrun\nwait-runs\nresume 1\n");
  EXPECT_EQ(s.code, 2);  // the script's bad input
  EXPECT_THAT(s.err, testing::HasSubstr("line 5"));
  EXPECT_THAT(s.err, testing::HasSubstr("nothing to resume"));
}

TEST_F(GuiScreenshot, WhatIfProjectsTheRunOntoHardware) {
  const Session s = play("open " + asset("ddp_bucketed-w2.sst") + "\nproject 8xH100 0.05\n");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(s.state["tab"], "What-if");
  const auto& w = s.state["what_if"];
  EXPECT_EQ(w["hardware"], "8xH100");
  EXPECT_GT(w["projected_step_ms"].get<double>(), 0);
  EXPECT_LT(w["projected_step_ms"].get<double>(), w["measured_step_ms"].get<double>());
  EXPECT_GT(s.image.count(category_colour(Category::kForward)), 20u);  // the projected timeline
  // Each column names its lens, and the tab says what the projection leaves out.
  EXPECT_EQ(w["measured_lens"], "measured wall clock");
  // Between them, the run in device time where it was recorded: the timeline's own lens, so that
  // the lens and the hardware are two changes, not one.
  EXPECT_THAT(w["here_lens"].get<std::string>(), testing::HasSubstr("device time"));
  EXPECT_GT(w["here_step_ms"].get<double>(), w["projected_step_ms"].get<double>());
  EXPECT_NE(w["here_step_ms"].get<double>(), w["measured_step_ms"].get<double>());
  EXPECT_THAT(w["projected_lens"].get<std::string>(),
              testing::HasSubstr("device time on 8xH100: one device per rank"));
  EXPECT_THAT(w["not_modelled"].get<std::string>(), testing::HasSubstr("launch"));
}

// A script that asks what cannot be done on what it opened exits 2 (bad input, as a malformed
// script does before the window opens), naming its line: once exit 1, and a number such as
// "1e300" or "abc" failed as "stod" or was cast to an int as it came.
TEST_F(GuiScreenshot, AScriptErrorNamesItsLineAndFails) {
  const std::string open = "open " + asset("ddp_bucketed-w2.sst") + "\n";
  for (const auto& [line, says] : std::vector<std::pair<std::string, std::string>>{
           {"select 0 no-such-event", "no-such-event"},
           {"select 0 forward 1e300", "whole number from 0 to 16777216, got '1e300'"},
           {"hover 0.5 forward", "whole number from 0 to 16777216, got '0.5'"},
           {"mouse nan 3", "finite number of magnitude at most 1e9, got 'nan'"},
           {"click 10 abc", "got 'abc'"},
           {"fit-step -1", "got '-1'"},
           {"project 8xH100 -2", "compute scale is 0 (calibrated) or 1e-6 to 1e6"},
       }) {
    const Session s = play(open + line + "\n");
    EXPECT_EQ(s.code, 2) << line << ": " << s.err;
    EXPECT_THAT(s.err, testing::HasSubstr("line 2")) << line;
    EXPECT_THAT(s.err, testing::HasSubstr(says)) << line;
  }
}

TEST(GuiHeadless, WithoutADisplayTheAppExplainsHowToRunHeadless) {
  const char* display = std::getenv("DISPLAY");
  const std::string saved = display ? display : "";
  ::unsetenv("DISPLAY");
  ::unsetenv("WAYLAND_DISPLAY");
  std::ostringstream out, err;
  const int code = cli::cli_main({}, out, err);
  if (!saved.empty()) ::setenv("DISPLAY", saved.c_str(), 1);
  EXPECT_EQ(code, 2);
  EXPECT_THAT(err.str(), testing::HasSubstr("xvfb-run"));
  EXPECT_THAT(err.str(), testing::HasSubstr("no display"));
}

TEST_F(GuiScreenshot, StepsKeepTheirNumbersFitStepFramesEveryRankAndZoomStops) {
  // A 4-stage pipeline resumed at step 3: the slider and fit-step speak of steps 3 to 5.
  const profiling::Trace trace = test::gpipe_trace(4, 8, 3, 3);
  const std::string file = dir_ + "/pipeline.sst";
  std::ofstream(file, std::ios::binary) << profiling::serialise_trace(trace, file);
  const Session s = play("open " + file + "\ntab timeline\nfit-step 4\nframes 1\nstate " + dir_ +
                         "/fit.json\nrange 10 10.000001\nwheel 800 400 30\nframes 1\n");
  ASSERT_EQ(s.code, 0) << s.err;
  std::ifstream in(dir_ + "/fit.json");
  const auto fit = nlohmann::json::parse(in)["timeline"];
  EXPECT_EQ(fit["fit_step"], 4);
  // Every rank's part of step 4, in ms from the trace's start, is inside the view (of device
  // time, the lens it opens in).
  const profiling::Trace shown = analysis::apply_lens(trace, analysis::Lens{}).trace;
  int64_t t_min = INT64_MAX, a = INT64_MAX, b = INT64_MIN;
  for (const auto& rank : shown.ranks) {
    for (const auto& e : rank.events) {
      t_min = std::min(t_min, e.t0_ns);
      if (e.step != 4) continue;
      a = std::min(a, e.t0_ns);
      b = std::max(b, e.t1_ns);
    }
  }
  EXPECT_LE(fit["visible_ms"][0].get<double>(), (a - t_min) * 1e-6);
  EXPECT_GE(fit["visible_ms"][1].get<double>(), (b - t_min) * 1e-6);
  // Zoomed as far as it goes: a nanosecond per pixel, no closer.
  EXPECT_GE(s.state["timeline"]["ns_per_px"].get<double>(), 1.0);
}

}  // namespace
}  // namespace shardscope::gui
