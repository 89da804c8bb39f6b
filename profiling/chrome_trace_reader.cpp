// Chrome Trace Event Format: the reader, of what chrome_trace.cpp writes now and wrote before.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <set>
#include <type_traits>

#include <nlohmann/json.hpp>

#include "profiling/chrome_format.h"
#include "profiling/trace_io.h"

namespace shardscope::profiling {
namespace {

using chrome_format::kMaxRank;
using chrome_format::kMemoryPrefix;
using nlohmann::json;

int64_t to_ns(double us, int64_t origin) {
  return origin + std::llround(us * 1000.0);
}

// A JSON value as T, or TraceFormatError. Numbers are range-checked before they are converted:
// a float too large for an integer field is undefined behaviour in a plain cast (the fuzzer
// found one), and an integer too large for a narrow field would wrap.
template <typename T>
bool convert(const json& v, T* out) {
  if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
    using limits = std::numeric_limits<T>;
    if (v.is_number_unsigned()) {
      const auto u = v.get<json::number_unsigned_t>();
      if (u > static_cast<json::number_unsigned_t>(limits::max())) return false;
      *out = static_cast<T>(u);
      return true;
    }
    if (v.is_number_integer()) {
      const auto i = v.get<json::number_integer_t>();
      if (i < static_cast<json::number_integer_t>(limits::min()) ||
          i > static_cast<json::number_integer_t>(limits::max())) {
        return false;
      }
      *out = static_cast<T>(i);
      return true;
    }
    if (v.is_number_float()) {
      const double d = v.get<double>();
      // The first value past the top is a power of two, exact as a double (max is not).
      const double past_max = 2.0 * static_cast<double>(limits::max() / 2 + 1);
      if (!std::isfinite(d) || d < static_cast<double>(limits::min()) || d >= past_max) {
        return false;
      }
      *out = static_cast<T>(d);
      return true;
    }
    return false;
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!v.is_number()) return false;
    *out = v.get<T>();
    return true;
  } else {
    try {
      *out = v.get<T>();
      return true;
    } catch (const json::exception&) {
      return false;
    }
  }
}

template <typename T>
T field(const json& object, const char* key, const char* where) {
  auto it = object.find(key);
  if (it == object.end()) {
    throw TraceFormatError(std::string(where) + ": missing field '" + key + "'");
  }
  T value{};
  if (!convert(*it, &value)) {
    throw TraceFormatError(std::string(where) + ": field '" + key + "' has the wrong type");
  }
  return value;
}

template <typename T>
T optional_field(const json& object, const char* key, T fallback) {
  if (!object.is_object()) return fallback;
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  T value{};
  if (!convert(*it, &value)) {
    throw TraceFormatError(std::string("trace event: field '") + key + "' has the wrong type");
  }
  return value;
}

