#include "profiling/io/trace_io.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/support/sample_trace.h"
#include "tests/support/temp_dir.h"

namespace shardscope::profiling {
namespace {

TEST(NativeTrace, RoundTripsEveryField) {
  Trace t = test::sample_trace();
  test::expect_same_trace(t, from_native(to_native(t)));
  EXPECT_EQ(run_record_to_json(from_native(to_native(t)).run), run_record_to_json(t.run));
}

TEST(ChromeTrace, RoundTripsEveryFieldToTheNanosecond) {
  Trace t = test::sample_trace();
  Trace back = from_chrome_json(to_chrome_json(t));
  test::expect_same_trace(t, back);
  EXPECT_EQ(back.run.strategy, "ddp_bucketed");
}

TEST(ChromeTrace, IsAValidTraceEventFile) {
  auto doc = nlohmann::json::parse(to_chrome_json(test::sample_trace()));
  ASSERT_TRUE(doc["traceEvents"].is_array());
  std::set<int> named_processes;
  // In whole nanoseconds: ts + dur in floating point can land a hair past the next ts.
  std::map<std::pair<int, int>, std::vector<std::pair<int64_t, int64_t>>> spans;
  std::map<int64_t, int> flow_ends;
  int counters = 0;
  for (const auto& e : doc["traceEvents"]) {
    const std::string ph = e.at("ph");
    ASSERT_TRUE(e.contains("pid")) << e.dump();
    if (ph == "M" && e["name"] == "process_name") named_processes.insert(e["pid"].get<int>());
    if (ph == "X") {
      for (const char* key : {"name", "cat", "tid", "ts", "dur"}) {
        ASSERT_TRUE(e.contains(key)) << key << " missing in " << e.dump();
      }
      EXPECT_GE(e["ts"].get<double>(), 0.0);
      EXPECT_GE(e["dur"].get<double>(), 0.0);
      const int64_t t0 = std::llround(e["ts"].get<double>() * 1000);
      spans[{e["pid"].get<int>(), e["tid"].get<int>()}].push_back(
          {t0, t0 + std::llround(e["dur"].get<double>() * 1000)});
    }
    if (ph == "C") {
      ++counters;
      EXPECT_TRUE(e["args"].contains("bytes"));
    }
    if (ph == "s") ++flow_ends[e["id"].get<int64_t>()];
    if (ph == "f") {
      --flow_ends[e["id"].get<int64_t>()];
      EXPECT_EQ(e["bp"], "e");
    }
  }
  // Ranks 0 and 1 as pids 1 and 2: Perfetto reserves pid 0.
  EXPECT_EQ(named_processes, (std::set<int>{1, 2}));
  EXPECT_EQ(counters, 4);
  // Two collectives matched across the two ranks, and the send to its recv.
  EXPECT_EQ(flow_ends.size(), 3u);
  for (const auto& [id, balance] : flow_ends) EXPECT_EQ(balance, 0) << "flow " << id;
  // Complete events on one thread must nest (Perfetto and chrome://tracing require it).
  for (auto& [thread, list] : spans) {
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return a.first < b.first || (a.first == b.first && a.second > b.second);
    });
    std::vector<int64_t> open_ends;
    for (const auto& [t0, t1] : list) {
      while (!open_ends.empty() && open_ends.back() <= t0) open_ends.pop_back();
      if (!open_ends.empty()) {
        EXPECT_LE(t1, open_ends.back())
            << "pid " << thread.first << " tid " << thread.second << " overlaps at " << t0;
      }
      open_ends.push_back(t1);
    }
  }
}

TEST(NativeTrace, EveryTruncationIsAnErrorNotACrash) {
  const std::string bytes = to_native(test::sample_trace());
  for (size_t n = 0; n < bytes.size(); ++n) {
    EXPECT_THROW(from_native(bytes.substr(0, n)), TraceFormatError) << "cut at " << n;
  }
}

TEST(NativeTrace, CorruptionIsDetected) {
  const std::string good = to_native(test::sample_trace());
  for (size_t at : {size_t{40}, good.size() / 2, good.size() - 1}) {
    std::string bad = good;
    bad[at] ^= 0x5a;
    EXPECT_THROW(from_native(bad), TraceFormatError) << "flipped byte " << at;
  }
  std::string wrong_magic = good;
  wrong_magic[0] = 'X';
  EXPECT_THROW(from_native(wrong_magic), TraceFormatError);
  std::string future = good;
  future[8] = 99;  // version
  try {
    from_native(future);
    ADD_FAILURE() << "version 99 accepted";
  } catch (const TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("version"), std::string::npos) << e.what();
  }
}

