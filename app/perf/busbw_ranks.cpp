// Collective timings on rank threads' or rank processes' raw process group, for the backends
// section: rank processes take other paths than threads (peer reads or slots, not in place).
#include "app/perf/busbw_ranks.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <thread>

#include <torch/cuda.h>
#include <torch/torch.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/FileStore.hpp>

#include "app/perf/perf_suite.h"
#include "engine/launch/process_group_factory.h"
#include "engine/launch/process_launcher.h"
#include "engine/state/atomic_file.h"

extern char** environ;

namespace shardscope::perf {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// Kills and reaps the rank processes still running (their pids are 0 once reaped).
void kill_remaining(std::vector<pid_t>& pids) {
  for (pid_t& pid : pids) {
    if (pid <= 0) continue;
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
    pid = 0;
  }
}

// Reaps the rank processes as they end. Once one fails, or at the deadline, the others are
// killed (a rank whose peer died would otherwise wait out its collective timeout).
void wait_for_ranks(std::vector<pid_t>& pids, std::chrono::seconds most) {
  const auto deadline = std::chrono::steady_clock::now() + most;
  std::string failed;
  for (size_t left = pids.size(); left > 0;) {
    for (size_t r = 0; r < pids.size(); ++r) {
      int status = 0;
      if (pids[r] <= 0 || waitpid(pids[r], &status, WNOHANG) != pids[r]) continue;
      pids[r] = 0;
      --left;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        failed += " rank " + std::to_string(r) + " ended with status " + std::to_string(status);
    }
    if (!failed.empty()) {
      kill_remaining(pids);
      throw std::runtime_error("busbw rank processes failed:" + failed);
    }
    if (left > 0 && std::chrono::steady_clock::now() > deadline) {
      kill_remaining(pids);
      throw std::runtime_error("busbw rank processes took longer than " +
                               std::to_string(most.count()) + " s; killed");
    }
    if (left > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// One rank process of this binary; it dies with this process (PR_SET_PDEATHSIG). Between fork
// and exec only system calls: the arguments are built before.
pid_t start_rank(const std::string& exe, std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error("busbw: cannot start a rank process");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent) _exit(1);
    execve(exe.c_str(), argv.data(), environ);
    _exit(127);
  }
  return pid;
}

}  // namespace

CollectiveSeconds time_collectives(c10d::ProcessGroup& pg, int world,
                                   const std::vector<int64_t>& sizes, int rounds,
                                   const std::function<void()>& barrier,
                                   const c10::Device& device) {
  CollectiveSeconds seconds;
  const auto finish = [&] {
    if (device.is_cuda()) torch::cuda::synchronize(device.index() < 0 ? 0 : device.index());
  };
  for (const std::string op : {"all_reduce", "all_gather", "reduce_scatter"}) {
    for (int64_t size : sizes) {
      const int64_t elements = size / 4;
      const auto on = torch::TensorOptions().device(device);
      torch::Tensor full = torch::ones({elements}, on), part = torch::ones({elements / world}, on);
      const int iterations =
          static_cast<int>(std::clamp<int64_t>((int64_t{64} << 20) / size, 1, 32));
      const auto once = [&] { raw_collective(pg, op, full, part); };
      once();  // warm-up: pages, connections
      finish();
      std::vector<double> per_call;
      for (int r = 0; r < rounds; ++r) {
        barrier();
        const auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < iterations; ++i) once();
        finish();
        per_call.push_back(seconds_since(t0) / iterations);
      }
      seconds[{op, size}] = median(per_call);
    }
  }
  return seconds;
}

CollectiveSeconds time_collectives_in_processes(const std::string& backend, int world,
                                                const std::vector<int64_t>& sizes, int rounds,
                                                const std::string& device) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/shardscope-busbw-XXXXXX";
  if (mkdtemp(pattern.data()) == nullptr)
    throw std::runtime_error("busbw: cannot make a temporary folder");
  const std::string dir = pattern;
  std::string size_list;
  for (int64_t s : sizes) size_list += (size_list.empty() ? "" : ",") + std::to_string(s);
  std::vector<pid_t> pids;
  try {
    const std::string exe = worker_executable();
    for (int r = 0; r < world; ++r) {
      pids.push_back(
          start_rank(exe, {exe, "perf-busbw-rank", "--rank", std::to_string(r), "--world",
                           std::to_string(world), "--backend", backend, "--dir", dir, "--sizes",
                           size_list, "--rounds", std::to_string(rounds), "--device", device}));
    }
    wait_for_ranks(pids, std::chrono::seconds(600));
    std::ifstream in(dir + "/result.json");
    const auto rows = nlohmann::json::parse(in);
    CollectiveSeconds seconds;
    for (const auto& row : rows) seconds[{row.at("op"), row.at("size")}] = row.at("seconds");
    remove_directory_of_files(dir);
    return seconds;
  } catch (...) {
    kill_remaining(pids);
    remove_directory_of_files(dir);
    throw;
  }
}

int busbw_rank_main(const BusbwRankArgs& args) {
  prepare_process_for_groups();
  ProcessGroupSpec spec;
  spec.backend = args.backend;
  spec.rank = args.rank;
  spec.world = args.world;
  spec.timeout = std::chrono::minutes(5);
  spec.store = c10::make_intrusive<c10d::FileStore>(args.dir + "/store", args.world);
  auto pg = make_process_group(spec);
  // One rank a process: ProcessGroup::barrier is safe here.
  const auto barrier = [&] { pg->barrier()->wait(); };
  const CollectiveSeconds seconds =
      time_collectives(*pg, args.world, args.sizes, args.rounds, barrier, c10::Device(args.device));
  if (args.rank == 0) {
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& [key, s] : seconds)
      rows.push_back({{"op", key.first}, {"size", key.second}, {"seconds", s}});
    const std::string part = args.dir + "/result.json.part";
    std::ofstream(part) << rows.dump();
    if (std::rename(part.c_str(), (args.dir + "/result.json").c_str()) != 0)
      throw std::runtime_error("busbw: cannot write " + args.dir + "/result.json");
  }
  barrier();  // no rank leaves while another still times
  return 0;
}

}  // namespace shardscope::perf
