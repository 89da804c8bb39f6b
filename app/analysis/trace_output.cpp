#include "app/analysis/trace_output.h"

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>

#include "engine/state/atomic_file.h"
#include "profiling/io/chakra_trace.h"
#include "profiling/io/kineto_trace.h"
#include "profiling/io/trace_io.h"

namespace shardscope::analysis {

namespace fs = std::filesystem;

bool is_trace_directory(const std::string& target) {
  std::error_code ec;
  return (!target.empty() && target.back() == '/') || fs::is_directory(target, ec);
}

std::string trace_target_problem(const std::string& target) {
  if (!is_trace_directory(target)) return "";
  std::error_code ec;
  const fs::path dir(target);
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    return target + " is a file, not a directory";
  if (!fs::exists(dir, ec)) {
    fs::path parent = dir.parent_path();
    while (!parent.empty() && parent.filename().empty()) parent = parent.parent_path();
    // Creating it now would leave an empty folder behind a failed run; its nearest existing
    // ancestor must be a directory, or creation will fail.
    while (!parent.empty() && !fs::exists(parent, ec)) parent = parent.parent_path();
    if (!parent.empty() && !fs::is_directory(parent, ec))
      return parent.string() + " is a file, not a directory";
  }
  return "";
}

std::string native_trace_in(const std::string& directory) {
  return (fs::path(directory) / "trace.sst").string();
}

namespace {

// Whether a rank file names shardscope near its start (Kineto's traceName, a Chakra trace's
// metadata), as every one we write does: only those are ours to remove.
bool written_by_shardscope(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return head.find("shardscope") != std::string::npos;
}

}  // namespace

bool written_into_trace_directory(const std::string& file_name) {
  static const std::regex rank_file(R"(rank-\d+\.(json|et))");
  return file_name == "trace.sst" || std::regex_match(file_name, rank_file);
}

std::string write_trace(const profiling::Trace& trace, const std::string& target) {
  if (!is_trace_directory(target)) {
    write_file_atomically(target, profiling::serialise_trace(trace, target));
    return "trace written to " + target;
  }
  const fs::path dir(target);
  fs::create_directories(dir);
  std::error_code ec;
  std::set<std::string> written;
  int chakra = 0;
  for (const auto& rank : trace.ranks) {
    const std::string name = profiling::kineto_file_name(rank.rank);
    write_file_atomically((dir / name).string(), profiling::to_kineto_json(trace, rank));
    written.insert(name);
    if (!profiling::chakra_export_built()) continue;
    const std::string et = profiling::chakra_file_name(rank.rank);
    write_file_atomically((dir / et).string(), profiling::to_chakra_et(trace, rank));
    written.insert(et);
    ++chakra;
  }
  // Rank files of an earlier, wider run of ours would read as ranks of this one.
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (entry.is_regular_file(ec) && written_into_trace_directory(name) && name != "trace.sst" &&
        written.count(name) == 0 && written_by_shardscope(entry.path().string()))
      fs::remove(entry.path());
  }
  const std::string native = native_trace_in(target);
  write_file_atomically(native, profiling::to_native(trace));
  const std::string chakra_note =
      profiling::chakra_export_built()
          ? std::to_string(chakra) + " Chakra execution traces (ASTRA-sim), "
          : "no Chakra execution traces (built without protobuf), ";
  return "trace written to " + target + ": " + std::to_string(trace.ranks.size()) +
         " Kineto rank files (Holistic Trace Analysis), " + chakra_note + "and " + native;
}

}  // namespace shardscope::analysis
