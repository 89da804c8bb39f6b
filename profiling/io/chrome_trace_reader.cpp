// Chrome Trace Event Format: the reader, of what chrome_trace.cpp writes now and wrote before.
// chrome_json_scan.cpp parses the file (simdjson, a batch of events at a time); this file
// makes a trace of its events.
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string_view>
#include <type_traits>
#include <utility>

#include "profiling/io/chrome_format.h"
#include "profiling/io/chrome_json_scan.h"
#include "profiling/io/trace_io.h"
#include "profiling/trace/run_record_json.h"

namespace shardscope::profiling {
namespace {

using chrome_format::kMaxRank;
using chrome_format::kMemoryPrefix;
using nlohmann::json;
using simdjson::dom::element;
using simdjson::dom::element_type;

int64_t to_ns(double us, int64_t origin) {
  return origin + std::llround(us * 1000.0);
}

// A float as the integer T, if it is one T can hold: a float too large for an integer field is
// undefined behaviour in a plain cast (the fuzzer found one).
template <typename T>
bool float_to(double d, T* out) {
  using limits = std::numeric_limits<T>;
  // The first value past the top is a power of two, exact as a double (max is not).
  const double past_max = 2.0 * static_cast<double>(limits::max() / 2 + 1);
  if (!std::isfinite(d) || d < static_cast<double>(limits::min()) || d >= past_max) return false;
  *out = static_cast<T>(d);
  return true;
}

// A JSON value as T (a signed integer, a float or a string), or false. Integers are
// range-checked: one too large for a narrow field would wrap.
template <typename T>
bool convert(element v, T* out) {
  if constexpr (std::is_integral_v<T>) {
    static_assert(std::is_signed_v<T>, "the fields read are signed");
    using limits = std::numeric_limits<T>;
    switch (v.type()) {
      case element_type::INT64: {
        const int64_t i = v.get_int64().value_unsafe();
        if (i < int64_t{limits::min()} || i > int64_t{limits::max()}) return false;
        *out = static_cast<T>(i);
        return true;
      }
      case element_type::UINT64:  // past INT64_MAX, so past every signed field
        return false;
      case element_type::DOUBLE:
        return float_to(v.get_double().value_unsafe(), out);
      default:
        return false;
    }
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) return false;
    *out = static_cast<T>(v.get_double().value_unsafe());
    return true;
  } else {
    std::string_view s;
    if (v.get(s)) return false;
    *out = T(s);
    return true;
  }
}

// The members of one JSON object that the reader looks at, found in one pass; of a name given
// twice the last counts (as it did when nlohmann read the object).
template <size_t N>
struct Members {
  const std::array<const char*, N>* keys;
  std::array<bool, N> found{};
  std::array<element, N> value{};