const json& object_field(const json& object, const char* key, const char* where) {
  auto it = object.find(key);
  if (it == object.end()) {
    throw TraceFormatError(std::string(where) + ": missing field '" + key + "'");
  }
  return *it;
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

// Reads the trace event by event instead of building the whole document: a million events as
// one nlohmann DOM took 11 s, most of it faulting in and freeing the memory of millions of small
// maps. The SAX handler builds a small DOM for one event at a time (and for otherData, which is
// small), hands it to `on_event`, and drops it. Times are kept relative to the file until the
// origin (written after the events) is known.
class EventSax : public nlohmann::json_sax<json> {
 public:
  explicit EventSax(std::function<void(const json&)> on_event) : on_event_(std::move(on_event)) {}

  bool saw_events = false;
  json other = json::object();

  bool null() override { return value(nullptr); }
  bool boolean(bool v) override { return value(v); }
  bool number_integer(number_integer_t v) override { return value(v); }
  bool number_unsigned(number_unsigned_t v) override { return value(v); }
  bool number_float(number_float_t v, const string_t&) override { return value(v); }
  bool string(string_t& v) override { return value(std::move(v)); }
  bool binary(binary_t&) override { return value(nullptr); }

  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override {
    if (depth_ == 1 && key_ == "traceEvents") {
      if (in_events_ || saw_events) throw TraceFormatError("more than one traceEvents array");
      in_events_ = saw_events = true;
      ++depth_;
      return true;
    }
    return open(json::array());
  }
  bool end_object() override { return close(); }
  bool end_array() override {
    if (in_events_ && depth_ == 2) {
      in_events_ = false;
      --depth_;
      return true;
    }
    return close();
  }
  bool key(string_t& k) override {
    if (!stack_.empty()) {
      key_ = std::move(k);
    } else if (depth_ == 1) {
      key_ = std::move(k);
    }
    return true;
  }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception&) override {
    throw TraceFormatError("not valid JSON (truncated or corrupt?) at byte " +
                           std::to_string(position));
  }

 private:
  // A value somewhere: part of the subtree being built, or the start of one worth keeping
  // (an event, otherData), or skipped.
  bool value(json v) {
    if (!stack_.empty()) {
      insert(std::move(v));
      return true;
    }
    if (in_events_ && depth_ == 2) throw TraceFormatError("trace event is not an object");
    if (depth_ == 0) throw TraceFormatError("not a Chrome trace: no traceEvents array");
    return true;
  }
  bool open(json container) {
    if (depth_ == 0 && !container.is_object()) {
      throw TraceFormatError("not a Chrome trace: no traceEvents array");
    }
    ++depth_;
    if (!stack_.empty()) {
      stack_.push_back(insert(std::move(container)));
    } else if ((in_events_ && depth_ == 3) || (depth_ == 2 && key_ == "otherData")) {
      if (in_events_ && !container.is_object())
        throw TraceFormatError("trace event is not an object");
      root_ = std::move(container);
      stack_.push_back(&root_);
    }
    return true;
  }
  bool close() {
    --depth_;
    if (stack_.empty()) return true;
    stack_.pop_back();
    if (!stack_.empty()) return true;
    if (in_events_) {
      on_event_(root_);
    } else if (root_.is_object()) {
      other = std::move(root_);
    }
    root_ = json();
    return true;
  }
  json* insert(json v) {
    json& top = *stack_.back();
    if (top.is_object()) {
      json& slot = top[key_];
      slot = std::move(v);
      return &slot;
    }
    top.push_back(std::move(v));
    return &top.back();
  }

  std::function<void(const json&)> on_event_;
  int depth_ = 0;  // 1: inside the root object
  bool in_events_ = false;
  std::string key_;
  json root_;
  std::vector<json*> stack_;
};

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

}  // namespace