// A hostile file with a valid checksum but absurd counts must not allocate or read past the end.
// A file whose checksum is whole but whose event moves a negative number of bytes (nothing we
// write) is refused on reading, before a report prints "-0.00 MB" or a replay "negative size".
TEST(NativeTrace, AnEventOfNegativeBytesIsCorrupt) {
  Trace t = test::sample_trace();
  ASSERT_FALSE(t.ranks.at(0).events.empty());
  t.ranks[0].events[0].bytes = -5;
  try {
    from_native(to_native(t));
    ADD_FAILURE() << "read an event of -5 bytes";
  } catch (const TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("negative number of bytes"), std::string::npos)
        << e.what();
  }
  // The Chrome form too, naming the event (sweep 3: "negative size" came from the pricing, or
  // report drew it).
  Trace collective = test::sample_trace();
  for (Event& e : collective.ranks[0].events) {
    if (e.category == Category::kCollective) {
      e.bytes = -5;
      break;
    }
  }
  try {
    from_chrome_json(to_chrome_json(collective));
    ADD_FAILURE() << "read a Chrome event of -5 bytes";
  } catch (const TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("args.bytes is negative (-5)"), std::string::npos)
        << e.what();
  }
  // After its end, bytes are named as such, not as a cut.
  const std::string whole = to_native(test::sample_trace());
  try {
    from_native(whole + "xx");
    ADD_FAILURE() << "read a trace with bytes after its end";
  } catch (const TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("bytes after its end"), std::string::npos) << e.what();
  }
}

TEST(NativeTrace, HostileCountsAreRejectedBeforeAllocating) {
  Trace t;
  t.ranks.push_back({});
  t.ranks[0].lanes = {"host"};
  std::string bytes = to_native(t);
  // The rank's event count sits after: run json (4+2), string table (8 + 4+0), rank count (8),
  // rank (4), lane count (8), lane (4+4), failure (4+0).
  const size_t events_at = 32 + 6 + 12 + 8 + 4 + 8 + 8 + 4;
  const uint64_t absurd = uint64_t{1} << 60;
  std::memcpy(&bytes[events_at], &absurd, 8);
  // Recompute the checksum so that only the count is wrong.
  uint64_t h = 14695981039346656037ull;  // FNV-1a's offset basis (version 2)
  for (size_t i = 32; i < bytes.size(); ++i) {
    h ^= static_cast<unsigned char>(bytes[i]);
    h *= 1099511628211ull;
  }
  std::memcpy(&bytes[24], &h, 8);
  try {
    from_native(bytes);
    ADD_FAILURE() << "absurd count accepted";
  } catch (const TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("exceeds"), std::string::npos) << e.what();
  }
}

TEST(ChromeTrace, BrokenFilesAreClearErrors) {
  const std::string good = to_chrome_json(test::sample_trace());
  for (size_t n : {size_t{0}, size_t{1}, good.size() / 3, good.size() - 2}) {
    EXPECT_THROW(from_chrome_json(good.substr(0, n)), TraceFormatError) << "cut at " << n;
  }
  for (
      const char* text :
      {"[]", "{}", R"({"traceEvents": 3})", R"({"traceEvents": [1]})",
       R"({"traceEvents": [{"ph": "X", "pid": 0, "tid": 0, "ts": 1, "name": "a"}]})",
       R"({"traceEvents": [{"ph": "X", "pid": 0, "tid": 0, "ts": 1, "dur": -5, "name": "a"}]})",
       R"({"traceEvents": [{"ph": "X", "pid": -1, "tid": 0, "ts": 1, "dur": 1, "name": "a"}]})",
       // A file of ours (it says so) must fit our lanes: tid 900 is no lane.
       R"({"traceEvents": [{"ph": "X", "pid": 0, "tid": 900, "ts": 1, "dur": 1, "name": "a"}],
           "otherData": {"format": "shardscope"}})",
       R"({"traceEvents": [{"ph": "X", "pid": 0, "tid": 0, "ts": "x", "dur": 1, "name": "a"}]})",
       R"({"traceEvents": [{"ph": "X", "pid": 0, "tid": 0, "ts": 1e300, "dur": 1, "name": "a"}]})"}) {
    EXPECT_THROW(from_chrome_json(text), TraceFormatError) << text;
  }
}

