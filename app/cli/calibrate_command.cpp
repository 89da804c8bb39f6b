#include "app/cli/calibrate_command.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include <torch/torch.h>

#include "app/cli/run_outputs.h"
#include "engine/comm/comm.h"
#include "engine/launch/launcher.h"
#include "engine/state/atomic_file.h"
#include "profiling/projection/collective_model.h"
#include "profiling/projection/hardware_profile.h"

namespace shardscope::cli {
namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Median time of a blocking all_reduce of `bytes` over `world` rank threads (rank 0's view, each
// repetition started together after a barrier).
double all_reduce_time(int world, int64_t bytes, int repetitions) {
  LaunchSpec spec;
  spec.world = world;
  spec.tracing = false;
  std::vector<double> times;
  auto report = launch_rank_threads(spec, [&](RankContext& ctx) {
    auto buffer = torch::ones({std::max<int64_t>(1, bytes / 4)}, torch::kFloat);
    for (int i = -2; i < repetitions; ++i) {  // two warm-ups
      ctx.comm->barrier();
      const auto t0 = std::chrono::steady_clock::now();
      ctx.comm->all_reduce(buffer);
      if (ctx.rank == 0 && i >= 0) times.push_back(seconds_since(t0));
    }
  });
  if (!report.ok())
    throw std::runtime_error("calibration run failed: " + report.failures[0].message);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

double matmul_tflops(int repetitions) {
  const int64_t n = 512;
  auto a = torch::randn({n, n}), b = torch::randn({n, n});
  torch::mm(a, b);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < repetitions; ++i) torch::mm(a, b);
  return 2.0 * n * n * n * repetitions / seconds_since(t0) / 1e12;
}

}  // namespace

int calibrate_command(const CalibrateOptions& options, std::ostream& out, std::ostream& err) {
  const std::string path = options.out.empty()
                               ? profiling::hardware_profile_directory() + "/this-machine.json"
                               : options.out;
  // Checked before measuring, as a run's outputs are: never a folder, a FIFO or a symlink, never
  // two calibrations writing it at once.
  std::vector<OutputClaim> claims;
  try {
    claims = check_output_file("--out", path);
  } catch (const ConfigError& e) {
    err << "error: calibrate: " << e.what() << "\n";
    return 2;
  }
  try {
    profiling::CalibrationPoints c;
    c.small_world = 2;
    c.large_world = 4;
    c.small_bytes = 8;
    c.large_bytes = options.quick ? 4 << 20 : 64 << 20;
    const int reps = options.quick ? 5 : 15;
    out << "calibrating this machine (Gloo all_reduce over rank threads, fp32 matmul)...\n";
    c.t_small_at_small_world_s = all_reduce_time(c.small_world, 8, reps);
    c.t_small_at_large_world_s = all_reduce_time(c.large_world, 8, reps);
    c.t_large_at_small_world_s =
        all_reduce_time(c.small_world, static_cast<int64_t>(c.large_bytes), reps);
    c.matmul_tflops = matmul_tflops(options.quick ? 10 : 50);
    c.memory_gib =
        double(sysconf(_SC_PHYS_PAGES)) * double(sysconf(_SC_PAGE_SIZE)) / (1024.0 * 1024 * 1024);
    const auto hw = profiling::fit_profile(
        c, "this-machine",
        "this machine as calibrated: ranks are threads sharing its cores and memory, collectives "
        "are Gloo over loopback; peak_bf16_tflops holds its measured fp32 matmul rate");
    write_file_atomically(path, profiling::profile_json(hw));
    char line[256];
    std::snprintf(line, sizeof(line),
                  "all_reduce 8 B: %.1f us at world %d, %.1f us at world %d; %.0f MiB at world "
                  "%d: %.2f ms\n",
                  c.t_small_at_small_world_s * 1e6, c.small_world, c.t_small_at_large_world_s * 1e6,
                  c.large_world, c.large_bytes / (1 << 20), c.small_world,
                  c.t_large_at_small_world_s * 1e3);
    out << line;
    std::snprintf(line, sizeof(line),
                  "fitted: base %.1f us, %.2f us per ring step, %.2f GB/s; matmul %.3f TFLOP/s; "
                  "memory %.1f GiB\n",
                  hw.base_latency_us, hw.intra.hw_latency_us[2], hw.intra.bandwidth_gbps,
                  hw.peak_bf16_tflops, hw.gpu_memory_gib);
    out << line << "wrote " << path << " (use it with --hardware "
        << (options.out.empty() ? "this-machine" : path) << ")\n";
    return 0;
  } catch (const std::exception& e) {
    err << "error: calibrate: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace shardscope::cli
