// Our bucketed DDP (overlap on) against PyTorch's own engine (c10d::Reducer) on the same run.
#include <nlohmann/json.hpp>

#include "app/perf/perf_suite.h"

namespace shardscope::perf {

void measure_ddp_against_pytorch(const PerfOptions& options, std::vector<PerfRow>& rows) {
  const std::string preset = options.quick ? "tiny" : "small";
  const int rounds = options.quick ? 1 : 3;
  for (int world : {2, 4}) {
    nlohmann::json ours = {{"world", world}, {"preset", preset}, {"steps", options.quick ? 4 : 8}};
    nlohmann::json theirs = ours;
    ours["strategy"] = "ddp_bucketed";
    theirs["strategy"] = "torch_ddp";
    const Comparison c = interleaved(
        options, "ddp_bucketed vs torch_ddp, world " + std::to_string(world), rounds,
        [&] { return run_step_seconds(ours.dump()); },
        [&] { return run_step_seconds(theirs.dump()); });
    rows.push_back(step_time_row(
        "ddp", "ddp_bucketed vs torch_ddp, world " + std::to_string(world) + " (" + preset + ")", c,
        1.0));
  }
}

}  // namespace shardscope::perf
