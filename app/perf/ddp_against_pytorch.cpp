// Our bucketed DDP (overlap on) against PyTorch's own engine (c10d::Reducer) on the same run.
#include <nlohmann/json.hpp>

#include "app/perf/perf_suite.h"

namespace shardscope::perf {

void measure_ddp_against_pytorch(const PerfOptions& options, std::vector<PerfRow>& rows) {
  const std::string preset = options.quick ? "tiny" : "small";
  const int rounds = options.quick ? 1 : 3;
  for (int world : {2, 4}) {
    std::vector<double> ours, theirs, ratios;
    for (int r = 0; r <= rounds; ++r) {
      if (options.progress)
        options.progress("  ddp_bucketed vs torch_ddp, world " + std::to_string(world) + ", " +
                         round_name(r));
      nlohmann::json base = {
          {"world", world}, {"preset", preset}, {"steps", options.quick ? 4 : 8}};
      nlohmann::json a = base, b = base;
      a["strategy"] = "ddp_bucketed";
      b["strategy"] = "torch_ddp";
      const double x = median_step_seconds(measure_run(a.dump()).step_seconds);
      const double y = median_step_seconds(measure_run(b.dump()).step_seconds);
      if (r == 0) continue;
      ours.push_back(x);
      theirs.push_back(y);
      ratios.push_back(x / y);
    }
    PerfRow row;
    row.section = "ddp";
    row.what = "ddp_bucketed vs torch_ddp, world " + std::to_string(world) + " (" + preset + ")";
    row.ours = median(ours) * 1e3;
    row.baseline = median(theirs) * 1e3;
    row.unit = "ms/step";
    row.ratio = median(ratios);
    row.target = "<= 1.0";
    row.met = row.ratio <= 1.0;
    rows.push_back(row);
  }
}

}  // namespace shardscope::perf
