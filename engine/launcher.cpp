#include "engine/launcher.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>

#include <ATen/Parallel.h>
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "engine/comm.h"
#include "engine/device_turns.h"
#include "engine/process_group_factory.h"
#include "engine/rank_runner.h"
#include "profiling/clock.h"
#include "profiling/device_tracer.h"
#include "profiling/host_tracing.h"
#include "profiling/memory_tracker.h"

namespace shardscope {

int default_threads_per_rank(int world) {
  int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, world));
}

LaunchSpec launch_spec(const Config& config) {
  LaunchSpec spec;
  spec.world = config.world;
  spec.backend = config.backend;
  spec.device = config.device;
  spec.timeout = std::chrono::seconds(setup_timeout_s(config));
  // Taking turns, each rank has the whole machine while it computes; on a CPU "device" less one
  // core, where the collectives run (DeviceTurns::pin_compute_cores says why).
  if (config.threads_per_rank > 0 || !config.takes_turns()) {
    spec.threads_per_rank = config.threads_per_rank;
  } else {
    const int cores = default_threads_per_rank(1);
    const bool cpu = config.device.rfind("cpu", 0) == 0;
    spec.threads_per_rank = cpu ? std::max(1, cores - 1) : cores;
  }
  spec.tracing = config.tracing;
  spec.take_turns = config.takes_turns();
  spec.memory_capacity_bytes = static_cast<int64_t>(config.memory_limit_mb * 1e6);
  return spec;
}

namespace {

// With NCCL every rank has a GPU of its own: cuda:R for rank thread R unless the spec names one
// (a rank process is given its LOCAL_RANK's). Its thread makes that device current, as NCCL's
// communicators expect.
c10::Device rank_device(const LaunchSpec& spec, int rank) {
  c10::Device device(spec.device);
  if (spec.backend == "nccl" && device.is_cuda()) {
    if (!device.has_index()) device = c10::Device(c10::kCUDA, static_cast<c10::DeviceIndex>(rank));
    c10::cuda::set_device(device.index());
  }
  return device;
}

}  // namespace

// What a rank held when an allocation failed, by what each block is (the memory tracker's
// provenance): exact, where the strategy's own end-of-step report would be stale.
static std::string out_of_memory_report(const std::string& what, const LaunchSpec& spec, int rank,
                                        const profiling::RankMemoryTracker& memory) {
  auto mb = [](int64_t bytes) {
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%.2f MB", bytes / 1e6);
    return std::string(buf);
  };
  const int64_t refused = memory.held_when_refused();
  const int64_t held = refused > 0 ? refused : memory.live_bytes();
  const auto categories = refused > 0 ? memory.refused_categories() : memory.live_categories();
  std::string text = "out of memory on " + spec.device + " (rank " + std::to_string(rank) +
                     "): " + what.substr(0, what.find('\n')) + ". Rank " + std::to_string(rank) +
                     " held " + mb(held) + ":";
  for (int k = 0; k < profiling::kMemoryCategoryCount; ++k) {
    text += std::string(k == 0 ? " " : ", ") +
            profiling::memory_kind_name(static_cast<profiling::MemoryKind>(k)) + " " +
            mb(categories[k]);
  }
  return text;
}

