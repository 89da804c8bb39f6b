// Chrome Trace Event Format: writer and reader of the trace model.
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <nlohmann/json.hpp>

#include "profiling/trace_io.h"

namespace shardscope::profiling {
namespace {

using nlohmann::json;

constexpr const char* kMemoryPrefix = "memory ";

int64_t earliest_time(const Trace& trace) {
  int64_t origin = INT64_MAX;
  for (const auto& r : trace.ranks) {
    for (const auto& e : r.events) origin = std::min(origin, e.t0_ns);
    for (const auto& c : r.counters) origin = std::min(origin, c.t_ns);
  }
  return origin == INT64_MAX ? 0 : origin;
}

int64_t to_ns(double us, int64_t origin) {
  return origin + std::llround(us * 1000.0);
}

template <typename T>
T field(const json& object, const char* key, const char* where) {
  auto it = object.find(key);
  if (it == object.end()) {
    throw TraceFormatError(std::string(where) + ": missing field '" + key + "'");
  }
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw TraceFormatError(std::string(where) + ": field '" + key + "' has the wrong type");
  }
}

template <typename T>
T optional_field(const json& object, const char* key, T fallback) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw TraceFormatError(std::string("trace event: field '") + key + "' has the wrong type");
  }
}

RankTrace& rank_of(Trace& trace, std::map<int, size_t>& index, int pid) {
  if (pid < 0 || pid > 1 << 16) throw TraceFormatError("trace event: pid out of range");
  auto [it, inserted] = index.emplace(pid, trace.ranks.size());
  if (inserted) {
    trace.ranks.emplace_back();
    trace.ranks.back().rank = pid;
  }
  return trace.ranks[it->second];
}

// Written as text, not through a JSON document: a million events would otherwise build a
// gigabyte of nodes first. Strings go through nlohmann's escaping.
class ChromeWriter {
 public:
  explicit ChromeWriter(int64_t origin) : origin_(origin) { out_.reserve(1 << 20); }

  void begin_event() {
    out_ += first_ ? "\n" : ",\n";
    first_ = false;
  }
  void raw(const char* text) { out_ += text; }
  void raw(const std::string& text) { out_ += text; }
  void string(const std::string& s) { out_ += json(s).dump(); }
  void integer(int64_t v) { out_ += std::to_string(v); }
  // Microseconds with nanosecond resolution, exactly: no floating point on the way out.
  void micros(int64_t ns) {
    if (ns < 0) {
      out_ += '-';
      ns = -ns;
    }
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%lld.%03lld", static_cast<long long>(ns / 1000),
                  static_cast<long long>(ns % 1000));
    out_ += buf;
  }
  void time(int64_t t_ns) { micros(t_ns - origin_); }
  std::string& text() { return out_; }

 private:
  int64_t origin_;
  bool first_ = true;
  std::string out_;
};

}  // namespace

std::string to_chrome_json(const Trace& trace) {
  const int64_t origin = earliest_time(trace);
  ChromeWriter w(origin);
  w.raw("{\"traceEvents\": [");
  json failures = json::object();
  // Escaped names once per string, not once per event.
  std::vector<std::string> names;
  names.reserve(trace.strings.size());
  for (const auto& s : trace.strings) names.push_back(json(s).dump());
  for (const auto& r : trace.ranks) {
    const std::string pid = std::to_string(r.rank);
    w.begin_event();
    w.raw("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid + ",\"args\":{\"name\":");
    w.string("rank " + pid + (r.failure.empty() ? "" : " (failed)"));
    w.raw("}}");
    w.begin_event();
    w.raw("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid +
          ",\"args\":{\"sort_index\":" + pid + "}}");
    if (!r.failure.empty()) failures[pid] = r.failure;
    for (size_t lane = 0; lane < r.lanes.size(); ++lane) {
      w.begin_event();
      w.raw("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid +
            ",\"tid\":" + std::to_string(lane) + ",\"args\":{\"name\":");
      w.string(r.lanes[lane]);
      w.raw("}}");
    }
    for (const auto& e : r.events) {
      w.begin_event();
      w.raw("{\"ph\":\"X\",\"name\":");
      w.raw(names[e.name]);
      w.raw(",\"cat\":\"");
      w.raw(category_name(e.category));
      w.raw("\",\"pid\":" + pid + ",\"tid\":");
      w.integer(e.lane);
      w.raw(",\"ts\":");
      w.time(e.t0_ns);
      w.raw(",\"dur\":");
      w.micros(e.t1_ns - e.t0_ns);
      w.raw(",\"args\":{\"step\":");
      w.integer(e.step);
      w.raw(",\"micro\":");
      w.integer(e.micro);
      if (e.category == Category::kCollective || e.category == Category::kWait) {
        w.raw(",\"bytes\":");
        w.integer(e.bytes);
        w.raw(",\"seq\":");
        w.integer(e.seq);
        w.raw(",\"group\":");
        w.raw(names[e.group]);
        w.raw(",\"peer\":");
        w.integer(e.peer);
        w.raw(",\"group_size\":");
        w.integer(e.group_size);
      }
      w.raw("}}");
    }
    for (const auto& c : r.counters) {
      w.begin_event();
      w.raw("{\"ph\":\"C\",\"name\":\"");
      w.raw(kMemoryPrefix);
      w.raw(memory_kind_name(c.kind));
      w.raw("\",\"pid\":" + pid + ",\"ts\":");
      w.time(c.t_ns);
      w.raw(",\"args\":{\"bytes\":");
      w.integer(c.bytes);
      w.raw("}}");
    }
  }
  // Flow arrows: the same collective (group, sequence number) on every rank, from the rank that
  // issued it first to each of the others.
  std::map<std::tuple<uint32_t, int64_t, uint32_t>, std::vector<std::pair<int, const Event*>>>
      collectives;
  for (const auto& r : trace.ranks) {
    for (const auto& e : r.events) {
      if (e.category == Category::kCollective && e.peer < 0 && e.seq >= 0)
        collectives[{e.group, e.seq, e.name}].push_back({r.rank, &e});
    }
  }
  int64_t flow_id = 0;
  for (auto& [key, members] : collectives) {
    if (members.size() < 2) continue;
    std::sort(members.begin(), members.end(),
              [](const auto& a, const auto& b) { return a.second->t0_ns < b.second->t0_ns; });
    const auto& [first_rank, first] = members.front();
    for (size_t k = 1; k < members.size(); ++k) {
      ++flow_id;
      for (const auto& [phase, rank, event] :
           {std::make_tuple("s", first_rank, first),
            std::make_tuple("f", members[k].first, members[k].second)}) {
        w.begin_event();
        w.raw(std::string("{\"ph\":\"") + phase + "\"," + (phase[0] == 'f' ? "\"bp\":\"e\"," : "") +
              "\"id\":" + std::to_string(flow_id) +
              ",\"name\":\"collective\",\"cat\":\"link\",\"pid\":" + std::to_string(rank) +
              ",\"tid\":" + std::to_string(event->lane) + ",\"ts\":");
        w.time(event->t0_ns);
        w.raw("}");
      }
    }
  }
  json run = json::parse(trace.run_json, nullptr, /*allow_exceptions=*/false);
  if (run.is_discarded()) run = json::object();
  json other = {
      {"format", "shardscope"}, {"origin_ns", origin}, {"run", run}, {"failures", failures}};
  w.raw("\n],\n\"displayTimeUnit\": \"ns\",\n\"otherData\": ");
  w.raw(other.dump());
  w.raw("}\n");
  return std::move(w.text());
}

