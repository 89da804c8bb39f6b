#pragma once

// One PyTorch profiler (Kineto) trace file read into its raw events and what its top level says,
// before kineto_reader.cpp gives them lanes and categories and joins the ranks' files.
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace shardscope::profiling {

// One event as the file has it, before lanes and categories are known.
struct Raw {
  char ph = 'X';
  double ts_us = 0, dur_us = 0;
  std::string cat, name, pid, tid;
  // From args, where present.
  std::string group;       // "Process Group Name"
  std::string collective;  // "Collective name"
  int64_t seq = -1;        // "Seq" (collectives) or "correlation" (kernels, runtime calls)
  int64_t bytes = 0, group_size = 0, allocated = -1, correlation = -1;
  int peer = -1;  // c10d::send / c10d::recv_: the other end ("Concrete Inputs"[2])
};

// One file's events and what its top level says.
struct RankFile {
  std::string path;
  int rank = -1;
  int64_t base_ns = 0;
  int world = 0;
  std::string backend, default_group = "0";
  std::string device_name;  // deviceProperties' first GPU
  std::vector<Raw> events;
  std::map<std::pair<std::string, std::string>, std::string> thread_names;
};

// `path`'s events; `text` is its bytes, or null to read them (gzipped or not). Throws
// TraceFormatError naming the file.
RankFile scan_kineto_file(const std::string& path, const std::string* text);

}  // namespace shardscope::profiling
