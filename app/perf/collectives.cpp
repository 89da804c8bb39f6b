// Collectives through Comm (recording every call) against the same calls on the raw process
// group, in one launch, interleaved; and the machine's copy bandwidth, the physical limit of a
// shared-memory all_reduce.
#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>

#include <torch/torch.h>

#include "app/perf/perf_suite.h"
#include "engine/comm/comm.h"
#include "engine/launch/launcher.h"
#include "profiling/metrics/trace_metrics.h"

namespace shardscope::perf {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

double copy_bandwidth_gbps() {
  const size_t bytes = size_t{64} << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  double best = 1e9;
  for (int i = 0; i < 8; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    std::memcpy(b.data(), a.data(), bytes);
    best = std::min(best, seconds_since(t0));
    std::swap(a, b);
  }
  return bytes / best / 1e9;
}

PerfRow copy_bandwidth_row(const std::string& section, const std::string& what, double gbps) {
  PerfRow copy;
  copy.section = section;
  copy.what = what;
  copy.ours = gbps;
  copy.unit = "GB/s";
  return copy;
}

void raw_collective(c10d::ProcessGroup& pg, const std::string& op, at::Tensor& full,
                    at::Tensor& part) {
  if (op == "all_reduce") {
    std::vector<at::Tensor> t{full};
    pg.allreduce(t)->wait();
  }
  if (op == "all_gather") pg._allgather_base(full, part)->wait();
  if (op == "reduce_scatter") pg._reduce_scatter_base(part, full)->wait();
}

namespace {

struct Case {
  std::string op;
  int64_t size = 0;  // nccl-tests' S: the whole buffer
  double ours_s = 0, raw_s = 0, ratio = 0;
};

}  // namespace

void measure_collectives(const PerfOptions& options, std::vector<PerfRow>& rows) {
  const double copy_gbps = copy_bandwidth_gbps();
  rows.push_back(copy_bandwidth_row(
      "collectives", "memcpy bandwidth (64 MiB), the limit of a shared-memory all_reduce",
      copy_gbps));

  std::vector<int64_t> sizes = {int64_t{4} << 10, int64_t{64} << 10, int64_t{1} << 20,
                                int64_t{16} << 20, int64_t{64} << 20};
  if (options.quick) sizes = {int64_t{4} << 10, int64_t{1} << 20};
  const int rounds = options.quick ? 2 : 3;
  for (int world : {2, 4}) {
    if (options.progress)
      options.progress("  all_reduce / all_gather / reduce_scatter, world " +
                       std::to_string(world));
    std::vector<Case> cases;
    std::mutex mutex;
    LaunchSpec spec;
    spec.world = world;
    LaunchReport report = launch_rank_threads(spec, [&](RankContext& ctx) {
      Comm& comm = *ctx.comm;
      auto pg = comm.process_group();
      for (const std::string op : {"all_reduce", "all_gather", "reduce_scatter"}) {
        for (int64_t size : sizes) {
          const int64_t elements = size / 4;
          const int64_t shard = elements / world;
          // Buffers as nccl-tests sizes them: S is the all_reduce buffer, all_gather's output
          // and reduce_scatter's input.
          torch::Tensor full = torch::ones({elements}), part = torch::ones({shard});
          const int iterations =
              static_cast<int>(std::clamp<int64_t>((int64_t{256} << 20) / size, 3, 200));
          auto run_ours = [&] {
            for (int i = 0; i < iterations; ++i) {
              if (op == "all_reduce") comm.all_reduce(full);
              if (op == "all_gather") comm.all_gather_into(full, part);
              if (op == "reduce_scatter") comm.reduce_scatter_tensor(part, full);
            }
          };
          auto run_raw = [&] {
            for (int i = 0; i < iterations; ++i) raw_collective(*pg, op, full, part);
          };
          run_raw();  // warm-up: connections, buffers
          std::vector<double> ours, raw, ratios;
          for (int r = 0; r < rounds; ++r) {
            comm.barrier();
            auto t0 = std::chrono::steady_clock::now();
            run_ours();
            const double a = seconds_since(t0) / iterations;
            comm.barrier();
            t0 = std::chrono::steady_clock::now();
            run_raw();
            const double b = seconds_since(t0) / iterations;
            ours.push_back(a);
            raw.push_back(b);
            ratios.push_back(b / a);  // throughput of ours relative to raw
          }
          if (ctx.rank == 0) {
            std::lock_guard<std::mutex> lock(mutex);
            cases.push_back({op, size, median(ours), median(raw), median(ratios)});
          }
        }
      }
    });
    if (!report.ok())
      throw std::runtime_error("collectives benchmark: " + report.root_failure()->message);
    for (const auto& c : cases) {
      const double factor = profiling::busbw_factor(c.op, world);
      const double busbw = c.size / c.ours_s / 1e9 * factor;
      const double raw_busbw = c.size / c.raw_s / 1e9 * factor;
      PerfRow row;
      row.section = "collectives";
      const double kib = c.size / 1024.0;
      row.what = c.op + " " +
                 (kib >= 1024 ? std::to_string(int(kib / 1024)) + " MiB"
                              : std::to_string(int(kib)) + " KiB") +
                 ", world " + std::to_string(world);
      row.ours = busbw;
      row.baseline = raw_busbw;
      row.unit = "busbw GB/s";
      row.ratio = c.ratio;
      row.target = ">= 0.97";
      row.met = c.ratio >= 0.97;
      char note[64];
      std::snprintf(note, sizeof(note), "busbw / memcpy = %.2f", busbw / copy_gbps);
      row.note = note;
      rows.push_back(row);
    }
  }
}

}  // namespace shardscope::perf
