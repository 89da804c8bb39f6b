// Kineto (PyTorch profiler) JSON of one rank, for Holistic Trace Analysis.
#include "profiling/io/kineto_trace.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <set>

#include <nlohmann/json.hpp>

#include "profiling/trace/device_work.h"

namespace shardscope::profiling {
namespace {

// A process id for the host side, apart from the device's (the rank's device index), as an OS
// pid and a GPU index are apart in a PyTorch trace.
constexpr int kHostPidBase = 100000;
constexpr int kHostTid = 1;

std::string quoted(const std::string& s) {
  return nlohmann::json(s).dump();
}

// "all_reduce" -> "AllReduce": NCCL's kernel names, which HTA classifies as communication.
std::string nccl_kernel_name(const std::string& op) {
  std::string name = "ncclDevKernel_";
  bool upper = true;
  for (char c : op) {
    if (c == '_' || c == ' ') {
      upper = true;
      continue;
    }
    name += upper ? static_cast<char>(std::toupper(static_cast<unsigned char>(c))) : c;
    upper = false;
  }
  return name;
}

// HTA classifies copies by their Kineto names (^Memcpy, ^Memset).
std::string memory_kernel_name(const std::string& name) {
  return name.rfind("memset", 0) == 0 ? "Memset" : name.rfind("Mem", 0) == 0 ? name : "Memcpy";
}

class KinetoWriter {
 public:
  explicit KinetoWriter(int64_t origin_ns) : origin_ns_(origin_ns) {}

  // Microseconds, rounded: start and end each to the nearest, so lengths are unbiased and work
  // that follows other work on a stream still does not overlap it.
  int64_t us(int64_t ns) const { return std::llround((ns - origin_ns_) / 1000.0); }

  // A complete ("X") event; `args` is the inside of the args object, or empty.
  void complete(const std::string& cat, const std::string& name, int pid, int tid, int64_t t0_ns,
                int64_t t1_ns, const std::string& args) {
    const int64_t ts = us(t0_ns);
    const int64_t dur = std::max<int64_t>(0, us(std::max(t0_ns, t1_ns)) - ts);
    text_ += first_ ? "\n" : ",\n";
    first_ = false;
    text_ += "  {\"ph\": \"X\", \"cat\": " + quoted(cat) + ", \"name\": " + quoted(name) +
             ", \"pid\": " + std::to_string(pid) + ", \"tid\": " + std::to_string(tid) +
             ", \"ts\": " + std::to_string(ts) + ", \"dur\": " + std::to_string(dur);
    if (!args.empty()) text_ += ", \"args\": {" + args + "}";
    text_ += "}";
  }

  // A metadata ("M") event naming a process or thread for trace viewers.
  void name(const char* what, int pid, int tid, const std::string& name) {
    text_ += first_ ? "\n" : ",\n";
    first_ = false;
    text_ += "  {\"ph\": \"M\", \"name\": \"" + std::string(what) +
             "\", \"pid\": " + std::to_string(pid) + ", \"tid\": " + std::to_string(tid) +
             ", \"ts\": 0, \"args\": {\"name\": " + quoted(name) + "}}";
  }

  std::string& text() { return text_; }

 private:
  int64_t origin_ns_;
  std::string text_;
  bool first_ = true;
};

int64_t earliest_time(const Trace& trace) {
  int64_t origin = INT64_MAX;
  for (const auto& r : trace.ranks) {
    for (const auto& e : r.events) origin = std::min(origin, e.t0_ns);
  }
  return origin == INT64_MAX ? 0 : origin;
}

}  // namespace

std::string kineto_file_name(int rank) {
  return "rank-" + std::to_string(rank) + ".json";
}

std::string to_kineto_json(const Trace& trace, const RankTrace& rank) {
  const std::string& backend = trace.run.backend;
  const int world = trace.run.world > 0 ? trace.run.world : static_cast<int>(trace.ranks.size());
  const int host_pid = kHostPidBase + rank.rank, device_pid = rank.rank;

  // The header first, one key a line: HTA reads the rank from the first line that has one.
  std::string out =
      "{\n  \"schemaVersion\": 1,\n  \"distributedInfo\": {\"backend\": " + quoted(backend) +
      ", \"rank\": " + std::to_string(rank.rank) + ", \"world_size\": " + std::to_string(world) +
      "},\n";
  out += "  \"deviceProperties\": [],\n  \"traceName\": " +
         quoted("shardscope rank " + std::to_string(rank.rank)) + ",\n  \"traceEvents\": [";

  KinetoWriter w(earliest_time(trace));
  w.name("process_name", host_pid, 0, "rank " + std::to_string(rank.rank) + " host");
  w.name("thread_name", host_pid, kHostTid, "host");
  w.name("process_name", device_pid, 0, "rank " + std::to_string(rank.rank) + " device");

  // Each measured step as ProfilerStep#N over its whole window, the host spans inside it.
  for (const StepWindow& step : measured_step_windows(trace, rank)) {
    w.complete("user_annotation", "ProfilerStep#" + std::to_string(step.step), host_pid, kHostTid,
               step.t0_ns, step.t1_ns, "");
  }
  const std::vector<int> steps = measured_steps(trace, rank);
  for (const auto& e : rank.events) {
    if (e.lane != kHostLane || !std::binary_search(steps.begin(), steps.end(), e.step)) continue;
    w.complete("user_annotation", trace.str(e.name), host_pid, kHostTid, e.t0_ns, e.t1_ns,
               "\"category\": " + quoted(category_name(e.category)));
  }

  std::set<int> streams;
  for (const DeviceWork& d : device_work(trace, rank)) {
    const Event& e = *d.event;
    const std::string correlation = "\"correlation\": " + std::to_string(d.correlation);
    // The launch on the host thread: the recorded runtime call, or one at the work's start
    // where the host itself did the work or issued the collective.
    if (d.launch != nullptr) {
      w.complete("cuda_runtime", trace.str(d.launch->name), host_pid, kHostTid, d.launch->t0_ns,
                 d.launch->t1_ns, correlation);
    } else {
      w.complete("cuda_runtime",
                 d.kind == WorkKind::kMemory ? "cudaMemcpyAsync" : "cudaLaunchKernel", host_pid,
                 kHostTid, d.t0_ns, d.t0_ns, correlation);
    }
    std::string name = trace.str(e.name), args = "\"device\": " + std::to_string(device_pid) +
                                                 ", \"stream\": " + std::to_string(d.stream) +
                                                 ", " + correlation;
    if (d.kind == WorkKind::kMemory) {
      name = memory_kernel_name(name);
      if (e.bytes > 0) args += ", \"bytes\": " + std::to_string(e.bytes);
    } else if (d.kind == WorkKind::kCommunication && e.category == Category::kCollective) {
      name = nccl_kernel_name(name);
      args += ", \"Collective name\": " + quoted(trace.str(e.name)) +
              ", \"Process Group Name\": " + quoted(trace.str(e.group)) +
              ", \"Group size\": " + std::to_string(e.group_size) +
              ", \"bytes\": " + std::to_string(e.bytes) + ", \"seq\": " + std::to_string(e.seq);
    }
    w.complete(d.kind == WorkKind::kMemory ? "gpu_memcpy" : "kernel", name, device_pid, d.stream,
               d.t0_ns, d.t1_ns, args);
    streams.insert(d.stream);
  }
  for (int s : streams) w.name("thread_name", device_pid, s, "stream " + std::to_string(s));

  out += w.text();
  out += "\n  ],\n  \"displayTimeUnit\": \"ms\"\n}\n";
  return out;
}

}  // namespace shardscope::profiling
