// The shared-memory backend against Gloo, on this host: busbw of all_reduce, all_gather and
// reduce_scatter on the raw process group from 1 MiB up, against memcpy (the physical limit of a
// copy through shared memory), and a `tiny` world-4 step in wall-clock time over each.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <mutex>

#include <torch/cuda.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "app/perf/busbw_ranks.h"
#include "app/perf/perf_suite.h"
#include "engine/comm/comm.h"
#include "engine/launch/launcher.h"
#include "profiling/metrics/trace_metrics.h"

namespace shardscope::perf {

namespace {

std::string size_name(int64_t bytes) {
  if (bytes >= (int64_t{1} << 30)) return std::to_string(bytes >> 30) + " GiB";
  return std::to_string(bytes >> 20) + " MiB";
}

// Seconds per call of each op and size (nccl-tests' S) on rank threads over `backend`.
CollectiveSeconds time_backend(const std::string& backend, int world,
                               const std::vector<int64_t>& sizes, int rounds,
                               const std::string& device) {
  CollectiveSeconds seconds;
  std::mutex mutex;
  LaunchSpec spec;
  spec.world = world;
  spec.backend = backend;
  spec.threads_per_rank = 1;
  spec.timeout = std::chrono::minutes(5);
  LaunchReport report = launch_rank_threads(spec, [&](RankContext& ctx) {
    auto measured = time_collectives(
        *ctx.comm->process_group(), world, sizes, rounds, [&] { ctx.comm->barrier(); },
        c10::Device(device));
    std::lock_guard<std::mutex> lock(mutex);
    if (ctx.rank == 0) seconds = measured;
  });
  if (!report.ok())
    throw std::runtime_error("backends benchmark (" + backend +
                             "): " + report.root_failure()->message);
  return seconds;
}

// What one rank's collectives on a device are held to: a device-to-device copy of 64 MiB there
// (the bytes counted once, as memcpy's), the best of eight.
double device_copy_gbps(const c10::Device& device) {
  const int64_t bytes = int64_t{64} << 20;
  at::Tensor a = at::ones({bytes}, at::TensorOptions().dtype(at::kByte).device(device));
  at::Tensor b = at::empty_like(a);
  double best = 1e9;
  for (int i = 0; i < 8; ++i) {
    torch::cuda::synchronize(device.index() < 0 ? 0 : device.index());
    const auto t0 = std::chrono::steady_clock::now();
    b.copy_(a);
    torch::cuda::synchronize(device.index() < 0 ? 0 : device.index());
    best = std::min(best,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return static_cast<double>(bytes) / best / 1e9;
}

// On a CUDA device, shm also as it was before its collectives stayed there: staged through host
// memory (SHARDSCOPE_SHM_CUDA=host, which rank threads and rank processes read alike).
CollectiveSeconds time_host_staged(
    const std::function<CollectiveSeconds(const std::string&)>& time) {
  setenv("SHARDSCOPE_SHM_CUDA", "host", 1);
  try {
    auto seconds = time("shm");
    unsetenv("SHARDSCOPE_SHM_CUDA");
    return seconds;
  } catch (...) {
    unsetenv("SHARDSCOPE_SHM_CUDA");
    throw;
  }
}

void busbw_rows_of(const std::string& mode, int world, const CollectiveSeconds& shm,
                   const CollectiveSeconds& gloo, const CollectiveSeconds& staged, double copy_gbps,
                   std::vector<PerfRow>& rows);

// Each block of rows is held to memcpy measured just before it: on a shared VM memcpy itself
// moved 6.4 to 12.2 GB/s in runs of one day, so one figure at the start drifts from the rows
// measured minutes later.
void busbw_rows(const PerfOptions& options, std::vector<PerfRow>& rows) {
  const c10::Device device(options.device);
  std::vector<int64_t> sizes = {int64_t{1} << 20, int64_t{16} << 20, int64_t{256} << 20,
                                int64_t{1} << 30};
  if (options.quick) sizes = {int64_t{1} << 20, int64_t{16} << 20};
  if (options.quick && device.is_cuda()) sizes.push_back(int64_t{256} << 20);
  const int rounds = options.quick ? 2 : 3;
  for (const std::string mode : {"threads", "processes"}) {
    for (int world : {2, 4}) {
      if (options.progress)
        options.progress("  shm and gloo, world " + std::to_string(world) + ", " + mode);
      const auto time = [&](const std::string& backend) {
        return mode == "threads"
                   ? time_backend(backend, world, sizes, rounds, options.device)
                   : time_collectives_in_processes(backend, world, sizes, rounds, options.device);
      };
      const double copy_gbps = device.is_cuda() ? device_copy_gbps(device) : copy_bandwidth_gbps();
      rows.push_back(copy_bandwidth_row("backends",
                                        std::string(device.is_cuda() ? "device copy" : "memcpy") +
                                            " bandwidth (64 MiB) before world " +
                                            std::to_string(world) + ", " + mode,
                                        copy_gbps));
      const auto shm = time("shm");
      const auto gloo = time("gloo");
      const auto staged = device.is_cuda() ? time_host_staged(time) : CollectiveSeconds{};
      busbw_rows_of(mode, world, shm, gloo, staged, copy_gbps, rows);
    }
  }
}

void busbw_rows_of(const std::string& mode, int world, const CollectiveSeconds& shm,
                   const CollectiveSeconds& gloo, const CollectiveSeconds& staged, double copy_gbps,
                   std::vector<PerfRow>& rows) {
  for (const auto& [key, shm_s] : shm) {
    const auto& [op, size] = key;
    const double factor = profiling::busbw_factor(op, world);
    const double ours = size / shm_s / 1e9 * factor;
    const double theirs = size / gloo.at(key) / 1e9 * factor;
    PerfRow row;
    row.section = "backends";
    row.what = op + " " + size_name(size) + ", world " + std::to_string(world) + " (" + mode + ")";
    row.ours = ours;
    row.baseline = theirs;
    row.unit = "busbw GB/s (shm; gloo)";
    row.ratio = ours / copy_gbps;
    row.target = ">= 0.5";  // of memcpy
    row.met = row.ratio >= 0.5;
    char note[160];
    std::snprintf(note, sizeof(note), "busbw / %s: shm %.2f, gloo %.2f; shm %.1fx gloo",
                  staged.empty() ? "memcpy" : "device copy", ours / copy_gbps, theirs / copy_gbps,
                  ours / theirs);
    row.note = note;
    if (const auto found = staged.find(key); found != staged.end()) {
      std::snprintf(note, sizeof(note), "; staged through the host %.2f GB/s",
                    size / found->second / 1e9 * factor);
      row.note += note;
    }
    rows.push_back(row);
  }
}

void step_rows(const PerfOptions& options, std::vector<PerfRow>& rows) {
  for (const std::string mode : {"threads", "processes"}) {
    if (options.progress) options.progress("  tiny world 4 step, " + mode);
    const auto step = [&](const std::string& backend) {
      nlohmann::json o = {{"strategy", "ddp_bucketed"}, {"world", 4},
                          {"preset", "tiny"},           {"steps", options.quick ? 6 : 12},
                          {"backend", backend},         {"mode", mode},
                          {"device", options.device}};
      return run_step_seconds(o.dump());
    };
    std::vector<double> shm, gloo;
    for (int round = 0; round < (options.quick ? 1 : 3); ++round) {
      shm.push_back(step("shm"));
      gloo.push_back(step("gloo"));
    }
    PerfRow row;
    row.section = "backends";
    row.what = "ddp_bucketed tiny world 4 step, wall clock (" + mode + ")";
    row.ours = median(shm) * 1e3;
    row.baseline = median(gloo) * 1e3;
    row.unit = "ms/step (shm; gloo)";
    row.ratio = row.baseline / row.ours;
    row.target = ">= 1.3";  // times faster than over Gloo
    row.met = row.ratio >= 1.3;
    row.note = "device time prices collectives by the link model: the same over either";
    rows.push_back(row);
  }
}

}  // namespace

void measure_backends(const PerfOptions& options, std::vector<PerfRow>& rows) {
  busbw_rows(options, rows);
  step_rows(options, rows);
}

}  // namespace shardscope::perf