  explicit Members(const std::array<const char*, N>& names) : keys(&names) {}  // no object
  Members(const std::array<const char*, N>& names, element v) : keys(&names) {
    simdjson::dom::object object;
    if (!v.get(object)) read(object);
  }
  Members(const std::array<const char*, N>& names, simdjson::dom::object object) : keys(&names) {
    read(object);
  }
  void read(simdjson::dom::object object) {
    for (const simdjson::dom::key_value_pair field : object) {
      for (size_t k = 0; k < N; ++k) {
        if (field.key == (*keys)[k]) {
          found[k] = true;
          value[k] = field.value;
          break;
        }
      }
    }
  }
  const char* name(size_t k) const { return (*keys)[k]; }
};

// Why a field's value is not a T: a number too large for it (`"peer": 99999` for a rank), or
// something else than a number where one belongs.
template <typename T, size_t N>
TraceFormatError unconvertible(const Members<N>& object, size_t k, const char* where) {
  const std::string field = std::string(where) + ": field '" + object.name(k) + "'";
  if (!std::is_arithmetic_v<T> || !object.value[k].is_number())
    return TraceFormatError(field + " has the wrong type");
  return TraceFormatError(field + " is out of range (" +
                          simdjson::minify(object.value[k]).substr(0, 40) + ")");
}

template <typename T, size_t N>
T field(const Members<N>& object, size_t k, const char* where) {
  if (!object.found[k]) {
    throw TraceFormatError(std::string(where) + ": missing field '" + object.name(k) + "'");
  }
  T value{};
  if (!convert(object.value[k], &value)) throw unconvertible<T>(object, k, where);
  return value;
}

template <typename T, size_t N>
T optional_field(const Members<N>& object, size_t k, T fallback) {
  if (!object.found[k] || object.value[k].is_null()) return fallback;
  T value{};
  if (!convert(object.value[k], &value)) throw unconvertible<T>(object, k, "trace event");
  return value;
}

template <size_t N>
element object_field(const Members<N>& object, size_t k, const char* where) {
  if (!object.found[k]) {
    throw TraceFormatError(std::string(where) + ": missing field '" + object.name(k) + "'");
  }
  return object.value[k];
}

// The keys of an event, and of its args.
enum EventKey : size_t { kPh, kName, kPid, kTid, kTs, kDur, kCat, kArgs };
constexpr std::array<const char*, 8> kEventKeys = {"ph", "name", "pid", "tid",
                                                   "ts", "dur",  "cat", "args"};
enum ArgKey : size_t {
  kStep,
  kMicro,
  kBytes,
  kSeq,
  kPeer,
  kGroupSize,
  kGroup,
  kRank,
  kArgName,
  kLane,
  kLaneName,
  kOffCpuUs
};
constexpr std::array<const char*, 12> kArgKeys = {"step", "micro",      "bytes",     "seq",
                                                  "peer", "group_size", "group",     "rank",
                                                  "name", "lane",       "lane_name", "off_cpu_us"};
using EventMembers = Members<kEventKeys.size()>;
using ArgMembers = Members<kArgKeys.size()>;

// otherData's origin_ns (nlohmann's reading of it, see chrome_json_scan.h).
int64_t origin_of(const json& other) {
  auto it = other.find("origin_ns");
  if (it == other.end() || it->is_null()) return 0;
  int64_t origin = 0;
  bool ok = false;
  if (it->is_number_unsigned()) {
    ok = it->get<uint64_t>() <= uint64_t{std::numeric_limits<int64_t>::max()};
    if (ok) origin = it->get<int64_t>();
  } else if (it->is_number_integer()) {
    ok = true;
    origin = it->get<int64_t>();
  } else if (it->is_number_float()) {
    ok = float_to(it->get<double>(), &origin);
  }
  if (!ok) throw TraceFormatError("trace event: field 'origin_ns' has the wrong type");
  return origin;
}

// otherData's format: "shardscope" for ours.
std::string format_of(const json& other) {
  auto it = other.find("format");
  if (it == other.end() || it->is_null()) return "";
  if (!it->is_string()) throw TraceFormatError("trace event: field 'format' has the wrong type");
  return it->get<std::string>();
}

// Ids given to processes and threads named by text, past any numeric id a file uses.
constexpr int kNamedIdBase = 1 << 30;

RankTrace& rank_of(Trace& trace, std::map<int, size_t>& index, int pid) {
  // How large a pid may be is decided once the file says whose it is (resolve_lanes_and_ranks).
  if (pid < 0) throw TraceFormatError("trace event: pid out of range");
  auto [it, inserted] = index.emplace(pid, trace.ranks.size());
  if (inserted) {
    trace.ranks.emplace_back();
    trace.ranks.back().rank = pid;
  }
  return trace.ranks[it->second];
}

// A thread as its metadata describes it. Files from before the comm lane was split into slots
// have no lane: their tid is the lane.
struct ThreadMeta {
  int lane = -1;
  std::string name;
  std::string lane_name;
};

// A file another tool wrote (PyTorch's profiler, Perfetto): its pids are process ids and its tids
// thread ids, often past our limits on ranks and lanes. Each process becomes a rank (numbered
// after the others when its pid is too large to be one) and each of its threads a lane, in
// thread id order.
void number_foreign_lanes_and_ranks(Trace& trace, const std::map<int, size_t>& index,
                                    const std::map<std::pair<int, int>, ThreadMeta>& threads,
                                    const std::vector<std::vector<int>>& tids) {
  int next_rank = 0;
  for (const auto& [pid, at] : index) {
    if (pid <= kMaxRank) next_rank = std::max(next_rank, pid + 1);
  }
  for (const auto& [pid, at] : index) {
    RankTrace& r = trace.ranks[at];
    if (pid > kMaxRank) r.rank = next_rank++;
    std::set<int> used;
    if (at < tids.size()) used.insert(tids[at].begin(), tids[at].end());
    for (const auto& [key, meta] : threads) {
      if (key.first == pid) used.insert(key.second);
    }
    if (used.size() > 256) {
      throw TraceFormatError("more than 256 threads in process " + std::to_string(pid));
    }
    std::map<int, int> lane_of;
    r.lanes.clear();
    for (int tid : used) {
      lane_of[tid] = static_cast<int>(r.lanes.size());
      auto meta = threads.find({pid, tid});
      r.lanes.push_back(meta != threads.end() && !meta->second.name.empty()
                            ? meta->second.name
                            : "thread " + std::to_string(tid));
    }
    if (at >= tids.size()) continue;
    for (size_t i = 0; i < r.events.size(); ++i) {
      r.events[i].lane = static_cast<uint8_t>(lane_of.at(tids[at][i]));
    }
  }
}

// Whether a file that does not say it is ours has pids or tids past what ours can hold (a thread
// id as a lane, a process id as a rank): then it is another tool's.
bool needs_foreign_numbering(const std::map<int, size_t>& index,
                             const std::map<std::pair<int, int>, ThreadMeta>& threads,
                             const std::vector<std::vector<int>>& tids) {
  for (const auto& [pid, at] : index) {
    if (pid > kMaxRank) return true;
    if (at >= tids.size()) continue;
    for (int tid : tids[at]) {
      auto meta = threads.find({pid, tid});
      if (tid > 255 && (meta == threads.end() || meta->second.lane < 0)) return true;
    }
  }
  for (const auto& [key, meta] : threads) {
    if (key.second > 255 && meta.lane < 0) return true;
  }
  return false;
}

// Puts each event on its lane and each rank under its number, now that all the metadata has
// been read (a file may name threads and processes after their events).
void resolve_lanes_and_ranks(Trace& trace, const std::map<int, size_t>& index,
                             const std::map<int, int>& rank_of_pid,
                             const std::map<std::pair<int, int>, ThreadMeta>& threads,
                             const std::vector<std::vector<int>>& tids) {
  auto set_lane_name = [](RankTrace& r, int lane, const std::string& name) {
    if (r.lanes.size() <= static_cast<size_t>(lane)) r.lanes.resize(lane + 1);
    r.lanes[lane] = name;
  };
  for (const auto& [key, meta] : threads) {
    RankTrace& r = trace.ranks[index.at(key.first)];
    if (meta.lane >= 0) {
      set_lane_name(r, meta.lane, meta.lane_name);
    } else if (key.second > 255) {
      throw TraceFormatError("thread_name: tid out of range");
    } else {
      set_lane_name(r, key.second, meta.name);
    }
  }
  for (const auto& [pid, at] : index) {
    RankTrace& r = trace.ranks[at];
    auto rank = rank_of_pid.find(pid);
    if (rank != rank_of_pid.end()) {
      r.rank = rank->second;
    } else if (pid > kMaxRank) {
      throw TraceFormatError("trace event: pid out of range");
    }
    if (at >= tids.size()) continue;
    for (size_t i = 0; i < r.events.size(); ++i) {
      const int tid = tids[at][i];
      auto meta = threads.find({pid, tid});
      const int lane = meta != threads.end() && meta->second.lane >= 0 ? meta->second.lane : tid;
      if (lane > 255) throw TraceFormatError("X event: tid out of range");
      r.events[i].lane = static_cast<uint8_t>(lane);
      if (r.lanes.size() <= static_cast<size_t>(lane)) r.lanes.resize(lane + 1);
    }
  }
  std::set<int> ranks;
  for (const auto& r : trace.ranks) {
    if (!ranks.insert(r.rank).second) {
      throw TraceFormatError("process_name: rank " + std::to_string(r.rank) + " named twice");
    }
  }
}

// What the events read so far say, until the whole file has been read.
struct TraceBuilder {
  Trace trace;
  std::map<int, size_t> index;  // pid -> rank, until the ranks' numbers are known
  std::map<int, int> rank_of_pid;
  std::map<std::pair<int, int>, ThreadMeta> threads;
  std::vector<std::vector<int>> tids;  // per rank, per event, until lanes are known
  // Another tool's files may name processes and threads by text ("Traces", "stream 7"): each
  // name gets an id past every numeric one, which only a foreign file may have (below).
  std::map<std::string, int> named_ids;