// A file that is not a trace says what it is not (not where a JSON parser stumbled in it).
TEST(TraceFiles, WhatAFileIsNotIsNamed) {
  const auto dir = test::test_temp_dir();
  const std::pair<std::string, std::string> cases[] = {
      {"", "the file is empty"},
      {"  \n", "only white space"},
      {"SSTR", "truncated trace"},
      {std::string("\x89PNG\r\n\x1a\n\0\0\0", 12), "starts with SSTRACE"},
      {"hello world", "not a trace"},
      {"SSTRACE", "truncated trace"},
  };
  int i = 0;
  for (const auto& [bytes, phrase] : cases) {
    const auto path = (dir / ("case" + std::to_string(i++) + ".sst")).string();
    std::ofstream(path, std::ios::binary) << bytes;
    try {
      read_trace_file(path);
      ADD_FAILURE() << "read: " << path;
    } catch (const TraceFormatError& e) {
      EXPECT_NE(std::string(e.what()).find(phrase), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    }
  }
  try {
    read_trace_file(dir.string());
    ADD_FAILURE() << "read a directory";
  } catch (const TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("is a directory"), std::string::npos) << e.what();
  }
}

// The process and thread metadata say which rank and lane a pid and tid are, wherever in the
// file they come; what they say must make sense.
TEST(ChromeTrace, MetadataPutsSlotsBackOnTheirLaneAndPidsOnTheirRank) {
  const Trace t = from_chrome_json(R"({"traceEvents": [
    {"ph":"X","name":"all_reduce","cat":"collective","pid":3,"tid":5,"ts":1,"dur":1},
    {"ph":"X","name":"step","cat":"step","pid":3,"tid":1,"ts":0,"dur":4},
    {"ph":"M","name":"thread_name","pid":3,"tid":5,"args":{"name":"comm 3","lane":1,"lane_name":"comm"}},
    {"ph":"M","name":"thread_name","pid":3,"tid":1,"args":{"name":"host","lane":0,"lane_name":"host"}},
    {"ph":"M","name":"process_name","pid":3,"args":{"name":"rank 2","rank":2}}]})");
  ASSERT_EQ(t.ranks.size(), 1u);
  EXPECT_EQ(t.ranks[0].rank, 2);
  EXPECT_EQ(t.ranks[0].lanes, (std::vector<std::string>{"host", "comm"}));
  ASSERT_EQ(t.ranks[0].events.size(), 2u);
  EXPECT_EQ(t.ranks[0].events[0].lane, kHostLane);
  EXPECT_EQ(t.ranks[0].events[1].lane, kCommLane);
  for (
      const char* text : {
          R"({"traceEvents": [{"ph":"M","name":"process_name","pid":1,"args":{"rank":0}},
                               {"ph":"M","name":"process_name","pid":2,"args":{"rank":0}}]})",
          R"({"traceEvents": [{"ph":"M","name":"process_name","pid":1,"args":{"rank":70000}}]})",
          R"({"traceEvents": [{"ph":"M","name":"thread_name","pid":1,"tid":1,"args":{"lane":300}}]})",
          R"({"traceEvents": [{"ph":"M","name":"thread_name","pid":1,"tid":300,"args":{}}],
              "otherData": {"format": "shardscope"}})"}) {
    EXPECT_THROW(from_chrome_json(text), TraceFormatError) << text;
  }
}

// PyTorch's profiler writes process ids as pids and thread ids as tids (past our ranks and
// lanes), and names some by text: such a file opens as a trace, a rank per process and a lane
// per thread, events kept.
TEST(ChromeTrace, AnotherToolsTraceOpensAsProcessesAndThreads) {
  const Trace t = from_chrome_json(R"({"schemaVersion": 1, "traceEvents": [
    {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":2841234,"tid":2841234,"ts":1700000000000.5,"dur":12.5},
    {"ph":"X","cat":"cpu_op","name":"aten::add","pid":2841234,"tid":2841299,"ts":1700000000001,"dur":2},
    {"ph":"X","cat":"kernel","name":"sgemm","pid":0,"tid":7,"ts":1700000000020,"dur":3},
    {"ph":"X","cat":"gpu_user_annotation","name":"step","pid":0,"tid":"stream 7 ","ts":1700000000020,"dur":5},
    {"ph":"M","name":"thread_name","pid":2841234,"tid":2841234,"args":{"name":"python3"}},
    {"ph":"M","name":"process_name","pid":2841234,"tid":0,"args":{"name":"python3"}},
    {"ph":"f","id":10,"pid":0,"tid":7,"ts":1700000000020,"cat":"ac2g","name":"ac2g","bp":"e"},
    {"ph":"i","s":"t","name":"Iteration Start","pid":"Traces","tid":"PyTorch Profiler","ts":1700000000000}],
    "traceName": "worker0.pt.trace.json"})");
  ASSERT_EQ(t.ranks.size(), 2u);
  EXPECT_EQ(t.event_count(), 4u);
  EXPECT_EQ(t.ranks[0].rank, 0);  // the GPU process keeps its pid
  EXPECT_EQ(t.ranks[0].lanes.size(), 2u);
  EXPECT_EQ(t.ranks[1].rank, 1);  // the CPU process's pid is no rank: numbered after
  EXPECT_EQ(t.ranks[1].lanes, (std::vector<std::string>{"python3", "thread 2841299"}));
  EXPECT_TRUE(t.run.empty());
}

