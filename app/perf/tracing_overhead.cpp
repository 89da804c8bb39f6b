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
  nlohmann::json traced = base, untraced = base;
  traced["tracing"] = true;
  untraced["tracing"] = false;
  const Comparison c = interleaved(
      options, "ddp_bucketed tracing on vs off", rounds,
      [&] { return run_step_seconds(traced.dump()); },
      [&] { return run_step_seconds(untraced.dump()); });
  rows.push_back(step_time_row(
      "tracing", "ddp_bucketed world " + std::to_string(world) + " (" + preset + "), traced vs not",
      c, 1.03));
}

}  // namespace shardscope::perf