  int id_of(const EventMembers& e, EventKey key, const char* where) {
    std::string_view name;
    if (e.found[key] && !e.value[key].get(name)) {
      return named_ids.emplace(std::string(name), kNamedIdBase + int(named_ids.size()))
          .first->second;
    }
    return field<int>(e, key, where);
  }

  std::pair<int, size_t> rank_at(const EventMembers& e, const char* where) {
    const int pid = id_of(e, kPid, where);
    rank_of(trace, index, pid);
    const size_t at = index.at(pid);
    if (tids.size() <= at) tids.resize(at + 1);
    return {pid, at};
  }

  int tid_of(const EventMembers& e, const char* where) {
    const int tid = id_of(e, kTid, where);
    if (tid < 0) throw TraceFormatError(std::string(where) + ": tid out of range");
    return tid;
  }

  void on_event(simdjson::dom::object object) {
    const EventMembers e(kEventKeys, object);
    const std::string ph = field<std::string>(e, kPh, "trace event");
    if (ph == "M") {
      on_metadata(e);
    } else if (ph == "X") {
      on_complete(e);
    } else if (ph == "C") {
      on_counter(e);
    }
  }

  // A process's or a thread's name.
  void on_metadata(const EventMembers& e) {
    const std::string name = field<std::string>(e, kName, "metadata event");
    if (name == "process_name") {
      const int pid = rank_at(e, "metadata event").first;
      const int rank = e.found[kArgs]
                           ? optional_field<int>(ArgMembers(kArgKeys, e.value[kArgs]), kRank, -1)
                           : -1;
      if (rank < -1 || rank > kMaxRank) throw TraceFormatError("process_name: rank out of range");
      if (rank >= 0) rank_of_pid[pid] = rank;
      return;
    }
    if (name != "thread_name") return;
    const int pid = rank_at(e, "metadata event").first;
    const ArgMembers args(kArgKeys, object_field(e, kArgs, "thread_name"));
    ThreadMeta& t = threads[{pid, tid_of(e, "thread_name")}];
    t.name = optional_field<std::string>(args, kArgName, "");
    t.lane = optional_field<int>(args, kLane, -1);
    t.lane_name = optional_field<std::string>(args, kLaneName, t.name);
    if (t.lane < -1 || t.lane > 255) throw TraceFormatError("thread_name: lane out of range");
  }