TEST(TraceFiles, ChosenByNameReadByContent) {
  const auto dir = test::test_temp_dir();
  Trace t = test::sample_trace();
  for (const char* name : {"trace.json", "trace.sst"}) {
    const auto path = (dir / name).string();
    std::ofstream(path, std::ios::binary) << serialise_trace(t, path);
    test::expect_same_trace(t, read_trace_file(path));
  }
  EXPECT_EQ(serialise_trace(t, "x.json").front(), '{');
  EXPECT_EQ(serialise_trace(t, "x.sst").substr(0, 7), "SSTRACE");
  EXPECT_THROW(read_trace_file((dir / "missing.sst").string()), TraceFormatError);
}

// The header's checksum is FNV-1a as published (offset basis 14695981039346656037), computed
// here independently; files of version 1, whose basis lost a digit, still open.
TEST(TraceFiles, TheChecksumIsStandardFnv1aAndVersionOneFilesStillOpen) {
  const std::string bytes = serialise_trace(test::sample_trace(), "x.sst");
  uint32_t version = 0;
  uint64_t checksum = 0;
  std::memcpy(&version, bytes.data() + 8, 4);
  std::memcpy(&checksum, bytes.data() + 24, 8);
  EXPECT_EQ(version, 3u);
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 32; i < bytes.size(); ++i) {
    h ^= static_cast<unsigned char>(bytes[i]);
    h *= 0x100000001b3ull;
  }
  EXPECT_EQ(checksum, h);
  const std::string old = std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces/fsdp-w4-v1.sst";
  std::ifstream in(old, std::ios::binary);
  std::string old_bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::memcpy(&version, old_bytes.data() + 8, 4);
  ASSERT_EQ(version, 1u) << "the asset was rewritten: keep a version-1 file to test";
  EXPECT_EQ(read_trace_file(old).ranks.size(), 4u);
  // Version 2 has no time off the core in its events: they read as 0 (not measured).
  const std::string v2 = std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces/failed-w2-v2.sst";
  std::ifstream in2(v2, std::ios::binary);
  char header[12] = {};
  in2.read(header, sizeof header);
  std::memcpy(&version, header + 8, 4);
  ASSERT_EQ(version, 2u) << "the asset was rewritten: keep a version-2 file to test";
  const Trace t2 = read_trace_file(v2);
  ASSERT_EQ(t2.ranks.size(), 2u);
  for (const auto& rank : t2.ranks) {
    for (const auto& e : rank.events) ASSERT_EQ(e.off_cpu_us, 0);
  }
}

}  // namespace
}  // namespace shardscope::profiling

namespace shardscope::profiling {
namespace {

// Inputs the fuzzer (scripts/fuzz.sh) found crashing or misbehaving, kept as regressions: each
// is now either read or rejected with a TraceFormatError, never anything else.
TEST(TraceFuzzRegressions, EveryFoundInputIsReadOrRejectedCleanly) {
  const std::string dir = std::string(SHARDSCOPE_SOURCE_DIR) + "/tests/fuzz/regressions";
  size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ++files;
    try {
      const Trace t = parse_trace(bytes);
      EXPECT_EQ(from_native(to_native(t)).event_count(), t.event_count()) << entry.path();
    } catch (const TraceFormatError&) {
      // the answer to bad input
    }
  }
  EXPECT_GE(files, 1u);
}

TEST(ChromeTrace, AFloatTooLargeForAnIntegerFieldIsAnError) {
  const std::string text =
      R"({"traceEvents":[{"ph":"X","name":"a","pid":5.66667e+87,"tid":0,"ts":1,"dur":1}]})";
  EXPECT_THROW(from_chrome_json(text), TraceFormatError);
  const std::string narrow =
      R"({"traceEvents":[{"ph":"X","name":"a","pid":0,"tid":0,"ts":1,"dur":1,"args":{"micro":70000}}]})";
  EXPECT_THROW(from_chrome_json(narrow), TraceFormatError);
}

}  // namespace
}  // namespace shardscope::profiling

