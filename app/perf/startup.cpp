// How long until every rank is ready to train: its process group formed, as threads of this
// process, and as rank processes meeting through a TCPStore.
#include <algorithm>
#include <mutex>

#include <nlohmann/json.hpp>

#include "app/perf/perf_suite.h"
#include "engine/launch/launcher.h"
#include "engine/train/config.h"
#include "engine/train/run.h"
#include "profiling/record/clock.h"

namespace shardscope::perf {

namespace {

// Threads: from the launch to the last rank's body starting (its group is formed by then).
double thread_startup_s(int world) {
  LaunchSpec spec;
  spec.world = world;
  std::mutex mutex;
  int64_t last = 0;
  const int64_t t0 = profiling::now_ns();
  LaunchReport report = launch_rank_threads(spec, [&](RankContext&) {
    std::lock_guard<std::mutex> lock(mutex);
    last = std::max(last, profiling::now_ns());
  });
  if (!report.ok()) throw std::runtime_error("thread start-up: " + report.root_failure()->message);
  return (last - t0) * 1e-9;
}

// Processes: from the launch to the last rank's first recorded event, its first collective
// (the group is formed by then; the steady clock is shared by the processes of a machine).
// This includes building the (tiny) model and the first broadcast, so it overstates a little.
double process_startup_s(int world) {
  Config config = config_from_json({{"strategy", "ddp_bucketed"},
                                    {"world", world},
                                    {"preset", "tiny"},
                                    {"steps", 1},
                                    {"mode", "processes"},
                                    {"reference", false}});
  finalize(config);
  const int64_t t0 = profiling::now_ns();
  const RunSummary s = run_training(config);
  if (!s.ok) throw std::runtime_error("process start-up: " + s.failure);
  int64_t last = 0;
  for (const auto& rank : s.trace.ranks) {
    int64_t first = INT64_MAX;
    for (const auto& e : rank.events) first = std::min(first, e.t0_ns);
    if (first != INT64_MAX) last = std::max(last, first);
  }
  return (last - t0) * 1e-9;
}

}  // namespace

void measure_startup(const PerfOptions& options, std::vector<PerfRow>& rows) {
  const int world = 8, rounds = options.quick ? 1 : 3;
  std::vector<double> threads, processes;
  for (int r = 0; r < rounds; ++r) {
    if (options.progress)
      options.progress("  8 rank threads, 8 rank processes, round " + std::to_string(r + 1));
    threads.push_back(thread_startup_s(world));
    processes.push_back(process_startup_s(world));
  }
  PerfRow t;
  t.section = "startup";
  t.what = "8 rank threads ready (groups formed)";
  t.ours = median(threads);
  t.unit = "s";
  t.ratio = t.ours;
  t.target = "<= 1 s";
  t.met = t.ours <= 1.0;
  rows.push_back(t);
  PerfRow p = t;
  p.what = "8 rank processes ready (first collective)";
  p.ours = p.ratio = median(processes);
  p.target = "<= 5 s";
  p.met = p.ours <= 5.0;
  rows.push_back(p);
}

}  // namespace shardscope::perf
