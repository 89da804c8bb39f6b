#include "profiling/io/kineto_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <set>

#include "profiling/io/kineto_scan.h"
#include "profiling/io/trace_io.h"
#include "profiling/record/device_tracer.h"

namespace shardscope::profiling {
namespace {

namespace fs = std::filesystem;

bool starts_with(const std::string& s, std::string_view prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool is_device_event(const Raw& r) {
  return r.cat == "kernel" || r.cat == "gpu_memcpy" || r.cat == "gpu_memset";
}

bool is_nccl_kernel(const Raw& r) {
  std::string lower = r.name;
  std::transform(lower.begin(), lower.end(), lower.begin(), ::tolower);
  return r.cat == "kernel" && lower.find("nccl") != std::string::npos;
}

// gloo:all_reduce, nccl:all_reduce: the collective a backend ran, from its start to its end.
bool is_backend_collective(const Raw& r) {
  return starts_with(r.name, "gloo:") || starts_with(r.name, "nccl:");
}

// The operation a collective event names: "all_reduce" of gloo:all_reduce or of an NCCL kernel
// (ncclDevKernel_AllReduce_Sum_f32_RING_LL).
std::string collective_op(const Raw& r) {
  if (!r.collective.empty()) {
    // PyTorch's names for c10d's calls, as our traces name the operations.
    static const std::map<std::string, std::string> kCalls = {
        {"allreduce", "all_reduce"},
        {"allreduce_coalesced", "all_reduce"},
        {"allgather", "all_gather"},
        {"_allgather_base", "all_gather_into"},
        {"all_gather_into_tensor_coalesced", "all_gather_into"},
        {"reduce_scatter", "reduce_scatter"},
        {"_reduce_scatter_base", "reduce_scatter_tensor"},
        {"reduce_scatter_tensor_coalesced", "reduce_scatter_tensor"},
        {"alltoall", "all_to_all"},
        {"alltoall_base", "all_to_all"}};
    const auto it = kCalls.find(r.collective);
    return it != kCalls.end() ? it->second : r.collective;
  }
  if (is_backend_collective(r)) return r.name.substr(5);
  static const std::pair<const char*, const char*> kKernels[] = {
      {"AllReduce", "all_reduce"},
      {"AllGather", "all_gather_into"},
      {"ReduceScatter", "reduce_scatter_tensor"},
      {"Broadcast", "broadcast"},
      {"Reduce", "reduce"},
      {"SendRecv", "send"},
      {"AllToAll", "all_to_all"}};
  for (const auto& [kernel, op] : kKernels)
    if (r.name.find(kernel) != std::string::npos) return op;
  return "collective";
}

class RankBuilder {
 public:
  RankBuilder(Trace& trace, const RankFile& file, int64_t origin_ns)
      : trace_(trace), file_(file), origin_ns_(origin_ns) {}

  RankTrace build(int rank) {
    RankTrace out;
    out.rank = rank;
    out.lanes = {"host", "comm"};
    host_ = host_thread();
    std::vector<Event> host_events;
    std::map<uint8_t, std::vector<Event>> thread_events;  // other CPU threads' operators
    std::map<std::string, int64_t> ordinal;  // per group: a collective's order on this rank
    std::map<std::pair<int, bool>, int64_t> p2p_ordinal;  // per peer and direction
    int last_peer = -1;  // of the latest c10d::send or recv_: gloo:send and gloo:recv follow it
    for (const Raw& r : file_.events) {
      if (r.peer >= 0 && (starts_with(r.name, "c10d::send") || starts_with(r.name, "c10d::recv")))
        last_peer = r.peer;
      if (r.name == "[memory]") {
        if (r.allocated >= 0)
          out.counters.push_back({ns(r.ts_us), r.allocated, MemoryKind::kAllocated});
        continue;
      }
      Event e;
      e.t0_ns = ns(r.ts_us);
      e.t1_ns = e.t0_ns + std::max<int64_t>(0, std::llround(r.dur_us * 1000));
      e.name = trace_.intern(r.name);
      if (is_backend_collective(r) || is_nccl_kernel(r)) {
        const std::string group = r.group.empty() ? file_.default_group : r.group;
        e.category = Category::kCollective;
        // An NCCL kernel stays on its stream; the host's call of a collective is the comm lane.
        e.lane = is_nccl_kernel(r) ? lane_of(out, r) : uint8_t(kCommLane);
        e.name = trace_.intern(collective_op(r));
        e.group = trace_.intern(group);
        const std::string op = collective_op(r);
        if ((op == "send" || op == "recv") && last_peer >= 0) {
          // A send and its receive pair up by their order between the two ranks.
          e.peer = int16_t(last_peer);
          e.seq = p2p_ordinal[{last_peer, op == "send"}]++;
        } else {
          e.seq = r.seq >= 0 ? r.seq : ordinal[group]++;
        }
        e.bytes = r.bytes;
        e.group_size =
            int16_t(std::clamp<int64_t>(r.group_size > 0 ? r.group_size : file_.world, 0, 32767));
        out.events.push_back(e);
        continue;
      }
      e.lane = lane_of(out, r);
      if (is_device_event(r)) {
        e.category = r.cat == "kernel" ? Category::kKernel : Category::kMemcpy;
        e.seq = r.correlation;
        if (e.category == Category::kMemcpy) e.bytes = r.bytes;  // what the copy moved
      } else if (r.cat == "cuda_runtime" || r.cat == "cuda_driver") {
        e.seq = r.correlation;
      }
      if (e.lane == kHostLane) {
        host_events.push_back(e);
      } else if (r.cat == "cpu_op" || r.cat == "user_annotation") {
        thread_events[e.lane].push_back(e);
      } else {
        out.events.push_back(e);
      }
    }
    classify_host(host_events, Category::kForward);
    // Other threads' operators (autograd's device thread runs a GPU's backward) are backward or
    // optimizer inside PyTorch's spans of them; anything else there is no phase of the step.
    for (auto& [lane, events] : thread_events) {
      classify_host(events, Category::kOther);
      out.events.insert(out.events.end(), events.begin(), events.end());
    }
    // Every other lane's events belong to the step whose window they start in.
    std::vector<std::pair<int64_t, const Event*>> steps;
    for (const Event& e : host_events)
      if (e.category == Category::kStep) steps.push_back({e.t0_ns, &e});
    std::sort(steps.begin(), steps.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    for (Event& e : out.events) {
      auto it = std::upper_bound(steps.begin(), steps.end(), e.t0_ns,
                                 [](int64_t t, const auto& s) { return t < s.first; });
      if (it != steps.begin() && e.t0_ns < std::prev(it)->second->t1_ns)
        e.step = std::prev(it)->second->step;
    }
    out.events.insert(out.events.end(), host_events.begin(), host_events.end());
    std::sort(out.counters.begin(), out.counters.end(),
              [](const CounterSample& a, const CounterSample& b) { return a.t_ns < b.t_ns; });
    return out;
  }

 private:
  int64_t ns(double us) const { return std::llround(us * 1000) + file_.base_ns - origin_ns_; }

  // The thread that runs the profiler's steps; else the one with the most operators.
  std::pair<std::string, std::string> host_thread() const {
    std::map<std::pair<std::string, std::string>, int> count;
    for (const Raw& r : file_.events) {
      if (starts_with(r.name, "ProfilerStep#")) return {r.pid, r.tid};
      if (r.cat == "cpu_op") ++count[{r.pid, r.tid}];
    }
    std::pair<std::string, std::string> best;
    int most = -1;
    for (const auto& [thread, n] : count) {
      if (n > most) most = n, best = thread;
    }
    return best;
  }

  uint8_t lane_of(RankTrace& out, const Raw& r) {
    // The runtime calls that launch kernels get a lane of their own, as in our CUPTI traces,
    // where a kernel finds its launch by correlation id (device_work).
    const bool runtime = r.cat == "cuda_runtime" || r.cat == "cuda_driver";
    // A GPU annotation (the profiler's step, DDP's phases) spans many kernels of its stream: on
    // a lane of its own, not over the kernels.
    const bool gpu_annotation = r.cat == "gpu_user_annotation";
    const std::pair<std::string, std::string> thread =
        runtime          ? std::pair<std::string, std::string>{"", kCudaRuntimeLane}
        : gpu_annotation ? std::pair<std::string, std::string>{"", "gpu annotations"}
                         : std::pair<std::string, std::string>{r.pid, r.tid};
    if (thread == host_) return kHostLane;
    if (auto it = lanes_.find(thread); it != lanes_.end()) return it->second;
    if (out.lanes.size() >= 255) return uint8_t(out.lanes.size() - 1);  // the last takes the rest
    std::string name;
    if (runtime || gpu_annotation) {
      name = thread.second;
    } else if (is_device_event(r)) {
      name = "stream " + r.tid;
    } else if (auto it = file_.thread_names.find(thread); it != file_.thread_names.end()) {
      name = it->second;
    } else {
      name = "thread " + r.tid;
    }
    out.lanes.push_back(out.lanes.size() == 254 ? "other threads" : name);
    return lanes_[thread] = uint8_t(out.lanes.size() - 1);
  }

  // A thread's spans nest: a step holds operators, backward's evaluate_function and the
  // optimizer's step hold theirs. Only the innermost operators compute; a span that holds others
  // also holds the time its thread waited in between (for a collective, say), so it is drawn
  // but not counted as compute. An innermost operator is backward inside evaluate_function,
  // optimizer inside Optimizer.*, and `outside_phases` otherwise (forward on the host thread).
  void classify_host(std::vector<Event>& events, Category outside_phases) {
    std::sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
      return a.t0_ns != b.t0_ns ? a.t0_ns < b.t0_ns : a.t1_ns > b.t1_ns;
    });
    std::vector<const Event*> open;  // enclosing spans, outermost first
    for (size_t i = 0; i < events.size(); ++i) {
      Event& e = events[i];
      while (!open.empty() && open.back()->t1_ns <= e.t0_ns) open.pop_back();
      const std::string& name = trace_.str(e.name);
      Category phase = outside_phases;
      int step = -1;
      for (const Event* o : open) {
        const std::string& outer = trace_.str(o->name);
        if (o->category == Category::kStep) step = o->step;
        if (starts_with(outer, "autograd::engine::evaluate_function")) phase = Category::kBackward;
        if (starts_with(outer, "Optimizer.")) phase = Category::kOptimizer;
      }
      const bool holds_others = i + 1 < events.size() && events[i + 1].t0_ns < e.t1_ns;
      if (starts_with(name, "ProfilerStep#")) {
        e.category = Category::kStep;
        try {
          e.step = std::stoi(name.substr(13));
        } catch (const std::exception&) {
        }
      } else {
        e.category = holds_others || e.t1_ns <= e.t0_ns ? Category::kOther : phase;
        e.step = step;
      }
      if (e.t1_ns > e.t0_ns) open.push_back(&e);
    }
  }

  Trace& trace_;
  const RankFile& file_;
  int64_t origin_ns_;
  std::pair<std::string, std::string> host_;
  std::map<std::pair<std::string, std::string>, uint8_t> lanes_;
};

}  // namespace

bool looks_like_kineto(const std::string& text) {
  const std::string head = text.substr(0, 1 << 16);
  return head.find("\"schemaVersion\"") != std::string::npos ||
         head.find("\"distributedInfo\"") != std::string::npos ||
         head.find("\"deviceProperties\"") != std::string::npos;
}

std::vector<std::string> kineto_files_in(const std::string& directory) {
  std::vector<std::string> files;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(directory, ec)) {
    const std::string name = entry.path().filename().string();
    const bool json = name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0;
    const bool gz = name.size() > 8 && name.compare(name.size() - 8, 8, ".json.gz") == 0;
    if ((json || gz) && entry.is_regular_file(ec)) files.push_back(entry.path().string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

namespace {

Trace assemble(const std::vector<RankFile>& files, const std::vector<std::string>& paths);

}  // namespace

Trace read_kineto_files(const std::vector<std::string>& paths) {
  if (paths.empty()) throw TraceFormatError("no Kineto trace files given");
  std::vector<RankFile> files;
  for (const auto& path : paths) files.push_back(scan_kineto_file(path, nullptr));
  return assemble(files, paths);
}

Trace read_kineto_text(const std::string& path, const std::string& text) {
  return assemble({scan_kineto_file(path, &text)}, {path});
}

namespace {

// A file's events' span on the shared clock, in ns: {first start, last end}; {0, 0} when empty.
std::pair<int64_t, int64_t> span_ns(const RankFile& f) {
  double first = 0, last = 0;
  bool any = false;
  for (const Raw& r : f.events) {
    first = any ? std::min(first, r.ts_us) : r.ts_us;
    last =
        any ? std::max(last, r.ts_us + std::max(0.0, r.dur_us)) : r.ts_us + std::max(0.0, r.dur_us);
    any = true;
  }
  if (!any) return {0, 0};
  return {std::llround(first * 1000) + f.base_ns, std::llround(last * 1000) + f.base_ns};
}

// Several files are the ranks of one job: the same world and backend where they say them, each
// rank below that world, and their profiled windows close in time. Files of two jobs were once
// drawn as one run, their collectives matched across jobs.
void check_one_job(const std::vector<RankFile>& files, const std::vector<std::string>& paths) {
  constexpr int64_t kFarApartNs = int64_t{600} * 1000 * 1000 * 1000;  // ten minutes
  const auto differ = [&](size_t a, size_t b, const std::string& what) {
    throw TraceFormatError(paths[a] + " and " + paths[b] + " are not ranks of one job: " + what +
                           " (give the profiler's files of one run, one a rank)");
  };
  for (size_t i = 0; i < files.size(); ++i) {
    const RankFile& f = files[i];
    if (f.world > 0 && f.rank >= f.world)
      throw TraceFormatError(paths[i] + " says rank " + std::to_string(f.rank) + " of world size " +
                             std::to_string(f.world));
    for (size_t j = 0; j < i; ++j) {
      const RankFile& g = files[j];
      if (f.world > 0 && g.world > 0 && f.world != g.world)
        differ(j, i, "world sizes " + std::to_string(g.world) + " and " + std::to_string(f.world));
      if (!f.backend.empty() && !g.backend.empty() && f.backend != g.backend)
        differ(j, i, "backends " + g.backend + " and " + f.backend);
      const auto [f0, f1] = span_ns(f);
      const auto [g0, g1] = span_ns(g);
      if (f1 > f0 && g1 > g0 && (f0 > g1 + kFarApartNs || g0 > f1 + kFarApartNs)) {
        const double minutes = double(f0 > g1 ? f0 - g1 : g0 - f1) / 60e9;
        char gap[64];
        std::snprintf(gap, sizeof gap, "%.0f minutes", minutes);
        differ(j, i, std::string("profiled ") + gap + " apart");
      }
    }
  }
}

// The ranks of one job number each group's collectives alike: the same (group, sequence number)
// is the same collective on every rank. Files whose numbers name different collectives, or whose
// collectives in a group they share never meet, are of different jobs.
void check_collectives_agree(const Trace& trace, const std::vector<std::string>& rank_paths) {
  struct Seen {
    size_t rank;
    uint32_t name;
  };
  std::map<std::pair<uint32_t, int64_t>, Seen> first;
  std::map<uint32_t, std::vector<size_t>> ranks_of_group;
  std::map<std::pair<uint32_t, size_t>, bool> met;  // (group, rank): shares a collective
  std::map<uint32_t, int> group_sizes;
  std::set<std::pair<size_t, size_t>> talks;  // (rank, peer) of point-to-point calls
  for (size_t r = 0; r < trace.ranks.size(); ++r) {
    for (const Event& e : trace.ranks[r].events) {
      if (e.category != Category::kCollective) continue;
      if (e.peer >= 0) talks.emplace(r, size_t(e.peer));
      if (e.seq < 0 || e.peer >= 0) continue;
      group_sizes[e.group] = std::max<int>(group_sizes[e.group], e.group_size);
      auto& group_ranks = ranks_of_group[e.group];
      if (group_ranks.empty() || group_ranks.back() != r) group_ranks.push_back(r);
      const auto [it, fresh] = first.emplace(std::make_pair(e.group, e.seq), Seen{r, e.name});
      if (fresh || it->second.rank == r) continue;
      met[{e.group, r}] = met[{e.group, it->second.rank}] = true;
      if (it->second.name != e.name) {
        throw TraceFormatError(rank_paths[it->second.rank] + " and " + rank_paths[r] +
                               " are not ranks of one job: collective #" + std::to_string(e.seq) +
                               " of group " + trace.str(e.group) + " is " +
                               trace.str(it->second.name) + " in one and " + trace.str(e.name) +
                               " in the other (give the profiler's files of one run, one a rank)");
      }
    }
  }
  const size_t world = trace.ranks.size();
  // A send has its receive: a rank that talks to a peer hears from it in the same window.
  for (const auto& [r, peer] : talks) {
    if (peer < world && talks.count({peer, r}) == 0) {
      throw TraceFormatError(rank_paths[r] + " is not a rank of the job of " + rank_paths[peer] +
                             ": it sends to or receives from rank " + std::to_string(peer) +
                             ", which never answers (give the profiler's files of one run, one a "
                             "rank)");
    }
  }
  for (const auto& [group, ranks] : ranks_of_group) {
    // A group of every rank (each file's default group): each of them calls its collectives.
    if (ranks.size() < world && group_sizes[group] == int(world)) {
      for (size_t r = 0; r < world; ++r) {
        if (std::find(ranks.begin(), ranks.end(), r) != ranks.end()) continue;
        throw TraceFormatError(rank_paths[r] + " is not a rank of the job of " +
                               rank_paths[ranks[0]] + ": it calls none of the collectives of " +
                               "group " + trace.str(group) + ", which spans all " +
                               std::to_string(world) + " ranks (give the profiler's files of one " +
                               "run, one a rank)");
      }
    }
    if (ranks.size() < 2) continue;
    for (size_t r : ranks) {
      if (met.count({group, r}) == 0) {
        throw TraceFormatError(rank_paths[r] + " is not a rank of the job of " +
                               rank_paths[ranks[r == ranks[0] ? 1 : 0]] +
                               ": none of its collectives in group " + trace.str(group) +
                               " is one of theirs (give the profiler's files of one run, one a "
                               "rank)");
      }
    }
  }
}

// The ranks' files as one trace, on one time axis.
Trace assemble(const std::vector<RankFile>& files, const std::vector<std::string>& paths) {
  if (files.size() > 1) check_one_job(files, paths);
  // Ranks: as the files say, else by their place; two files of one rank are an error.
  std::map<int, size_t> by_rank;
  for (size_t i = 0; i < files.size(); ++i) {
    const int rank = files[i].rank >= 0 ? files[i].rank : int(i);
    if (!by_rank.emplace(rank, i).second)
      throw TraceFormatError(paths[i] + " and " + paths[by_rank[rank]] + " are both rank " +
                             std::to_string(rank));
  }
  int64_t origin = INT64_MAX;
  for (const RankFile& f : files) {
    for (const Raw& r : f.events)
      origin = std::min<int64_t>(origin, std::llround(r.ts_us * 1000) + f.base_ns);
  }
  if (origin == INT64_MAX) origin = 0;
  // On a whole microsecond, so that a time's microseconds here are the file's (Holistic Trace
  // Analysis rounds on that grid; see window_metrics).
  origin -= ((origin % 1000) + 1000) % 1000;
  Trace trace;
  trace.run.world = int(files.size());
  trace.run.mode = kProfilerMode;
  trace.run.backend = files.front().backend;
  bool gpu = false;
  for (const RankFile& f : files)
    for (const Raw& r : f.events) gpu |= is_device_event(r);
  trace.run.device = gpu ? "cuda" : "cpu";
  for (const RankFile& f : files) {
    if (gpu && !f.device_name.empty()) {
      trace.run.device_name = f.device_name;
      break;
    }
  }
  int index = 0;
  std::vector<std::string> rank_paths;
  for (const auto& [rank, i] : by_rank) {
    RankBuilder builder(trace, files[i], origin);
    trace.ranks.push_back(builder.build(index++));
    rank_paths.push_back(paths[i]);
    (void)rank;
  }
  trace.normalise();
  if (trace.ranks.size() > 1) check_collectives_agree(trace, rank_paths);
  return trace;
}

}  // namespace

}  // namespace shardscope::profiling