namespace shardscope::profiling {
namespace {

std::string chrome_error(const std::string& text) {
  try {
    from_chrome_json(text);
  } catch (const TraceFormatError& e) {
    return e.what();
  }
  return "(read)";
}

std::string x_event(int ts, const std::string& args = "{}") {
  return R"({"ph":"X","name":"n","cat":"forward","pid":1,"tid":0,"ts":)" + std::to_string(ts) +
         R"(,"dur":1,"args":)" + args + "}";
}

// The reader parses the events a batch at a time (chrome_json_scan.cpp): a file of many batches
// reads whole, and of two things wrong in it the first in the file is named, as when a
// streaming parser read it.
TEST(ChromeTrace, ManyBatchesReadWholeAndTheFirstFaultIsNamed) {
  std::string text = R"({"traceEvents":[)";
  for (int i = 0; i < 20000; ++i) text += (i ? "," : "") + x_event(i);
  text += "]}";
  ASSERT_GT(text.size(), size_t{1} << 20);  // three batches
  EXPECT_EQ(from_chrome_json(text).event_count(), 20000u);
  std::string broken = text;
  broken.insert(broken.size() - 1000, "\xff");
  EXPECT_NE(chrome_error(broken).find("not valid JSON"), std::string::npos);
  broken.replace(broken.find(R"("ts":3000,)"), 10, R"("ts":"x",)");
  EXPECT_NE(chrome_error(broken).find("traceEvents[3000]: X event: field 'ts' has the wrong type"),
            std::string::npos)
      << chrome_error(broken);
  EXPECT_NE(chrome_error(text.substr(0, text.size() / 2)).find("not valid JSON"),
            std::string::npos);
  const size_t second = text.find("},{") + 2;
  EXPECT_NE(chrome_error(text.substr(0, second) + "7," + text.substr(second)).find("not an object"),
            std::string::npos);
}

// A field's fault names the event (its place in traceEvents) and what is wrong with the value:
// a rank too large for a peer was once "the wrong type".
TEST(ChromeTrace, AFieldsFaultNamesItsEventAndWhetherItIsItsTypeOrItsRange) {
  const std::string two = R"({"traceEvents":[)" + x_event(1) + ",";
  EXPECT_NE(chrome_error(two + x_event(2, R"({"peer":99999})") + "]}")
                .find("traceEvents[1]: trace event: field 'peer' is out of range (99999)"),
            std::string::npos)
      << chrome_error(two + x_event(2, R"({"peer":99999})") + "]}");
  EXPECT_NE(chrome_error(two + x_event(2, R"({"peer":"one"})") + "]}")
                .find("traceEvents[1]: trace event: field 'peer' has the wrong type"),
            std::string::npos);
}

// nlohmann, the parser before simdjson, read an integer past 64 bits as a float, any depth, and
// a NUL byte as the end of the input: files that opened then still do.
TEST(ChromeTrace, WhatOpenedBeforeStillOpens) {
  const std::string huge = "123456789012345678901234567890";
  EXPECT_EQ(chrome_error(R"({"traceEvents":[)" + x_event(1, R"({"id":)" + huge + "}") +
                         R"(],"seed":-)" + huge + "}"),
            "(read)");
  EXPECT_NE(chrome_error(R"({"traceEvents":[)" + x_event(1, R"({"bytes":)" + huge + "}") + "]}")
                .find("field 'bytes' is out of range"),
            std::string::npos)
      << chrome_error(R"({"traceEvents":[)" + x_event(1, R"({"bytes":)" + huge + "}") + "]}");
  EXPECT_NE(chrome_error(R"({"traceEvents":[)" + x_event(1, R"({"bytes":1e400})") + "]}")
                .find("not valid JSON"),
            std::string::npos);
  const std::string deep = std::string(5000, '[') + std::string(5000, ']');
  EXPECT_EQ(chrome_error(R"({"traceEvents":[)" + x_event(1, deep) + R"(],"deep":)" + deep + "}"),
            "(read)");
  EXPECT_EQ(chrome_error(R"({"traceEvents":[]})" + std::string(64, '\0')), "(read)");
}

}  // namespace
}  // namespace shardscope::profiling