std::optional<RankFailure> run_rank(const LaunchSpec& spec, int rank,
                                    const c10::intrusive_ptr<c10d::Store>& store,
                                    profiling::RankEventLog* log_storage,
                                    int64_t& peak_allocated_bytes,
                                    const std::function<void(RankContext&)>& body) {
  const int threads =
      spec.threads_per_rank > 0 ? spec.threads_per_rank : default_threads_per_rank(spec.world);
  // Intra-op threads are per calling thread under OpenMP: N ranks share the cores. The call
  // also resizes process-wide pools, which is not safe from several threads at once.
  {
    static std::mutex set_threads_mutex;
    std::lock_guard<std::mutex> lock(set_threads_mutex);
    at::set_num_threads(threads);
  }
  profiling::RankEventLog* log = spec.tracing ? log_storage : nullptr;
  profiling::RankLogScope tracing(log);
  profiling::RankMemoryTracker memory(rank, log);
  struct KeepPeak {
    profiling::RankMemoryTracker& memory;
    int64_t& peak;
    ~KeepPeak() {
      peak = memory.peak_bytes();
      memory.log_peak();  // the peak's exact breakdown, for the summary and the Memory tab
    }
  } keep_peak{memory, peak_allocated_bytes};
  memory.set_capacity(spec.memory_capacity_bytes);
  const bool track_memory = spec.tracing || spec.memory_capacity_bytes > 0;
  profiling::RankMemoryTracker::ThreadScope attribute_allocations(track_memory ? &memory : nullptr);
  // Kernels this thread launches are attributed to this rank (a no-op without device tracing).
  profiling::DeviceTracer::instance().push_rank(rank);
  struct PopRank {
    ~PopRank() { profiling::DeviceTracer::instance().pop_rank(); }
  } pop_rank;
  int64_t t_failed = 0;  // stamped where it was thrown, before teardown takes its time
  // The collective timeout in force, for a failure that a timeout caused: Gloo names it in some
  // messages ("Timed out waiting 5000ms") and not in others ("Application timeout caused pair
  // closure"), depending on which of a rank's pairs noticed first.
  std::chrono::milliseconds timeout_in_force = spec.timeout;
  try {
    if (spec.take_turns && spec.device.rfind("cpu", 0) == 0) {
      // The turn's holder computes on `threads` cores; the collectives get the rest.
      DeviceTurns::instance().pin_compute_cores(threads);
      DeviceTurns::keep_to_communication_cores();
    }
    ProcessGroupSpec pg_spec;
    pg_spec.backend = spec.backend;
    pg_spec.rank = rank;
    pg_spec.world = spec.world;
    pg_spec.timeout = spec.timeout;
    pg_spec.store = store;
    pg_spec.network = spec.gloo_network;
    Comm::Options comm_options;
    comm_options.emulate_flat_collectives = spec.emulate_flat_collectives;
    comm_options.stage_through_host = spec.stage_through_host;
    Comm comm(make_process_group(pg_spec), log, comm_options);
    // A rank's group is built once its own connections are up, not everyone's: a rank with
    // nothing to do could tear its group down while a peer is still connecting to it. The
    // store (not a traced collective) holds every rank here until all are connected.
    if (store->add("launcher/connected", 1) == spec.world)
      store->set("launcher/ready", std::vector<uint8_t>{1});
    store->wait({"launcher/ready"});

    // Destroyed before the world group, so a failing rank closes these connections too.
    std::map<std::string, std::unique_ptr<Comm>> subgroups;
    RankContext ctx;
    ctx.rank = rank;
    ctx.world = spec.world;
    ctx.device = rank_device(spec, rank);
    ctx.comm = &comm;
    ctx.subgroup = [&](const std::string& name, const std::vector<int>& ranks) -> Comm& {
      auto found = subgroups.find(name);
      if (found != subgroups.end()) return *found->second;
      const auto me = std::find(ranks.begin(), ranks.end(), rank);
      if (me == ranks.end()) {
        throw std::invalid_argument("rank " + std::to_string(rank) + " asked for group " + name +
                                    " it is not a member of");
      }
      // Connecting waits for the other members: not while holding the device.
      DeviceTurns::Release give_up_the_device;
      ProcessGroupSpec group_spec = pg_spec;
      group_spec.rank = static_cast<int>(me - ranks.begin());
      group_spec.world = static_cast<int>(ranks.size());
      group_spec.name = name;
      Comm::Options options = comm_options;
      options.group_name = name;
      options.world_ranks = ranks;
      auto made = std::make_unique<Comm>(make_process_group(group_spec), log, options);
      return *subgroups.emplace(name, std::move(made)).first->second;
    };
    ctx.set_collective_timeout = [&](std::chrono::milliseconds timeout) {
      pg_spec.timeout = timeout;
      timeout_in_force = timeout;
      comm.set_timeout(timeout);
      for (auto& [name, group] : subgroups) group->set_timeout(timeout);
    };
    try {
      DeviceTurns::Scope turn(spec.take_turns);
      body(ctx);
    } catch (...) {
      t_failed = profiling::now_ns();
      throw;
    }
  } catch (const c10::OutOfMemoryError& e) {
    return RankFailure{rank, out_of_memory_report(e.what(), spec, rank, memory),
                       t_failed ? t_failed : profiling::now_ns()};
  } catch (const c10::Error& e) {
    // LibTorch's own errors carry a stack dump of its internals: the report wants the sentence.
    std::string what = e.what_without_backtrace();
    const std::string ms = std::to_string(timeout_in_force.count()) + "ms";
    if (what.find("timeout") != std::string::npos && what.find(ms) == std::string::npos)
      what += " (the collective timeout: " + ms + ")";
    return RankFailure{rank, what, t_failed ? t_failed : profiling::now_ns()};
  } catch (const std::exception& e) {
    // By now the group is destroyed (it lived in the try scope), which closes this rank's
    // connections and wakes peers blocked on it.
    return RankFailure{rank, e.what(), t_failed ? t_failed : profiling::now_ns()};
  } catch (...) {
    return RankFailure{rank, "unknown exception", t_failed ? t_failed : profiling::now_ns()};
  }
  return std::nullopt;
}

LaunchReport launch_rank_threads(const LaunchSpec& spec,
                                 const std::function<void(RankContext&)>& body) {
  LaunchReport report;
  for (int r = 0; r < spec.world; ++r)
    report.logs.push_back(std::make_unique<profiling::RankEventLog>(r));
  report.peak_allocated_bytes.assign(spec.world, 0);

  auto store = c10::make_intrusive<c10d::HashStore>();
  store->setTimeout(spec.timeout);
  std::mutex failures_mutex;

  auto rank_main = [&](int rank) {
    auto failure = run_rank(spec, rank, store, report.logs[rank].get(),
                            report.peak_allocated_bytes[rank], body);
    if (!failure) return;
    std::lock_guard<std::mutex> lock(failures_mutex);
    report.failures.push_back(std::move(*failure));
  };

  std::vector<const profiling::RankEventLog*> watched;
  for (const auto& log : report.logs) watched.push_back(log.get());
  if (spec.watch_logs) spec.watch_logs(&watched);
  std::vector<std::thread> ranks;
  for (int r = 0; r < spec.world; ++r) ranks.emplace_back(rank_main, r);
  for (auto& t : ranks) t.join();
  if (spec.watch_logs) spec.watch_logs(nullptr);

  std::sort(report.failures.begin(), report.failures.end(),
            [](const RankFailure& a, const RankFailure& b) { return a.t_ns < b.t_ns; });
  return report;
}

}  // namespace shardscope
