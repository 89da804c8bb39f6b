// Chrome Trace Event Format: the writer (chrome_trace_reader.cpp reads it back).
#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "profiling/io/chrome_format.h"
#include "profiling/io/chrome_tracks.h"
#include "profiling/io/trace_io.h"
#include "profiling/metrics/comm_links.h"
#include "profiling/trace/run_record_json.h"

namespace shardscope::profiling {
namespace {

using chrome_format::kMemoryPrefix;
using chrome_format::pid_of_rank;
using nlohmann::json;

int64_t earliest_time(const Trace& trace) {
  int64_t origin = INT64_MAX;
  for (const auto& r : trace.ranks) {
    for (const auto& e : r.events) origin = std::min(origin, e.t0_ns);
    for (const auto& c : r.counters) origin = std::min(origin, c.t_ns);
  }
  return origin == INT64_MAX ? 0 : origin;
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
  std::vector<std::vector<int>> tids;  // per rank, per event
  tids.reserve(trace.ranks.size());
  for (const auto& r : trace.ranks) {
    // Perfetto takes pid 0 for the kernel's idle process: ranks count from pid 1.
    const std::string rank = std::to_string(r.rank);
    const std::string pid = std::to_string(pid_of_rank(r.rank));
    w.begin_event();
    w.raw("{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid + ",\"args\":{\"name\":");
    w.string("rank " + rank + (r.failure.empty() ? "" : " (failed)"));
    w.raw(",\"rank\":" + rank + "}}");
    w.begin_event();
    w.raw("{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid +
          ",\"args\":{\"sort_index\":" + rank + "}}");
    if (!r.failure.empty()) failures[rank] = r.failure;
    ChromeThreads threads = assign_chrome_threads(r);
    for (const auto& t : threads.threads) {
      const std::string tid = std::to_string(t.tid);
      w.begin_event();
      w.raw("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" + tid +
            ",\"args\":{\"name\":");
      w.string(t.name);
      // What the reader needs to put the thread back on its lane.
      w.raw(",\"lane\":" + std::to_string(t.lane) + ",\"lane_name\":");
      w.string(static_cast<size_t>(t.lane) < r.lanes.size() ? r.lanes[t.lane] : "");
      w.raw("}}");
      w.begin_event();
      w.raw("{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" + pid + ",\"tid\":" + tid +
            ",\"args\":{\"sort_index\":" + tid + "}}");
    }
    for (size_t i = 0; i < r.events.size(); ++i) {
      const Event& e = r.events[i];
      w.begin_event();
      w.raw("{\"ph\":\"X\",\"name\":");
      w.raw(names[e.name]);
      w.raw(",\"cat\":\"");
      w.raw(category_name(e.category));
      w.raw("\",\"pid\":" + pid + ",\"tid\":");
      w.integer(threads.tid_of_event[i]);
      w.raw(",\"ts\":");
      w.time(e.t0_ns);
      w.raw(",\"dur\":");
      w.micros(e.t1_ns - e.t0_ns);
      w.raw(",\"args\":{\"step\":");
      w.integer(e.step);
      w.raw(",\"micro\":");
      w.integer(e.micro);
      if (e.off_cpu_us != 0) {
        w.raw(",\"off_cpu_us\":");
        w.integer(e.off_cpu_us);
      }
      if (e.category == Category::kMemcpy && e.bytes > 0) {
        w.raw(",\"bytes\":");  // what a copy moved, as Kineto's gpu_memcpy events say
        w.integer(e.bytes);
      }
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
    tids.push_back(std::move(threads.tid_of_event));
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
  // Flow arrows (v1: s, then f binding to its enclosing slice), one id per arrow. Each end sits
  // at the start of its call's slice, on the call's own slot: Perfetto binds a flow event to
  // the topmost slice open on its thread, and reads the slices starting at the same time first.
  int64_t flow_id = 0;
  for (const CommLink& link : link_communication(trace)) {
    ++flow_id;
    for (const bool start : {true, false}) {
      const uint32_t rank = start ? link.from_rank : link.to_rank;
      const uint32_t index = start ? link.from_event : link.to_event;
      w.begin_event();
      w.raw(start ? "{\"ph\":\"s\",\"id\":" : "{\"ph\":\"f\",\"bp\":\"e\",\"id\":");
      w.integer(flow_id);
      w.raw(link.point_to_point ? ",\"name\":\"send/recv\"" : ",\"name\":\"collective\"");
      w.raw(",\"cat\":\"link\",\"pid\":");
      w.integer(pid_of_rank(trace.ranks[rank].rank));
      w.raw(",\"tid\":");
      w.integer(tids[rank][index]);
      w.raw(",\"ts\":");
      w.time(trace.ranks[rank].events[index].t0_ns);
      w.raw("}");
    }
  }
  const json run = run_record_json(trace.run);
  json other = {
      {"format", "shardscope"}, {"origin_ns", origin}, {"run", run}, {"failures", failures}};
  w.raw("\n],\n\"displayTimeUnit\": \"ns\",\n\"otherData\": ");
  w.raw(other.dump());
  w.raw("}\n");
  return std::move(w.text());
}

}  // namespace shardscope::profiling
