#include "tests/support/pipeline_trace.h"

#include <string>

#include <nlohmann/json.hpp>

namespace shardscope::test {

using profiling::Category;
using profiling::Event;

profiling::Trace gpipe_trace(int stages, int micro, int steps, int first_step, int64_t forward_ns,
                             int64_t backward_ns, int64_t gap_ns) {
  profiling::Trace t;
  const int64_t window = (micro + stages - 1) * (forward_ns + backward_ns);
  const int64_t forward_phase = (micro + stages - 1) * forward_ns;
  for (int s = 0; s < stages; ++s) {
    profiling::RankTrace r;
    r.rank = s;
    r.lanes = {"host", "comm"};
    t.ranks.push_back(r);
  }
  auto add = [&](int rank, const std::string& name, Category c, int64_t t0, int64_t t1, int step,
                 int m) {
    Event e;
    e.name = t.intern(name);
    e.category = c;
    e.t0_ns = t0;
    e.t1_ns = t1;
    e.step = step;
    e.micro = static_cast<int16_t>(m);
    t.ranks[rank].events.push_back(e);
  };
  for (int k = 0; k < steps; ++k) {
    const int step = first_step + k;
    const int64_t origin = k * (window + gap_ns);
    for (int s = 0; s < stages; ++s) {
      add(s, "step " + std::to_string(step), Category::kStep, origin, origin + window, step, -1);
      for (int j = 0; j < micro; ++j) {
        const int64_t f0 = origin + (s + j) * forward_ns;
        // Backwards run last micro-batch first, from the last stage back to the first.
        const int64_t b0 =
            origin + forward_phase + ((stages - 1 - s) + (micro - 1 - j)) * backward_ns;
        add(s, "micro-batch", Category::kMicroBatch, f0, b0 + backward_ns, step, j);
        add(s, "forward", Category::kForward, f0, f0 + forward_ns, step, j);
        add(s, "backward", Category::kBackward, b0, b0 + backward_ns, step, j);
      }
    }
  }
  nlohmann::json config = {{"preset", "tiny"},
                           {"world", stages},
                           {"strategy", "pp"},
                           {"model", {{"layers", 4 * stages}}},
                           {"strategy_options", {{"micro_batches", micro}, {"schedule", "gpipe"}}}};
  t.run = profiling::run_record_from_json(
      nlohmann::json{{"strategy", "pp"}, {"world", stages}, {"config", config}}.dump());
  t.normalise();
  return t;
}

}  // namespace shardscope::test