Trace from_chrome_json(const std::string& text) {
  json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) throw TraceFormatError("not valid JSON (truncated or corrupt?)");
  if (!doc.is_object() || !doc.contains("traceEvents") || !doc["traceEvents"].is_array()) {
    throw TraceFormatError("not a Chrome trace: no traceEvents array");
  }
  Trace trace;
  int64_t origin = 0;
  if (doc.contains("otherData") && doc["otherData"].is_object()) {
    const json& other = doc["otherData"];
    origin = optional_field<int64_t>(other, "origin_ns", 0);
    if (other.contains("run")) trace.run_json = other["run"].dump();
  }
  std::map<int, size_t> index;
  for (const json& e : doc["traceEvents"]) {
    if (!e.is_object()) throw TraceFormatError("trace event is not an object");
    const std::string ph = field<std::string>(e, "ph", "trace event");
    if (ph == "M") {
      const std::string name = field<std::string>(e, "name", "metadata event");
      if (name != "thread_name") continue;
      RankTrace& r = rank_of(trace, index, field<int>(e, "pid", "metadata event"));
      const int tid = field<int>(e, "tid", "metadata event");
      if (tid < 0 || tid > 255) throw TraceFormatError("thread_name: tid out of range");
      if (r.lanes.size() <= static_cast<size_t>(tid)) r.lanes.resize(tid + 1);
      r.lanes[tid] = field<json>(e, "args", "thread_name").value("name", "");
    } else if (ph == "X") {
      RankTrace& r = rank_of(trace, index, field<int>(e, "pid", "X event"));
      Event out;
      const int tid = field<int>(e, "tid", "X event");
      if (tid < 0 || tid > 255) throw TraceFormatError("X event: tid out of range");
      out.lane = static_cast<uint8_t>(tid);
      if (r.lanes.size() <= out.lane) r.lanes.resize(out.lane + 1);
      const double ts = field<double>(e, "ts", "X event");
      const double dur = field<double>(e, "dur", "X event");
      if (!std::isfinite(ts) || !std::isfinite(dur) || dur < 0 || std::abs(ts) > 1e15 ||
          dur > 1e15) {
        throw TraceFormatError("X event: ts/dur out of range");
      }
      out.t0_ns = to_ns(ts, origin);
      out.t1_ns = out.t0_ns + std::llround(dur * 1000.0);
      out.name = trace.intern(field<std::string>(e, "name", "X event"));
      if (!parse_category(optional_field<std::string>(e, "cat", "other"), &out.category)) {
        out.category = Category::kOther;
      }
      const json args = e.contains("args") && e["args"].is_object() ? e["args"] : json::object();
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
      if (name.rfind(kMemoryPrefix, 0) != 0) continue;
      RankTrace& r = rank_of(trace, index, field<int>(e, "pid", "counter event"));
      CounterSample c;
      const double ts = field<double>(e, "ts", "counter event");
      if (!std::isfinite(ts) || std::abs(ts) > 1e15) {
        throw TraceFormatError("counter event: ts out of range");
      }
      c.t_ns = to_ns(ts, origin);
      c.bytes = field<json>(e, "args", "counter event").value("bytes", int64_t{0});
      const std::string kind = name.substr(std::string(kMemoryPrefix).size());
      bool known = false;
      for (int k = 0; k < kMemoryKindCount; ++k) {
        if (kind == memory_kind_name(static_cast<MemoryKind>(k))) {
          c.kind = static_cast<MemoryKind>(k);
          known = true;
        }
      }
      if (known) r.counters.push_back(c);
    }
  }
  if (doc.contains("otherData") && doc["otherData"].contains("failures") &&
      doc["otherData"]["failures"].is_object()) {
    for (const auto& [rank, message] : doc["otherData"]["failures"].items()) {
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
