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

double to_us(int64_t ns, int64_t origin) {
  return static_cast<double>(ns - origin) / 1000.0;
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

}  // namespace

std::string to_chrome_json(const Trace& trace) {
  const int64_t origin = earliest_time(trace);
  json events = json::array();
  json failures = json::object();
  for (const auto& r : trace.ranks) {
    events.push_back(
        {{"ph", "M"},
         {"name", "process_name"},
         {"pid", r.rank},
         {"args",
          {{"name", "rank " + std::to_string(r.rank) + (r.failure.empty() ? "" : " (failed)")}}}});
    events.push_back({{"ph", "M"},
                      {"name", "process_sort_index"},
                      {"pid", r.rank},
                      {"args", {{"sort_index", r.rank}}}});
    if (!r.failure.empty()) failures[std::to_string(r.rank)] = r.failure;
    for (size_t lane = 0; lane < r.lanes.size(); ++lane) {
      events.push_back({{"ph", "M"},
                        {"name", "thread_name"},
                        {"pid", r.rank},
                        {"tid", lane},
                        {"args", {{"name", r.lanes[lane]}}}});
    }
    for (const auto& e : r.events) {
      json args = {{"step", e.step}, {"micro", e.micro}};
      if (e.category == Category::kCollective || e.category == Category::kWait) {
        args["bytes"] = e.bytes;
        args["seq"] = e.seq;
        args["group"] = trace.str(e.group);
        args["peer"] = e.peer;
        args["group_size"] = e.group_size;
      }
      events.push_back({{"ph", "X"},
                        {"name", trace.str(e.name)},
                        {"cat", category_name(e.category)},
                        {"pid", r.rank},
                        {"tid", e.lane},
                        {"ts", to_us(e.t0_ns, origin)},
                        {"dur", to_us(e.t1_ns, e.t0_ns)},
                        {"args", args}});
    }
    for (const auto& c : r.counters) {
      events.push_back({{"ph", "C"},
                        {"name", std::string(kMemoryPrefix) + memory_kind_name(c.kind)},
                        {"pid", r.rank},
                        {"ts", to_us(c.t_ns, origin)},
                        {"args", {{"bytes", c.bytes}}}});
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
      events.push_back({{"ph", "s"},
                        {"id", flow_id},
                        {"name", "collective"},
                        {"cat", "link"},
                        {"pid", first_rank},
                        {"tid", first->lane},
                        {"ts", to_us(first->t0_ns, origin)}});
      events.push_back({{"ph", "f"},
                        {"bp", "e"},
                        {"id", flow_id},
                        {"name", "collective"},
                        {"cat", "link"},
                        {"pid", members[k].first},
                        {"tid", members[k].second->lane},
                        {"ts", to_us(members[k].second->t0_ns, origin)}});
    }
  }
  json run = json::parse(trace.run_json, nullptr, /*allow_exceptions=*/false);
  if (run.is_discarded()) run = json::object();
  json out = {
      {"traceEvents", events},
      {"displayTimeUnit", "ns"},
      {"otherData",
       {{"format", "shardscope"}, {"origin_ns", origin}, {"run", run}, {"failures", failures}}}};
  return out.dump();
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
