// The gui section where the desktop app is not built (SHARDSCOPE_BUILD_GUI=OFF): one row that
// says why its figures are missing, so a table from such a build is not mistaken for complete.
#include "app/perf/perf_suite.h"

namespace shardscope::perf {

void measure_gui(const PerfOptions&, std::vector<PerfRow>& rows) {
  PerfRow row;
  row.section = "gui";
  row.what = "timeline frames and trace loading";
  row.note = "not measured: this build has no GUI (SHARDSCOPE_BUILD_GUI=OFF)";
  rows.push_back(row);
}

}  // namespace shardscope::perf
