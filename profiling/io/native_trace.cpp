// The native trace format (.sst): a 32-byte header, then the payload.
//   header: magic "SSTRACE\0", u32 version, u32 header size, u64 payload size,
//           u64 FNV-1a checksum of the payload
//   version 3 is written. Version 2, read too, has no i32 off_cpu_us after an event's step
//   (52-byte event records, not 56); version 1 is version 2 with its checksum's offset basis
//   1469598103934665603 (FNV-1a's 14695981039346656037 with a digit lost).
//   payload: run JSON, string table, then per rank: rank, lanes, failure, events (fixed
//            56-byte records), memory counters (17-byte records). Little-endian throughout.
// The reader trusts nothing: every count is checked against the bytes that remain before
// anything is allocated, every index against its table, every enum against its range.
#include <algorithm>
#include <array>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "profiling/io/input_file.h"
#include "profiling/io/kineto_reader.h"
#include "profiling/io/trace_io.h"

namespace shardscope::profiling {
namespace {

constexpr char kMagic[8] = {'S', 'S', 'T', 'R', 'A', 'C', 'E', '\0'};
constexpr uint32_t kVersion = 3;
constexpr uint32_t kOldestVersion = 1;
constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kVersion1Offset = 1469598103934665603ull;
constexpr uint32_t kHeaderSize = 32;
constexpr size_t kEventRecord = 8 * 4 + 4 * 2 + 4 + 4 + 2 * 3 + 1 + 1;
constexpr size_t kVersion2EventRecord = kEventRecord - 4;  // no off_cpu_us
constexpr size_t kCounterRecord = 8 + 8 + 1;

uint64_t fnv1a(const char* data, size_t size, uint64_t offset_basis) {
  uint64_t h = offset_basis;
  for (size_t i = 0; i < size; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= 1099511628211ull;
  }
  return h;
}

class Writer {
 public:
  template <typename T>
  void put(T value) {
    char buf[sizeof(T)];
    std::memcpy(buf, &value, sizeof(T));
    out_.append(buf, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint32_t>(static_cast<uint32_t>(s.size()));
    out_.append(s);
  }
  std::string& bytes() { return out_; }

 private:
  std::string out_;
};

class Reader {
 public:
  Reader(const char* data, size_t size) : data_(data), size_(size) {}

  template <typename T>
  T get(const char* what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }
  std::string get_string(const char* what) {
    const uint32_t n = get<uint32_t>(what);
    need(n, what);
    std::string s(data_ + pos_, n);
    pos_ += n;
    return s;
  }
  // A count of records of `record` bytes each that must fit in what is left.
  uint64_t get_count(size_t record, const char* what) {
    const uint64_t n = get<uint64_t>(what);
    if (record > 0 && n > (size_ - pos_) / record) {
      throw TraceFormatError(std::string("corrupt trace: ") + what + " count " + std::to_string(n) +
                             " exceeds the file");
    }
    return n;
  }
  bool done() const { return pos_ == size_; }

