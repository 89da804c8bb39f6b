// Reading the PyTorch profiler's own traces (issue 36): folders that torch.profiler wrote around
// DDP, FSDP2 and torch.distributed.pipelining over Gloo on the CPU (scripts/kineto-traces.py,
// shipped in assets/traces/kineto/) and on a GPU (the gpu-* folders), whose format nobody here
// wrote. Ranks, steps, lanes, collectives linked across ranks with their bytes, sends to their
// receives, memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "profiling/io/kineto_reader.h"
#include "profiling/io/trace_io.h"
#include "profiling/metrics/comm_links.h"
#include "profiling/metrics/step_figures.h"
#include "profiling/trace/device_work.h"
#include "tests/support/temp_dir.h"

namespace shardscope::profiling {
namespace {

namespace fs = std::filesystem;

Trace folder(const std::string& name) {
  return read_kineto_files(
      kineto_files_in(std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces/kineto/" + name));
}

int count(const RankTrace& rank, const Trace& t, Category category, const std::string& name = "") {
  int n = 0;
  for (const Event& e : rank.events)
    n += e.category == category && (name.empty() || t.str(e.name) == name);
  return n;
}

// Per rank and step, the bytes of its collectives named `op`.
std::map<int, int64_t> bytes_per_step(const Trace& t, const RankTrace& rank,
                                      const std::string& op) {
  std::map<int, int64_t> out;
  for (const Event& e : rank.events)
    if (e.category == Category::kCollective && t.str(e.name) == op) out[e.step] += e.bytes;
  return out;
}

TEST(KinetoReader, DdpRanksStepsAndBucketsOfGradients) {
  const Trace t = folder("ddp-w2");
  ASSERT_EQ(t.ranks.size(), 2u);
  EXPECT_EQ(t.run.mode, kProfilerMode);
  EXPECT_EQ(t.run.backend, "gloo");
  // The model's parameters: Linear 64->256, 256->256, 256->64 with biases.
  const int64_t gradient_bytes = 4 * (64 * 256 + 256 + 256 * 256 + 256 + 256 * 64 + 64);
  for (const RankTrace& r : t.ranks) {
    EXPECT_EQ(count(r, t, Category::kStep), 3) << r.rank;  // ProfilerStep#1..3
    EXPECT_GE(count(r, t, Category::kOptimizer), 3) << r.rank;
    EXPECT_GT(count(r, t, Category::kBackward), 0) << r.rank;
    EXPECT_GT(count(r, t, Category::kForward), 0) << r.rank;
    EXPECT_FALSE(r.counters.empty()) << "profile_memory's [memory] events";
    EXPECT_EQ(r.lanes[0], "host");
    EXPECT_EQ(r.lanes[1], "comm");
    // DDP all-reduces every gradient once a step, in buckets.
    for (const auto& [step, bytes] : bytes_per_step(t, r, "all_reduce"))
      EXPECT_EQ(bytes, gradient_bytes) << "rank " << r.rank << " step " << step;
  }
  // Every profiled step counts: the profiler's schedule already left out warm-up.
  for (const RankFigures& f : run_figures(t).ranks) EXPECT_EQ(f.steps, 3) << f.rank;
  EXPECT_EQ(measured_steps(t, t.ranks[0]), std::vector<int>({1, 2, 3}));
  // Every collective of rank 0 is linked to rank 1's.
  const auto links = link_communication(t);
  EXPECT_EQ(int(links.size()), count(t.ranks[0], t, Category::kCollective));
  EXPECT_GT(links.size(), 0u);
}

TEST(KinetoReader, Fsdp2GathersOnEveryRankAndEveryCallLinks) {
  const Trace t = folder("fsdp2-w4");
  ASSERT_EQ(t.ranks.size(), 4u);
  const int calls = count(t.ranks[0], t, Category::kCollective);
  EXPECT_GT(count(t.ranks[0], t, Category::kCollective, "all_gather"), 0);
  for (const RankTrace& r : t.ranks) EXPECT_EQ(count(r, t, Category::kCollective), calls);
  // A collective of four ranks is a star of three links from its first.
  EXPECT_EQ(int(link_communication(t).size()), 3 * calls);
}

TEST(KinetoReader, APipelinesSendsReachTheirReceives) {
  const Trace t = folder("pipeline-w2");
  ASSERT_EQ(t.ranks.size(), 2u);
  int sends = 0, p2p = 0;
  for (const RankTrace& r : t.ranks) sends += count(r, t, Category::kCollective, "send");
  for (const CommLink& l : link_communication(t)) {
    p2p += l.point_to_point;
    const Event& from = t.ranks[l.from_rank].events[l.from_event];
    EXPECT_EQ(from.bytes, t.ranks[l.to_rank].events[l.to_event].bytes);
  }
  EXPECT_GT(sends, 0);
  EXPECT_EQ(p2p, sends);
}

TEST(KinetoReader, OneFileIsOneRankAndHostileFilesAreNamed) {
  const auto files =
      kineto_files_in(std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces/kineto/ddp-w2");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(read_trace_file(files[1]).ranks.size(), 1u);  // a .json.gz read by its content
  EXPECT_THROW(read_kineto_files({files[0], files[0]}), TraceFormatError);  // rank 0 twice

  const fs::path dir = test::test_temp_dir();
  // Cut short: a gzip stream that ends early.
  std::ifstream in(files[0], std::ios::binary);
  std::string gz((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir / "cut.json.gz", std::ios::binary) << gz.substr(0, gz.size() / 2);
  try {
    read_kineto_files({(dir / "cut.json.gz").string()});
    ADD_FAILURE() << "read half a gzip file";
  } catch (const TraceFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("cut.json.gz"), std::string::npos) << e.what();
  }
  // What real files hold: string thread ids, an event without dur, one far before the others,
  // and events we do not know. All kept, none a reason to refuse the file.
  std::ofstream(dir / "odd.json") << R"({"schemaVersion": 1, "traceEvents": [
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": "main", "ts": 100.5},
    {"ph": "X", "cat": "cpu_op", "name": "aten::add", "pid": 1, "tid": "main", "ts": 200, "dur": 5},
    {"ph": "X", "cat": "python_function", "name": "x.py(1): f", "pid": 1, "tid": 7, "ts": -50, "dur": 1},
    {"ph": "b", "cat": "async", "name": "?", "pid": 1, "tid": 7, "ts": 3, "id": 1},
    {"ph": "M", "name": "thread_name", "args": {"name": "no pid or tid"}},
    {"ph": "M", "name": "thread_name", "pid": 1, "tid": 2},
    {"ph": "X", "name": "no category", "pid": "p", "tid": "t", "ts": 1e12, "dur": 1}]})";
  const Trace odd = read_kineto_files({(dir / "odd.json").string()});
  ASSERT_EQ(odd.ranks.size(), 1u);
  EXPECT_EQ(odd.ranks[0].events.size(), 4u);
}

// Files of two jobs given as one (`report a.json b.json`) were once drawn as one run, with
// nothing matched between them. Each way they can differ is refused naming both files.
TEST(KinetoReader, FilesOfDifferentJobsAreRefusedNamingThem) {
  const std::string kineto = std::string(SHARDSCOPE_SOURCE_DIR) + "/assets/traces/kineto/";
  const auto ddp = kineto_files_in(kineto + "ddp-w2"),
             pipeline = kineto_files_in(kineto + "pipeline-w2"),
             fsdp = kineto_files_in(kineto + "fsdp2-w4");
  const auto refused = [](const std::vector<std::string>& files, const std::string& says) {
    try {
      read_kineto_files(files);
      ADD_FAILURE() << "read " << files[0] << " and " << files[1] << " as one job";
    } catch (const TraceFormatError& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(files[1]), std::string::npos) << e.what();
    }
  };
  // Real files: DDP's rank 0 with the pipeline's rank 1 (world 2 both, 9 s apart), with FSDP2's.
  refused({ddp[0], pipeline[1]}, "never answers");
  refused({ddp[0], fsdp[1]}, "world sizes 2 and 4");
  const fs::path dir = test::test_temp_dir();
  const auto rank_file = [&](int rank, const std::string& name, const std::string& ops,
                             int64_t base_ns = 1790857026000000000) {
    std::string events;
    double ts = 100;
    for (const char op : ops) {
      events += std::string(events.empty() ? "" : ",") +
                R"({"ph": "X", "cat": "cpu_op", "pid": 1, "tid": 1, "dur": 5, "ts": )" +
                std::to_string(ts += 10) + R"(, "name": ")" +
                (op == 'a'   ? "gloo:all_reduce"
                 : op == 'b' ? "gloo:broadcast"
                             : "aten::mm") +
                "\"}";
    }
    std::ofstream(dir / name) << R"({"schemaVersion": 1, "baseTimeNanoseconds": )" << base_ns
                              << R"(, "distributedInfo": {"backend": "gloo", "rank": )" << rank
                              << R"(, "world_size": 2}, "traceEvents": [)" << events << "]}";
    return (dir / name).string();
  };
  refused({rank_file(0, "a0.json", "aam"), rank_file(1, "b1.json", "abm")},
          "collective #1 of group 0 is all_reduce in one and broadcast in the other");
  refused({rank_file(0, "c0.json", "aam"), rank_file(1, "c1.json", "mmm")},
          "calls none of the collectives of group 0, which spans all 2 ranks");
  refused({rank_file(0, "d0.json", "aam"),
           rank_file(1, "d1.json", "aam", 1790857026000000000 + int64_t{3600} * 1000000000)},
          "profiled 60 minutes apart");
  const Trace same =
      read_kineto_files({rank_file(0, "e0.json", "aam"), rank_file(1, "e1.json", "aam")});
  EXPECT_EQ(same.ranks.size(), 2u);
}

