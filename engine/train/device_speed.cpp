#include "engine/train/device_speed.h"

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "engine/state/atomic_file.h"
#include "profiling/io/input_file.h"

namespace shardscope {
namespace {

std::string env_or_empty(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// The rate of a 512 x 512 (CPU) or 4096 x 4096 (GPU) matmul, after a warm-up, using every
// intra-op thread: a rank taking its turn on the device has all of it.
double measure(const std::string& device) {
  const bool cuda = device.rfind("cuda", 0) == 0;
  const int64_t n = cuda ? 4096 : 512;
  const auto options = torch::TensorOptions()
                           .device(torch::Device(device))
                           .dtype(cuda ? torch::kBFloat16 : torch::kFloat);
  const auto a = torch::randn({n, n}, options), b = torch::randn({n, n}, options);
  torch::mm(a, b);
  if (cuda) torch::cuda::synchronize();
  int repetitions = 0;
  const auto t0 = std::chrono::steady_clock::now();
  double seconds = 0;
  // At least 0.1 s of work, so that one slow call does not decide the rate.
  while (seconds < 0.1 || repetitions < 3) {
    torch::mm(a, b);
    if (cuda) torch::cuda::synchronize();
    ++repetitions;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  return 2.0 * double(n) * double(n) * double(n) * repetitions / seconds / 1e12;
}

}  // namespace

std::string shardscope_cache_directory() {
  if (auto dir = env_or_empty("SHARDSCOPE_CACHE"); !dir.empty()) return dir;
  if (auto dir = env_or_empty("XDG_CACHE_HOME"); !dir.empty()) return dir + "/shardscope";
  if (auto home = env_or_empty("HOME"); !home.empty()) return home + "/.cache/shardscope";
  return "";
}

// A cached speed outside these (100 PFLOP/s is a hundred times any GPU's dense peak) is a damaged
// or hand-edited cache: measured again rather than believed, which would price every step at 0 ms
// (or at years).
constexpr double kMostPlausibleTflops = 1e5;
constexpr double kLeastPlausibleTflops = 1e-4;  // 100 MFLOP/s: slower than any CPU of this age

double device_matmul_tflops(const std::string& device) {
  static std::mutex mutex;  // rank threads of one process measure once between them
  std::lock_guard<std::mutex> lock(mutex);
  // One GPU model per machine in practice: the key only keeps the CPU and the GPU apart.
  const std::string kind = device.rfind("cuda", 0) == 0 ? "cuda" : "cpu";
  const std::string dir = shardscope_cache_directory();
  const std::string path = dir.empty() ? "" : dir + "/device-speed.json";
  nlohmann::json cache = nlohmann::json::object();
  // Only a regular file of sane size is read: a FIFO there would block every run.
  if (!path.empty() &&
      profiling::input_file_problem(path, profiling::kMaxTextInputBytes, "cache").empty()) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    cache = nlohmann::json::parse(text.str(), nullptr, false);
    if (!cache.is_object()) cache = nlohmann::json::object();
    const auto found = cache.find(kind);
    if (found != cache.end() && found->is_number() && std::isfinite(found->get<double>()) &&
        found->get<double>() > kLeastPlausibleTflops &&
        found->get<double>() < kMostPlausibleTflops) {
      return found->get<double>();
    }
  }
  const double tflops = measure(device);
  // Written only over nothing or over a regular file: whatever else someone put there stays.
  std::error_code absent;
  const auto status = std::filesystem::symlink_status(path, absent);
  const bool writable =
      !std::filesystem::exists(status) || std::filesystem::is_regular_file(status);
  if (!path.empty() && writable) {
    try {
      std::error_code ignored;
      std::filesystem::create_directories(dir, ignored);
      cache[kind] = tflops;
      write_file_atomically(path, cache.dump(2) + "\n");
    } catch (const std::exception&) {
      // Not cached: measured again next time, which costs a fraction of a second.
    }
  }
  return tflops;
}

}  // namespace shardscope