  // A span of work ("complete" event).
  void on_complete(const EventMembers& e) {
    const size_t at = rank_at(e, "X event").second;
    RankTrace& r = trace.ranks[at];
    Event out;
    tids[at].push_back(tid_of(e, "X event"));
    const double ts = field<double>(e, kTs, "X event");
    const double dur = field<double>(e, kDur, "X event");
    if (!std::isfinite(ts) || !std::isfinite(dur) || dur < 0 || std::abs(ts) > 1e15 || dur > 1e15) {
      throw TraceFormatError("X event: ts/dur out of range");
    }
    out.t0_ns = to_ns(ts, 0);
    out.t1_ns = out.t0_ns + std::llround(dur * 1000.0);
    out.name = trace.intern(field<std::string>(e, kName, "X event"));
    if (!parse_category(optional_field<std::string>(e, kCat, "other"), &out.category)) {
      out.category = Category::kOther;
    }
    // args that are not an object are none.
    const ArgMembers args =
        e.found[kArgs] ? ArgMembers(kArgKeys, e.value[kArgs]) : ArgMembers(kArgKeys);
    out.step = optional_field<int32_t>(args, kStep, -1);
    out.micro = optional_field<int16_t>(args, kMicro, -1);
    out.bytes = optional_field<int64_t>(args, kBytes, 0);
    // As the native reader: a negative payload is a corrupt event, named here rather than as a
    // bare "negative size" from whatever prices it later.
    if (out.bytes < 0)
      throw TraceFormatError("X event '" + trace.str(out.name) + "': args.bytes is negative (" +
                             std::to_string(out.bytes) + ")");
    out.seq = optional_field<int64_t>(args, kSeq, -1);
    out.peer = optional_field<int16_t>(args, kPeer, -1);
    out.group_size = optional_field<int16_t>(args, kGroupSize, 0);
    out.off_cpu_us = std::max(0, optional_field<int32_t>(args, kOffCpuUs, 0));
    out.group = trace.intern(optional_field<std::string>(args, kGroup, ""));
    r.events.push_back(out);
  }

