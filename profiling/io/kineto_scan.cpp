// Reading one Kineto trace file: its bytes (gzip or not, bounded), its top level (rank, world,
// backend, base time, device) and each event with the args we use.
#include "profiling/io/kineto_scan.h"

#include <zlib.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <regex>

#include "profiling/io/chrome_json_scan.h"
#include "profiling/io/input_file.h"
#include "profiling/io/trace_io.h"

namespace shardscope::profiling {
namespace {

namespace fs = std::filesystem;

std::optional<double> number(simdjson::dom::element e) {
  double d;
  int64_t i;
  uint64_t u;
  if (!e.get(d)) return d;
  if (!e.get(i)) return double(i);
  if (!e.get(u)) return double(u);
  return std::nullopt;
}

std::string text_of(simdjson::dom::element e) {
  std::string_view s;
  if (!e.get(s)) return std::string(s);
  if (auto n = number(e)) return std::to_string(int64_t(*n));
  return "";
}

// Bytes of an element of a type as the profiler names it (Input type's "float", NCCL's "Float").
int element_bytes(const std::string& type) {
  if (type == "Double" || type == "Long" || type == "double" || type == "long int" ||
      type == "int64" || type == "c10::complex<float>")
    return 8;
  if (type == "c10::Half" || type == "c10::BFloat16" || type == "short int" || type == "Half" ||
      type == "BFloat16")
    return 2;
  if (type == "signed char" || type == "unsigned char" || type == "bool") return 1;
  return 4;  // float, int
}

// The elements of the first tensor in "Input Dims" ([[n, m]] or, for a list, [[[n]]]).
int64_t first_tensor_elements(simdjson::dom::element dims) {
  simdjson::dom::array outer;
  if (dims.get(outer) || outer.size() == 0) return 0;
  simdjson::dom::element first = outer.at(0).value();
  simdjson::dom::array shape;
  if (first.get(shape)) return 0;
  if (shape.size() > 0) {
    simdjson::dom::array nested;
    if (!shape.at(0).get(nested)) shape = nested;  // a TensorList: its first tensor
  }
  int64_t n = 1;
  for (simdjson::dom::element d : shape) {
    const auto v = number(d);
    if (!v || *v < 0 || *v > 1e15) return 0;
    n = int64_t(std::min(1e18, double(n) * *v));
  }
  return shape.size() == 0 ? 0 : n;
}

void read_args(simdjson::dom::object args, Raw& r) {
  int64_t nelems = -1;
  std::string dtype;
  for (auto field : args) {
    const std::string_view key = field.key;
    if (key == "Process Group Name") {
      r.group = text_of(field.value);
    } else if (key == "Collective name") {
      r.collective = text_of(field.value);
    } else if (key == "bytes" || key == "seq") {  // shardscope's own export
      if (auto n = number(field.value)) (key == "bytes" ? r.bytes : r.seq) = int64_t(*n);
    } else if (key == "Seq" || key == "Sequence number") {
      if (auto n = number(field.value)) r.seq = int64_t(*n);
    } else if (key == "In msg nelems") {
      if (auto n = number(field.value)) nelems = int64_t(*n);
    } else if (key == "dtype") {
      dtype = text_of(field.value);
    } else if (key == "Group size") {
      if (auto n = number(field.value)) r.group_size = int64_t(*n);
    } else if (key == "Total Allocated") {
      if (auto n = number(field.value)) r.allocated = int64_t(*n);
    } else if (key == "correlation") {
      if (auto n = number(field.value)) r.correlation = int64_t(*n);
    } else if (key == "Concrete Inputs") {
      simdjson::dom::array inputs;
      std::string_view peer;
      if (!field.value.get(inputs) && inputs.size() > 2 && !inputs.at(2).get(peer) &&
          !peer.empty() && peer.size() < 6 &&
          peer.find_first_not_of("0123456789") == std::string_view::npos)
        r.peer = std::min(std::stoi(std::string(peer)), 32767);
    }
  }
  if (nelems >= 0) r.bytes = nelems * element_bytes(dtype);
  if (r.bytes == 0) {
    simdjson::dom::element dims;
    if (!args["Input Dims"].get(dims)) {
      std::string type = "float";
      simdjson::dom::array t;
      if (!args["Input type"].get(t) && t.size() > 0) type = text_of(t.at(0).value());
      r.bytes = first_tensor_elements(dims) * element_bytes(type);
    }
  }
}

std::string read_file(const std::string& path) {
  if (const std::string why = input_file_problem(path, kMaxTraceBytes, "trace file"); !why.empty())
    throw TraceFormatError(why);
  const bool gz = path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
  std::string bytes;
  if (!gz) {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    return bytes;
  }
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) throw TraceFormatError(path + ": cannot open");
  char chunk[1 << 16];
  int n = 0;
  while ((n = gzread(file, chunk, sizeof chunk)) > 0) {
    bytes.append(chunk, size_t(n));
    if (bytes.size() > kMaxTraceBytes) {
      gzclose(file);
      throw TraceFormatError(path + ": more than 8 GiB when unpacked");
    }
  }
  int error = Z_OK;
  const std::string why = n < 0 ? gzerror(file, &error) : "";
  gzclose(file);
  if (n < 0) throw TraceFormatError(path + ": not a whole gzip file (" + why + ")");
  return bytes;
}

RankFile scan_text(const std::string& path, const std::string& text) {
  RankFile f;
  f.path = path;
  const chrome_json::Document doc = chrome_json::scan(text, [&](simdjson::dom::object e) {
    Raw r;
    std::string_view ph;
    if (e["ph"].get(ph) || ph.empty()) return;
    r.ph = ph[0];
    if (r.ph == 'M') {
      std::string_view name;
      simdjson::dom::object args;
      simdjson::dom::element pid, tid, thread;
      if (!e["name"].get(name) && name == "thread_name" && !e["args"].get(args) &&
          !e["pid"].get(pid) && !e["tid"].get(tid) && !args["name"].get(thread)) {
        f.thread_names[{text_of(pid), text_of(tid)}] = text_of(thread);
      }
      return;
    }
    if (r.ph != 'X' && r.ph != 'i' && r.ph != 'I') return;  // flows and counters: not kept
    std::string_view scope;
    if (r.ph != 'X' && !e["s"].get(scope) && scope == "g") return;  // the profiler's markers
    const auto ts = e["ts"].error() ? std::nullopt : number(e["ts"].value_unsafe());
    if (!ts || !std::isfinite(*ts) || std::fabs(*ts) > 1e13) return;  // no usable time
    r.ts_us = *ts;
    if (!e["dur"].error()) {
      const auto dur = number(e["dur"].value_unsafe());
      r.dur_us = dur && std::isfinite(*dur) && *dur > 0 && *dur < 1e12 ? *dur : 0;
    }
    std::string_view s;
    if (!e["cat"].get(s)) r.cat = std::string(s);
    if (r.cat == "Trace") return;  // the profiler's own span over the whole recording
    if (!e["name"].get(s)) r.name = std::string(s);
    if (!e["pid"].error()) r.pid = text_of(e["pid"].value_unsafe());
    if (!e["tid"].error()) r.tid = text_of(e["tid"].value_unsafe());
    simdjson::dom::object args;
    if (!e["args"].get(args)) read_args(args, r);
    f.events.push_back(std::move(r));
  });
  if (!doc.saw_events) throw TraceFormatError(path + ": no traceEvents array");
  // In time order: a collective's place among the rank's is its order in time.
  std::stable_sort(f.events.begin(), f.events.end(),
                   [](const Raw& a, const Raw& b) { return a.ts_us < b.ts_us; });
  const nlohmann::json& k = doc.kineto;
  if (k.contains("baseTimeNanoseconds") && k["baseTimeNanoseconds"].is_number_integer())
    f.base_ns = k["baseTimeNanoseconds"].get<int64_t>();
  if (f.base_ns > (int64_t{1} << 62) || f.base_ns < -(int64_t{1} << 62)) f.base_ns = 0;  // hostile
  if (k.contains("deviceProperties") && k["deviceProperties"].is_array() &&
      !k["deviceProperties"].empty() && k["deviceProperties"][0].is_object() &&
      k["deviceProperties"][0].contains("name") && k["deviceProperties"][0]["name"].is_string())
    f.device_name = k["deviceProperties"][0]["name"].get<std::string>().substr(0, 200);
  if (k.contains("distributedInfo") && k["distributedInfo"].is_object()) {
    const auto& d = k["distributedInfo"];
    if (d.contains("rank") && d["rank"].is_number_integer()) f.rank = d["rank"].get<int>();
    if (d.contains("world_size") && d["world_size"].is_number_integer())
      f.world = d["world_size"].get<int>();
    if (d.contains("backend") && d["backend"].is_string()) f.backend = d["backend"];
    if (d.contains("pg_config") && d["pg_config"].is_array() && !d["pg_config"].empty() &&
        d["pg_config"][0].contains("pg_name") && d["pg_config"][0]["pg_name"].is_string())
      f.default_group = d["pg_config"][0]["pg_name"];
  }
  if (f.rank < 0) {
    // rank-3.json, rank3, _r3_: the number after "rank" or "r" in the name.
    static const std::regex named(R"((?:rank|^r|_r)[-_]?(\d{1,6}))", std::regex::icase);
    std::smatch m;
    const std::string name = fs::path(path).filename().string();
    if (std::regex_search(name, m, named)) f.rank = std::stoi(m[1]);
  }
  return f;
}

}  // namespace

// `text` is `path`'s bytes, or null to read them; a failure names the file.
RankFile scan_kineto_file(const std::string& path, const std::string* text) {
  try {
    return text != nullptr ? scan_text(path, *text) : scan_text(path, read_file(path));
  } catch (const TraceFormatError& e) {
    const std::string what = e.what();
    throw TraceFormatError(what.rfind(path, 0) == 0 ? what : path + ": " + what);
  }
}

}  // namespace shardscope::profiling
