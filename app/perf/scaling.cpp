// How cost grows with work: step time and peak memory per rank against world size and model
// size for the main strategies (every rank shares this machine's cores, so step time grows with
// the world here; what a real cluster would do is the projection's job).
#include <cstdio>

#include <nlohmann/json.hpp>

#include "app/perf/perf_suite.h"

namespace shardscope::perf {

void measure_scaling(const PerfOptions& options, std::vector<PerfRow>& rows) {
  const std::vector<std::string> presets =
      options.quick ? std::vector<std::string>{"tiny"} : std::vector<std::string>{"tiny", "small"};
  const std::vector<std::string> strategies =
      options.quick ? std::vector<std::string>{"ddp_bucketed", "fsdp"}
                    : std::vector<std::string>{"ddp_bucketed", "zero2", "fsdp"};
  const std::vector<int> worlds =
      options.quick ? std::vector<int>{1, 2, 4} : std::vector<int>{1, 2, 4, 8};
  for (const auto& preset : presets) {
    for (const auto& strategy : strategies) {
      for (int world : worlds) {
        if (options.progress) {
          options.progress("  " + strategy + " " + preset + " world " + std::to_string(world));
        }
        nlohmann::json o = {{"strategy", strategy},
                            {"world", world},
                            {"preset", preset},
                            {"steps", options.quick ? 3 : 4}};
        const MeasuredRun m = measure_run(o.dump());
        PerfRow row;
        row.section = "scaling";
        row.what = strategy + " " + preset + " world " + std::to_string(world);
        row.ours = median_step_seconds(m.step_seconds) * 1e3;
        row.unit = "ms/step";
        char note[64];
        std::snprintf(note, sizeof(note), "peak %.2f MB/rank", m.peak_bytes / 1e6);
        row.note = note;
        rows.push_back(row);
      }
    }
  }
}

}  // namespace shardscope::perf