  // A memory counter; other counters are not read.
  void on_counter(const EventMembers& e) {
    const std::string name = field<std::string>(e, kName, "counter event");
    if (name.rfind(kMemoryPrefix, 0) != 0) return;
    RankTrace& r = trace.ranks[rank_at(e, "counter event").second];
    CounterSample c;
    const double ts = field<double>(e, kTs, "counter event");
    if (!std::isfinite(ts) || std::abs(ts) > 1e15) {
      throw TraceFormatError("counter event: ts out of range");
    }
    c.t_ns = to_ns(ts, 0);
    const ArgMembers args(kArgKeys, object_field(e, kArgs, "counter event"));
    c.bytes = optional_field<int64_t>(args, kBytes, 0);
    const std::string kind = name.substr(std::string(kMemoryPrefix).size());
    bool known = false;
    // Traces written before memory provenance named the temporaries "other".
    if (kind == "other") {
      c.kind = MemoryKind::kTemporaries;
      known = true;
    }
    for (int k = 0; k < kMemoryKindCount; ++k) {
      if (kind == memory_kind_name(static_cast<MemoryKind>(k))) {
        c.kind = static_cast<MemoryKind>(k);
        known = true;
      }
    }
    if (known) r.counters.push_back(c);
  }
};

// Times were read relative to the file; the origin puts them back on the recording clock.
void shift_to_origin(Trace& trace, int64_t origin) {
  for (auto& r : trace.ranks) {
    for (auto& e : r.events) {
      e.t0_ns += origin;
      e.t1_ns += origin;
    }
    for (auto& c : r.counters) c.t_ns += origin;
  }
}

// otherData's failures: rank (as text) -> message.
void read_failures(Trace& trace, const json& other) {
  if (other.contains("failures") && other["failures"].is_object()) {
    for (const auto& [rank, message] : other["failures"].items()) {
      for (auto& r : trace.ranks) {
        if (std::to_string(r.rank) == rank && message.is_string()) r.failure = message;
      }
    }
  }
}

}  // namespace

Trace from_chrome_json(const std::string& text) {
  TraceBuilder read;
  size_t index = 0;  // which event a fault is in, counted as traceEvents lists them
  const chrome_json::Document doc = chrome_json::scan(text, [&](simdjson::dom::object object) {
    try {
      read.on_event(object);
    } catch (const TraceFormatError& e) {
      throw TraceFormatError("traceEvents[" + std::to_string(index) + "]: " + e.what());
    }
    ++index;
  });
  if (!doc.saw_events) throw TraceFormatError("not a Chrome trace: no traceEvents array");
  Trace trace = std::move(read.trace);
  const json& other = doc.other;
  const int64_t origin = origin_of(other);
  // Event times are within +-1e18 ns of it (checked above), so the sums cannot overflow.
  if (origin < -4'000'000'000'000'000'000 || origin > 4'000'000'000'000'000'000) {
    throw TraceFormatError("otherData: origin_ns out of range");
  }
  if (other.contains("run")) trace.run = run_record_of(other["run"]);
  if (origin != 0) shift_to_origin(trace, origin);
  // Ours say so; what they hold must fit our ranks and lanes. Another tool's file is read as
  // what it is: processes and threads.
  const bool ours = format_of(other) == "shardscope";
  if (ours || !needs_foreign_numbering(read.index, read.threads, read.tids)) {
    resolve_lanes_and_ranks(trace, read.index, read.rank_of_pid, read.threads, read.tids);
  } else {
    number_foreign_lanes_and_ranks(trace, read.index, read.threads, read.tids);
  }
  read_failures(trace, other);
  std::sort(trace.ranks.begin(), trace.ranks.end(),
            [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  trace.normalise();
  return trace;
}

}  // namespace shardscope::profiling
