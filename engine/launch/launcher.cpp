#include "engine/launch/launcher.h"

#include <algorithm>
#include <cstdio>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

#include <ATen/Parallel.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>

#include "engine/comm/comm.h"
#include "engine/launch/backward_thread.h"
#include "engine/launch/device_turns.h"
#include "engine/launch/process_group_factory.h"
#include "engine/launch/rank_runner.h"
#include "profiling/record/clock.h"
#include "profiling/record/device_tracer.h"
#include "profiling/record/host_tracing.h"
#include "profiling/record/memory_tracker.h"

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
  // core, where the collectives run (DeviceTurns::pin_compute_cores says why). A rank alone (world
  // 1, as the single-device reference is) runs no collectives beside its compute: every core.
  if (config.threads_per_rank > 0 || !config.takes_turns()) {
    spec.threads_per_rank = config.threads_per_rank;
  } else {
    const int cores = default_threads_per_rank(1);
    const bool cpu = config.device.rfind("cpu", 0) == 0;
    spec.threads_per_rank = cpu && config.world > 1 ? std::max(1, cores - 1) : cores;
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

// Intra-op threads are per calling thread under OpenMP: N ranks share the cores. The call
// also resizes process-wide pools, which is not safe from several threads at once.
void set_intra_op_threads(int threads) {
  static std::mutex set_threads_mutex;
  std::lock_guard<std::mutex> lock(set_threads_mutex);
  at::set_num_threads(threads);
}

// One rank's run, and what the report of its failure needs from it.
struct RankRun {
  const LaunchSpec& spec;
  int rank;
  const c10::intrusive_ptr<c10d::Store>& store;
  profiling::RankEventLog* log;  // null without tracing
  int threads;                   // intra-op threads
  int64_t t_failed;              // stamped where it was thrown, before teardown takes its time
  // The collective timeout in force, for a failure that a timeout caused: Gloo names it in some
  // messages ("Timed out waiting 5000ms") and not in others ("Application timeout caused pair
  // closure"), depending on which of a rank's pairs noticed first.
  std::chrono::milliseconds timeout_in_force;
};

// A rank's process groups: the world's, and the subgroups its strategy asks for.
struct RankGroups {
  RankGroups(const RankRun& run, ProcessGroupSpec world_spec, Comm::Options options)
      : pg_spec(std::move(world_spec)),
        comm_options(std::move(options)),
        rank(run.rank),
        log(run.log),
        comm(make_process_group(pg_spec), log, comm_options) {}

  // Subgroup `name` of `ranks` (world ranks, in group order), connected on first use.
  Comm& subgroup(const std::string& name, const std::vector<int>& ranks) {
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
  }

  ProcessGroupSpec pg_spec;  // the world group's; its timeout is the subgroups' too
  Comm::Options comm_options;
  int rank;
  profiling::RankEventLog* log;
  Comm comm;
  // Destroyed before the world group, so a failing rank closes these connections too.
  std::map<std::string, std::unique_ptr<Comm>> subgroups;
};

ProcessGroupSpec world_group_spec(const RankRun& run) {
  ProcessGroupSpec pg_spec;
  pg_spec.backend = run.spec.backend;
  pg_spec.rank = run.rank;
  pg_spec.world = run.spec.world;
  pg_spec.timeout = run.spec.timeout;
  pg_spec.store = run.store;
  pg_spec.network = run.spec.gloo_network;
  return pg_spec;
}

Comm::Options world_comm_options(const LaunchSpec& spec) {
  Comm::Options comm_options;
  comm_options.emulate_flat_collectives = spec.emulate_flat_collectives;
  comm_options.stage_through_host = spec.stage_through_host;
  return comm_options;
}

// Connects the rank to the others and runs `body` on it. Its groups live in this call, so
// whatever `body` throws, they are destroyed by the time the caller catches it.
void connect_and_run(RankRun& run, const std::function<void(RankContext&)>& body) {
  const LaunchSpec& spec = run.spec;
  if (spec.takes_turns_on_cpu()) {
    // The turn's holder computes on `threads` cores; the collectives get the rest.
    DeviceTurns::instance().pin_compute_cores(run.threads);
    DeviceTurns::keep_to_communication_cores();
  }
  if (spec.take_turns) {
    const c10::Device device = rank_device(spec, run.rank);
    const bool drains = DeviceTurns::drains_gpu(device.is_cuda());
    DeviceTurns::instance().drain_before_release(
        drains ? std::function<void()>([index = device.index()] {
          // Giving the turn up happens in destructors too: a device error is the run's to
          // report where it next touches the device, not here.
          try {
            const c10::cuda::CUDAGuard on(index < 0 ? 0 : index);
            c10::cuda::device_synchronize();
          } catch (const c10::Error&) {
          }
        })
               : std::function<void()>());
  }
  RankGroups groups(run, world_group_spec(run), world_comm_options(spec));
  // A rank's group is built once its own connections are up, not everyone's: a rank with
  // nothing to do could tear its group down while a peer is still connecting to it. The
  // store (not a traced collective) holds every rank here until all are connected.
  if (run.store->add("launcher/connected", 1) == spec.world)
    run.store->set("launcher/ready", std::vector<uint8_t>{1});
  run.store->wait({"launcher/ready"});

  RankContext ctx;
  ctx.rank = run.rank;
  ctx.world = spec.world;
  ctx.device = rank_device(spec, run.rank);
  ctx.comm = &groups.comm;
  ctx.subgroup = [&](const std::string& name, const std::vector<int>& ranks) -> Comm& {
    return groups.subgroup(name, ranks);
  };
  ctx.set_collective_timeout = [&](std::chrono::milliseconds timeout) {
    groups.pg_spec.timeout = timeout;
    run.timeout_in_force = timeout;
    groups.comm.set_timeout(timeout);
    for (auto& [name, group] : groups.subgroups) group->set_timeout(timeout);
  };
  try {
    DeviceTurns::Scope turn(spec.take_turns);
    body(ctx);
  } catch (...) {
    run.t_failed = profiling::now_ns();
    throw;
  }
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
  set_intra_op_threads(threads);
  // A rank that takes turns on a CPU "device" and computes on this thread alone: what the thread
  // did not run, the machine took from it (device time takes that out). Not where a second
  // thread runs its backward, nor where ranks contend (device time keeps the contention).
  profiling::RankEventLog::measure_cpu_time_on_this_thread(
      threads == 1 && spec.takes_turns_on_cpu() && !backward_thread_emulated());
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
  RankRun run{spec, rank, store, log, threads, 0, spec.timeout};
  try {
    connect_and_run(run, body);
  } catch (const c10::OutOfMemoryError& e) {
    return RankFailure{rank, out_of_memory_report(e.what(), spec, rank, memory),
                       run.t_failed ? run.t_failed : profiling::now_ns()};
  } catch (const c10::Error& e) {
    // LibTorch's own errors carry a stack dump of its internals: the report wants the sentence.
    std::string what = e.what_without_backtrace();
    const std::string ms = std::to_string(run.timeout_in_force.count()) + "ms";
    if (what.find("timeout") != std::string::npos && what.find(ms) == std::string::npos)
      what += " (the collective timeout: " + ms + ")";
    return RankFailure{rank, what, run.t_failed ? run.t_failed : profiling::now_ns()};
  } catch (const std::exception& e) {
    // By now the group is destroyed (it lived in connect_and_run), which closes this rank's
    // connections and wakes peers blocked on it.
    return RankFailure{rank, e.what(), run.t_failed ? run.t_failed : profiling::now_ns()};
  } catch (...) {
    return RankFailure{rank, "unknown exception",
                       run.t_failed ? run.t_failed : profiling::now_ns()};
  }
  return std::nullopt;
}

LaunchReport launch_rank_threads(const LaunchSpec& spec,
                                 const std::function<void(RankContext&)>& body) {
  LaunchReport report;
  for (int r = 0; r < spec.world; ++r)
    report.logs.push_back(std::make_unique<profiling::RankEventLog>(r));
  report.peak_allocated_bytes.assign(spec.world, 0);

  prepare_process_for_groups();  // here, before any rank thread reads the environment
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
