// Full tracing (host spans, every collective, memory samples) against none, for ddp_bucketed.
#include <nlohmann/json.hpp>

#include "app/perf/perf_suite.h"

namespace shardscope::perf {

void measure_tracing_overhead(const PerfOptions& options, std::vector<PerfRow>& rows) {
  const std::string preset = options.quick ? "tiny" : "small";
  const int world = options.quick ? 2 : 4, rounds = options.quick ? 2 : 3;
  nlohmann::json base = {{"strategy", "ddp_bucketed"},
                         {"world", world},
                         {"preset", preset},
                         {"steps", options.quick ? 4 : 8}};
  std::vector<double> on, off, ratios;
  for (int r = 0; r <= rounds; ++r) {
    if (options.progress) options.progress("  ddp_bucketed tracing on vs off, " + round_name(r));
    nlohmann::json traced = base, untraced = base;
    traced["tracing"] = true;
    untraced["tracing"] = false;
    const double a = median_step_seconds(measure_run(traced.dump()).step_seconds);
    const double b = median_step_seconds(measure_run(untraced.dump()).step_seconds);
    if (r == 0) continue;
    on.push_back(a);
    off.push_back(b);
    ratios.push_back(a / b);
  }
  PerfRow row;
  row.section = "tracing";
  row.what = "ddp_bucketed world " + std::to_string(world) + " (" + preset + "), traced vs not";
  row.ours = median(on) * 1e3;
  row.baseline = median(off) * 1e3;
  row.unit = "ms/step";
  row.ratio = median(ratios);
  row.target = "<= 1.03";
  row.met = row.ratio <= 1.03;
  rows.push_back(row);
}

}  // namespace shardscope::perf
