#include "profiling/trace/device_work.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "profiling/record/device_tracer.h"

namespace shardscope::profiling {
namespace {

// Holistic Trace Analysis's rule for a communication kernel: the name matches ^nccl.*Kernel.
bool is_nccl_kernel(const std::string& name) {
  return name.rfind("nccl", 0) == 0 && name.find("Kernel", 4) != std::string::npos;
}

// "stream 7" -> 7; -1 for any other lane.
int stream_of_lane(const std::string& lane) {
  const std::string prefix = "stream ";
  if (lane.rfind(prefix, 0) != 0) return -1;
  try {
    return std::stoi(lane.substr(prefix.size()));
  } catch (const std::exception&) {
    return -1;
  }
}

// Puts each piece of work on the first stream of `first`, `first + 1`, ... that is free at its
// start, so concurrent work (buckets of all-reduces in flight together, nested spans) never
// shares a stream. `work` is sorted by start.
void assign_streams(std::vector<DeviceWork*>& work, int first) {
  std::vector<int64_t> busy_until;
  for (DeviceWork* w : work) {
    size_t s = 0;
    while (s < busy_until.size() && busy_until[s] > w->t0_ns) ++s;
    if (s == busy_until.size()) busy_until.push_back(0);
    busy_until[s] = w->t1_ns;
    w->stream = first + static_cast<int>(s);
  }
}

}  // namespace

std::vector<int> measured_steps(const Trace& trace, const RankTrace& rank) {
  std::set<int> steps;
  for (const auto& e : rank.events) {
    if (e.step >= 0) steps.insert(e.step);
  }
  std::vector<int> out(steps.begin(), steps.end());
  if (out.size() > 1 && first_step_is_warm_up(trace)) out.erase(out.begin());
  return out;
}

bool first_step_is_warm_up(const Trace& trace) {
  return trace.run.mode != kProfilerMode;
}

std::vector<StepWindow> measured_step_windows(const Trace& trace, const RankTrace& rank) {
  const std::vector<int> steps = measured_steps(trace, rank);
  std::map<int, StepWindow> windows;
  for (const auto& e : rank.events) {
    if (!std::binary_search(steps.begin(), steps.end(), e.step)) continue;
    auto [it, fresh] = windows.try_emplace(e.step, StepWindow{e.step, e.t0_ns, e.t1_ns});
    it->second.t0_ns = std::min(it->second.t0_ns, e.t0_ns);
    it->second.t1_ns = std::max(it->second.t1_ns, e.t1_ns);
  }
  std::vector<StepWindow> out;
  for (const auto& [step, w] : windows) out.push_back(w);
  return out;
}

std::vector<DeviceWork> device_work(const Trace& trace, const RankTrace& rank) {
  const std::vector<int> steps = measured_steps(trace, rank);
  const std::vector<StepWindow> windows = measured_step_windows(trace, rank);
  auto measured = [&](int step) { return std::binary_search(steps.begin(), steps.end(), step); };
  // A device kernel carries no step: it belongs to the step its launch happened in.
  auto step_at = [&](int64_t t) {
    for (const StepWindow& w : windows) {
      if (w.t0_ns <= t && t <= w.t1_ns) return w.step;
    }
    return -1;
  };

  bool on_gpu = false, nccl_kernels = false;
  int64_t last_correlation = 0;
  // A profiler trace's NCCL kernel is read as a collective (so it links across ranks) on its own
  // stream's lane: a communication kernel that was recorded.
  auto recorded_collective = [&](const Event& e) {
    return e.category == Category::kCollective && e.lane < rank.lanes.size() &&
           stream_of_lane(rank.lanes[e.lane]) >= 0;
  };
  std::map<int64_t, const Event*> launches;  // correlation id -> runtime call
  for (const auto& e : rank.events) {
    const std::string& lane = e.lane < rank.lanes.size() ? rank.lanes[e.lane] : std::string();
    if (e.category == Category::kKernel) {
      on_gpu = true;
      nccl_kernels = nccl_kernels || is_nccl_kernel(trace.str(e.name));
    }
    nccl_kernels = nccl_kernels || recorded_collective(e);
    if (e.category == Category::kKernel || e.category == Category::kMemcpy ||
        lane == kCudaRuntimeLane) {
      last_correlation = std::max(last_correlation, e.seq);
    }
    if (lane == kCudaRuntimeLane && e.seq >= 0) launches.emplace(e.seq, &e);
  }

  // A PyTorch profiler's GPU trace is read as Holistic Trace Analysis reads it: the kernels,
  // copies and memsets on its streams and nothing else. Gloo's collectives there run on the host
  // (no kernel), so none is implied.
  const bool recorded_only = on_gpu && trace.run.mode == kProfilerMode;
  std::vector<DeviceWork> out;
  for (const auto& e : rank.events) {
    DeviceWork w;
    w.event = &e;
    w.t0_ns = e.t0_ns;
    w.t1_ns = std::max(e.t0_ns, e.t1_ns);
    if (e.category == Category::kKernel || e.category == Category::kMemcpy) {
      const int stream = e.lane < rank.lanes.size() ? stream_of_lane(rank.lanes[e.lane]) : -1;
      if (stream < 0) continue;
      auto launch = launches.find(e.seq);
      w.launch = launch != launches.end() ? launch->second : nullptr;
      w.step = step_at(w.launch_ns());
      if (!measured(w.step)) continue;
      w.stream = stream;
      w.correlation = e.seq;
      w.kind = e.category == Category::kMemcpy     ? WorkKind::kMemory
               : is_nccl_kernel(trace.str(e.name)) ? WorkKind::kCommunication
                                                   : WorkKind::kCompute;
    } else if (recorded_collective(e)) {
      w.step = step_at(w.t0_ns);  // its launch is not linked: it carries the collective's number
      if (!measured(w.step)) continue;
      w.stream = stream_of_lane(rank.lanes[e.lane]);
      w.correlation = -1;
      w.recorded = true;
      w.kind = WorkKind::kCommunication;
    } else if (!recorded_only && ((is_compute(e.category) && !on_gpu) ||
                                  (is_communication(e.category) && !nccl_kernels))) {
      if (!measured(e.step)) continue;
      w.step = e.step;
      w.correlation = -1;  // numbered below, in time order
      w.kind = is_compute(e.category) ? WorkKind::kCompute : WorkKind::kCommunication;
    } else {
      continue;
    }
    out.push_back(w);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const DeviceWork& a, const DeviceWork& b) { return a.t0_ns < b.t0_ns; });
  std::vector<DeviceWork*> implied_compute, implied_comm;
  for (auto& w : out) {
    // A trace recorded before correlation ids were kept has -1 on its kernels too.
    if (w.correlation < 0) w.correlation = ++last_correlation;
    const bool recorded = w.recorded || w.event->category == Category::kKernel ||
                          w.event->category == Category::kMemcpy;
    if (!recorded) (w.kind == WorkKind::kCompute ? implied_compute : implied_comm).push_back(&w);
  }
  assign_streams(implied_compute, kFirstComputeStream);
  assign_streams(implied_comm, kFirstCommStream);
  return out;
}

}  // namespace shardscope::profiling