// A GPU's traces (scripts/kineto-gpu-traces.py on an H200, PyTorch 2.11 with CUDA 13): four rank
// processes sharing cuda:0 over Gloo. Kernels, copies and memsets on their streams' lanes, each
// tied to the runtime call that launched it, within one of the rank's steps; the ranks from
// distributedInfo, whatever the files are called (host_pid.pt.trace.json.gz).
TEST(KinetoReader, AGpusKernelsAreOnStreamLanesAndKnowTheirLaunch) {
  const Trace t = folder("gpu-ddp-gloo-w4");
  ASSERT_EQ(t.ranks.size(), 4u);
  for (size_t i = 0; i < t.ranks.size(); ++i) {
    const RankTrace& r = t.ranks[i];
    EXPECT_EQ(r.rank, int(i));
    EXPECT_EQ(count(r, t, Category::kStep), 3) << r.rank;
    EXPECT_FALSE(r.counters.empty()) << "profile_memory's [memory] events";
    int kernels = 0;
    for (const Event& e : r.events) {
      if (e.category != Category::kKernel) continue;
      ++kernels;
      EXPECT_EQ(r.lanes[e.lane].rfind("stream ", 0), 0u) << r.lanes[e.lane];
    }
    EXPECT_GT(kernels, 300) << r.rank;
    const std::vector<DeviceWork> work = device_work(t, r);
    int launched = 0, compute = 0, memory = 0;
    for (const DeviceWork& w : work) {
      launched += w.launch != nullptr;
      compute += w.kind == WorkKind::kCompute;
      memory += w.kind == WorkKind::kMemory;
      EXPECT_GE(w.step, 1);
      EXPECT_LE(w.launch_ns(), w.t0_ns) << "a kernel starts after its launch";
    }
    EXPECT_EQ(launched, int(work.size())) << r.rank;
    EXPECT_GT(compute, 0);
    EXPECT_GT(memory, 0);
    // Gloo ran the all-reduces on the host: the collectives are matched, but no kernel is
    // implied for them (Holistic Trace Analysis sees none either).
    EXPECT_GT(count(r, t, Category::kCollective, "all_reduce"), 0);
    for (const DeviceWork& w : work) EXPECT_NE(w.kind, WorkKind::kCommunication);
  }
}

// A PyTorch profiler trace names each copy by its kind and the memory at either end, and says what
// it moved: both come through, so a timeline can tell a device-to-device copy of a megabyte from
// a pageable one. The names are the ones our own CUPTI recording gives (memcpy_name).
TEST(KinetoReader, ACopyKeepsItsKindAndItsBytes) {
  const Trace t = folder("gpu-ddp-nccl-w1");
  std::map<std::string, int> copies;
  int64_t largest = 0;
  for (const Event& e : t.ranks.at(0).events) {
    if (e.category != Category::kMemcpy) continue;
    ++copies[t.str(e.name)];
    largest = std::max(largest, e.bytes);
  }
  EXPECT_EQ(copies["Memcpy DtoD (Device -> Device)"], 93);
  EXPECT_EQ(copies["Memcpy DtoH (Device -> Pageable)"], 2);
  EXPECT_EQ(copies["Memcpy HtoD (Pageable -> Device)"], 2);
  EXPECT_EQ(copies["Memset (Device)"], 27);
  EXPECT_GE(largest, 1048576);  // the first DtoD copy of the file moved 1 MiB in 1.344 us
}

}  // namespace
}  // namespace shardscope::profiling
