// A measured range shows each rank's totals (issue 35 §3): what the app writes beside a range is
// what profiling::range_metrics gives over the trace it shows (the default lens), rank by rank.
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "app/analysis/device_time_lens.h"
#include "app/gui/gui_app.h"
#include "app/gui/timeline_index.h"
#include "profiling/io/trace_io.h"
#include "profiling/metrics/trace_metrics.h"
#include "tests/app/gui/virtual_display.h"
#include "tests/support/temp_dir.h"

namespace shardscope::gui {
namespace {

TEST(TimelineRange, AMeasuredRangeShowsEachRanksTotals) {
  test::VirtualDisplay display;
  ASSERT_TRUE(display.ok()) << display.error();
  const std::string dir = test::test_temp_dir().string();
  const std::string trace_file =
      std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces/ddp_bucketed-w2.sst";
  std::ofstream(dir + "/range.script") << "open " << trace_file
                                       << "\ntab timeline\nfit\nmeasure 4 10\nframes 2\n"
                                          "screenshot "
                                       << dir << "/range.png\n";
  GuiOptions options;
  options.script = dir + "/range.script";
  options.state_out = dir + "/state.json";
  options.frames = 2;
  std::ostringstream out, err;
  ASSERT_EQ(gui_main(options, out, err), 0) << err.str();
  std::ifstream in(options.state_out);
  const nlohmann::json state = nlohmann::json::parse(in);
  const nlohmann::json& totals = state["timeline"]["range_totals"];

  const profiling::Trace shown =
      analysis::apply_lens(profiling::read_trace_file(trace_file), {}).trace;
  const TimelineIndex index = build_timeline_index(shown);
  const auto expected =
      profiling::range_metrics(shown, index.t_min + 4'000'000, index.t_min + 10'000'000);
  ASSERT_EQ(totals.size(), expected.size());
  double compute = 0, comm = 0;
  for (size_t r = 0; r < expected.size(); ++r) {
    EXPECT_NEAR(totals[r]["compute_ms"].get<double>(), expected[r].compute_ns * 1e-6, 1e-9);
    EXPECT_NEAR(totals[r]["comm_ms"].get<double>(), expected[r].comm_ns * 1e-6, 1e-9);
    EXPECT_NEAR(totals[r]["exposed_ms"].get<double>(), expected[r].exposed_comm_ns * 1e-6, 1e-9);
    EXPECT_LE(totals[r]["exposed_ms"].get<double>(), totals[r]["comm_ms"].get<double>());
    compute += expected[r].compute_ns;
    comm += expected[r].comm_ns;
  }
  EXPECT_GT(compute, 0) << "a range with nothing in it proves nothing";
  EXPECT_GT(comm, 0);
}

}  // namespace
}  // namespace shardscope::gui