 private:
  void need(size_t n, const char* what) {
    if (n > size_ - pos_) {
      throw TraceFormatError(std::string("truncated trace: ") + what + " at byte " +
                             std::to_string(pos_ + kHeaderSize));
    }
  }
  const char* data_;
  size_t size_;
  size_t pos_ = 0;
};

}  // namespace

std::string to_native(const Trace& trace) {
  Writer w;
  w.put_string(run_record_to_json(trace.run));
  w.put<uint64_t>(trace.strings.size());
  for (const auto& s : trace.strings) w.put_string(s);
  w.put<uint64_t>(trace.ranks.size());
  for (const auto& r : trace.ranks) {
    w.put<int32_t>(r.rank);
    w.put<uint64_t>(r.lanes.size());
    for (const auto& lane : r.lanes) w.put_string(lane);
    w.put_string(r.failure);
    w.put<uint64_t>(r.events.size());
    for (const auto& e : r.events) {
      w.put(e.t0_ns);
      w.put(e.t1_ns);
      w.put(e.bytes);
      w.put(e.seq);
      w.put(e.name);
      w.put(e.group);
      w.put(e.step);
      w.put(e.off_cpu_us);
      w.put(e.micro);
      w.put(e.peer);
      w.put(e.group_size);
      w.put(e.lane);
      w.put(static_cast<uint8_t>(e.category));
    }
    w.put<uint64_t>(r.counters.size());
    for (const auto& c : r.counters) {
      w.put(c.t_ns);
      w.put(c.bytes);
      w.put(static_cast<uint8_t>(c.kind));
    }
  }
  const std::string& payload = w.bytes();
  Writer header;
  header.bytes().append(kMagic, sizeof(kMagic));
  header.put<uint32_t>(kVersion);
  header.put<uint32_t>(kHeaderSize);
  header.put<uint64_t>(payload.size());
  header.put<uint64_t>(fnv1a(payload.data(), payload.size(), kFnvOffset));
  return header.bytes() + payload;
}

Trace from_native(const std::string& bytes) {
  if (bytes.size() < kHeaderSize) throw TraceFormatError("truncated trace: no complete header");
  if (std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    throw TraceFormatError("not a shardscope trace (bad magic)");
  }
  Reader header(bytes.data() + sizeof(kMagic), kHeaderSize - sizeof(kMagic));
  const uint32_t version = header.get<uint32_t>("version");
  const uint32_t header_size = header.get<uint32_t>("header size");
  const uint64_t payload_size = header.get<uint64_t>("payload size");
  const uint64_t checksum = header.get<uint64_t>("checksum");
  if (version < kOldestVersion || version > kVersion) {
    throw TraceFormatError("unsupported trace version " + std::to_string(version) +
                           " (this build reads " + std::to_string(kOldestVersion) + " to " +
                           std::to_string(kVersion) + ")");
  }
  if (header_size != kHeaderSize) throw TraceFormatError("corrupt trace: bad header size");
  if (payload_size != bytes.size() - kHeaderSize) {
    throw TraceFormatError(
        std::string(payload_size > bytes.size() - kHeaderSize ? "truncated trace"
                                                              : "trace with bytes after its end") +
        ": header promises " + std::to_string(payload_size) + " payload bytes, file has " +
        std::to_string(bytes.size() - kHeaderSize));
  }
  const char* payload = bytes.data() + kHeaderSize;
  if (fnv1a(payload, payload_size, version == 1 ? kVersion1Offset : kFnvOffset) != checksum) {
    throw TraceFormatError("corrupt trace: checksum mismatch");
  }

  Reader r(payload, payload_size);
  Trace trace;
  trace.run = run_record_from_json(r.get_string("run description"));
  const uint64_t strings = r.get_count(4, "string");
  if (strings == 0) throw TraceFormatError("corrupt trace: empty string table");
  trace.strings.clear();
  for (uint64_t i = 0; i < strings; ++i) trace.strings.push_back(r.get_string("string"));
  const uint64_t ranks = r.get_count(4 + 8 + 4 + 8 + 8, "rank");
  for (uint64_t k = 0; k < ranks; ++k) {
    RankTrace rank;
    rank.rank = r.get<int32_t>("rank");
    const uint64_t lanes = r.get_count(4, "lane");
    if (lanes > 256) throw TraceFormatError("corrupt trace: more than 256 lanes");
    for (uint64_t i = 0; i < lanes; ++i) rank.lanes.push_back(r.get_string("lane name"));
    rank.failure = r.get_string("failure");
    const bool has_off_cpu = version >= 3;
    const uint64_t events = r.get_count(has_off_cpu ? kEventRecord : kVersion2EventRecord, "event");
    rank.events.resize(events);
    for (auto& e : rank.events) {
      e.t0_ns = r.get<int64_t>("event");
      e.t1_ns = r.get<int64_t>("event");
      e.bytes = r.get<int64_t>("event");
      e.seq = r.get<int64_t>("event");
      e.name = r.get<uint32_t>("event");
      e.group = r.get<uint32_t>("event");
      e.step = r.get<int32_t>("event");
      if (has_off_cpu) e.off_cpu_us = std::max(0, r.get<int32_t>("event"));
      e.micro = r.get<int16_t>("event");
      e.peer = r.get<int16_t>("event");
      e.group_size = r.get<int16_t>("event");
      e.lane = r.get<uint8_t>("event");
      const uint8_t category = r.get<uint8_t>("event");
      if (category >= kCategoryCount) throw TraceFormatError("corrupt trace: bad event category");
      e.category = static_cast<Category>(category);
      if (e.name >= strings || e.group >= strings) {
        throw TraceFormatError("corrupt trace: event names a string that does not exist");
      }
      if (e.lane >= lanes)
        throw TraceFormatError("corrupt trace: event on a lane that does not exist");
      if (e.t1_ns < e.t0_ns) throw TraceFormatError("corrupt trace: event ends before it starts");
      // No event moves fewer than no bytes; a negative count would project as a negative size.
      if (e.bytes < 0) throw TraceFormatError("corrupt trace: event moves a negative number of bytes");
    }
    const uint64_t counters = r.get_count(kCounterRecord, "counter");
    rank.counters.resize(counters);
    for (auto& c : rank.counters) {
      c.t_ns = r.get<int64_t>("counter");
      c.bytes = r.get<int64_t>("counter");
      const uint8_t kind = r.get<uint8_t>("counter");
      if (kind >= kMemoryKindCount) throw TraceFormatError("corrupt trace: bad memory kind");
      c.kind = static_cast<MemoryKind>(kind);
    }
    trace.ranks.push_back(std::move(rank));
  }
  if (!r.done()) throw TraceFormatError("corrupt trace: bytes after the last rank");
  return trace;
}

Trace parse_trace(const std::string& bytes) {
  const size_t prefix = std::min(bytes.size(), sizeof(kMagic));
  if (prefix > 0 && std::memcmp(bytes.data(), kMagic, prefix) == 0) {
    if (bytes.size() < sizeof(kMagic))
      throw TraceFormatError("truncated trace: no complete header");
    return from_native(bytes);
  }
  // Say what the file is not, rather than where a JSON parser first stumbled in it.
  const size_t first = bytes.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) {
    throw TraceFormatError(bytes.empty() ? "the file is empty: not a trace"
                                         : "the file holds only white space: not a trace");
  }
  if (bytes[first] != '{' && bytes[first] != '[') {
    throw TraceFormatError(
        "not a trace: a shardscope trace (.sst) starts with SSTRACE, a Chrome trace (JSON) with { "
        "or [");
  }
  return from_chrome_json(bytes);
}

namespace {

bool gzipped(const std::string& path) {
  return path.size() > 3 && path.compare(path.size() - 3, 3, ".gz") == 0;
}

}  // namespace

std::string serialise_trace(const Trace& trace, const std::string& path) {
  const bool json = path.size() >= 5 && path.compare(path.size() - 5, 5, ".json") == 0;
  return json ? to_chrome_json(trace) : to_native(trace);
}

Trace read_trace_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    throw TraceFormatError(path + " is a directory, not a trace file");
  if (const std::string why = input_file_problem(path, kMaxTraceBytes, "trace file"); !why.empty())
    throw TraceFormatError(
        why.rfind("no such file", 0) == 0 ? "cannot open trace file '" + path + "'" : why);
  if (gzipped(path)) return read_kineto_files({path});  // only the profiler's traces come gzipped
  std::ifstream in(path, std::ios::binary);
  if (!in) throw TraceFormatError("cannot open trace file '" + path + "'");
  // Read straight into one string of the file's size (a stringstream's growing buffer and the
  // copy out of it once held the file three times over).
  std::string bytes;
  const auto size = std::filesystem::file_size(path, ec);
  if (!ec) bytes.reserve(size);
  std::array<char, 1 << 16> chunk;
  while (in.read(chunk.data(), chunk.size()) || in.gcount() > 0) {
    bytes.append(chunk.data(), static_cast<size_t>(in.gcount()));
  }
  try {
    // The PyTorch profiler's trace of one process: read as a rank of its job.
    if (looks_like_kineto(bytes)) return read_kineto_text(path, bytes);
    return parse_trace(bytes);
  } catch (const TraceFormatError& e) {
    throw TraceFormatError(path + ": " + e.what());
  }
}

}  // namespace shardscope::profiling