Trace from_chrome_json(const std::string& text) {
  Trace trace;
  std::map<int, size_t> index;  // pid -> rank, until the ranks' numbers are known
  std::map<int, int> rank_of_pid;
  std::map<std::pair<int, int>, ThreadMeta> threads;
  std::vector<std::vector<int>> tids;  // per rank, per event, until lanes are known
  // Another tool's files may name processes and threads by text ("Traces", "stream 7"): each
  // name gets an id past every numeric one, which only a foreign file may have (below).
  std::map<std::string, int> named_ids;
  auto id_of = [&](const json& e, const char* key, const char* where) {
    auto it = e.find(key);
    if (it != e.end() && it->is_string()) {
      return named_ids.emplace(it->get<std::string>(), kNamedIdBase + int(named_ids.size()))
          .first->second;
    }
    return field<int>(e, key, where);
  };
  auto rank_at = [&](const json& e, const char* where) -> std::pair<int, size_t> {
    const int pid = id_of(e, "pid", where);
    rank_of(trace, index, pid);
    const size_t at = index.at(pid);
    if (tids.size() <= at) tids.resize(at + 1);
    return {pid, at};
  };
  auto tid_of = [&](const json& e, const char* where) {
    const int tid = id_of(e, "tid", where);
    if (tid < 0) throw TraceFormatError(std::string(where) + ": tid out of range");
    return tid;
  };
  auto on_event = [&](const json& e) {
    const std::string ph = field<std::string>(e, "ph", "trace event");
    if (ph == "M") {
      const std::string name = field<std::string>(e, "name", "metadata event");
      if (name == "process_name") {
        const int pid = rank_at(e, "metadata event").first;
        auto args = e.find("args");
        const int rank = args == e.end() ? -1 : optional_field<int>(*args, "rank", -1);
        if (rank < -1 || rank > kMaxRank) throw TraceFormatError("process_name: rank out of range");
        if (rank >= 0) rank_of_pid[pid] = rank;
        return;
      }
      if (name != "thread_name") return;
      const int pid = rank_at(e, "metadata event").first;
      const json& args = object_field(e, "args", "thread_name");
      ThreadMeta& t = threads[{pid, tid_of(e, "thread_name")}];
      t.name = optional_field<std::string>(args, "name", "");
      t.lane = optional_field<int>(args, "lane", -1);
      t.lane_name = optional_field<std::string>(args, "lane_name", t.name);
      if (t.lane < -1 || t.lane > 255) throw TraceFormatError("thread_name: lane out of range");
    } else if (ph == "X") {
      const size_t at = rank_at(e, "X event").second;
      RankTrace& r = trace.ranks[at];
      Event out;
      tids[at].push_back(tid_of(e, "X event"));
      const double ts = field<double>(e, "ts", "X event");
      const double dur = field<double>(e, "dur", "X event");
      if (!std::isfinite(ts) || !std::isfinite(dur) || dur < 0 || std::abs(ts) > 1e15 ||
          dur > 1e15) {
        throw TraceFormatError("X event: ts/dur out of range");
      }
      out.t0_ns = to_ns(ts, 0);
      out.t1_ns = out.t0_ns + std::llround(dur * 1000.0);
      out.name = trace.intern(field<std::string>(e, "name", "X event"));
      if (!parse_category(optional_field<std::string>(e, "cat", "other"), &out.category)) {
        out.category = Category::kOther;
      }
      static const json kNoArgs = json::object();
      auto args_it = e.find("args");
      const json& args = args_it != e.end() && args_it->is_object() ? *args_it : kNoArgs;
      out.step = optional_field<int32_t>(args, "step", -1);
      out.micro = optional_field<int16_t>(args, "micro", -1);
      out.bytes = optional_field<int64_t>(args, "bytes", 0);
      out.seq = optional_field<int64_t>(args, "seq", -1);
      out.peer = optional_field<int16_t>(args, "peer", -1);
      out.group_size = optional_field<int16_t>(args, "group_size", 0);
      out.group = trace.intern(optional_field<std::string>(args, "group", ""));
      r.events.push_back(out);
    } else if (ph == "C") {
      const std::string name = field<std::string>(e, "name", "counter event");
      if (name.rfind(kMemoryPrefix, 0) != 0) return;
      RankTrace& r = trace.ranks[rank_at(e, "counter event").second];
      CounterSample c;
      const double ts = field<double>(e, "ts", "counter event");
      if (!std::isfinite(ts) || std::abs(ts) > 1e15) {
        throw TraceFormatError("counter event: ts out of range");
      }
      c.t_ns = to_ns(ts, 0);
      const json& args = object_field(e, "args", "counter event");
      c.bytes = optional_field<int64_t>(args, "bytes", 0);
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
  EventSax sax(on_event);
  json::sax_parse(text, &sax);
  if (!sax.saw_events) throw TraceFormatError("not a Chrome trace: no traceEvents array");
  const json& other = sax.other;
  const int64_t origin = optional_field<int64_t>(other, "origin_ns", 0);
  // Event times are within +-1e18 ns of it (checked above), so the sums cannot overflow.
  if (origin < -4'000'000'000'000'000'000 || origin > 4'000'000'000'000'000'000) {
    throw TraceFormatError("otherData: origin_ns out of range");
  }
  if (other.contains("run")) trace.run_json = other["run"].dump();
  if (origin != 0) {
    // Times were read relative to the file; the origin puts them back on the recording clock.
    for (auto& r : trace.ranks) {
      for (auto& e : r.events) {
        e.t0_ns += origin;
        e.t1_ns += origin;
      }
      for (auto& c : r.counters) c.t_ns += origin;
    }
  }
  // Ours say so; what they hold must fit our ranks and lanes. Another tool's file is read as
  // what it is: processes and threads.
  const bool ours = optional_field<std::string>(other, "format", "") == "shardscope";
  if (ours || !needs_foreign_numbering(index, threads, tids)) {
    resolve_lanes_and_ranks(trace, index, rank_of_pid, threads, tids);
  } else {
    number_foreign_lanes_and_ranks(trace, index, threads, tids);
  }
  if (other.contains("failures") && other["failures"].is_object()) {
    for (const auto& [rank, message] : other["failures"].items()) {
      for (auto& r : trace.ranks) {
        if (std::to_string(r.rank) == rank && message.is_string()) r.failure = message;
      }
    }
  }
  std::sort(trace.ranks.begin(), trace.ranks.end(),
            [](const RankTrace& a, const RankTrace& b) { return a.rank < b.rank; });
  trace.normalise();
  return trace;
}

}  // namespace shardscope::profiling
