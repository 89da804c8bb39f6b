// Chrome Trace Event Format: writer and reader of the trace model.
#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <tuple>
#include <type_traits>

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

namespace {

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

}  // namespace

Trace from_chrome_json(const std::string& text) {
  Trace trace;
  std::map<int, size_t> index;
  auto on_event = [&](const json& e) {
    const std::string ph = field<std::string>(e, "ph", "trace event");
    if (ph == "M") {
      const std::string name = field<std::string>(e, "name", "metadata event");
      if (name != "thread_name") return;
      RankTrace& r = rank_of(trace, index, field<int>(e, "pid", "metadata event"));
      const int tid = field<int>(e, "tid", "metadata event");
      if (tid < 0 || tid > 255) throw TraceFormatError("thread_name: tid out of range");
      if (r.lanes.size() <= static_cast<size_t>(tid)) r.lanes.resize(tid + 1);
      const json& args = object_field(e, "args", "thread_name");
      r.lanes[tid] = optional_field<std::string>(args, "name", "");
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
      RankTrace& r = rank_of(trace, index, field<int>(e, "pid", "counter event"));
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
