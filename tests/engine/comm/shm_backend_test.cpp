// The shared-memory backend (engine/comm/shm/) beyond the op-by-op cases of comm_test.cpp, which
// run every op over it too: its reduction order against Gloo's, a rank that leaves or is late,
// and what it leaves behind.
#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#include <torch/torch.h>

#include "engine/comm/comm.h"
#include "engine/comm/shm/peer_reads.h"
#include "engine/comm/shm/shm_path.h"
#include "engine/launch/launcher.h"

namespace shardscope {
namespace {

LaunchSpec shm_spec(int world, std::chrono::seconds timeout = std::chrono::seconds(60)) {
  LaunchSpec spec;
  spec.world = world;
  spec.backend = "shm";
  spec.timeout = timeout;
  return spec;
}

// Each rank's random input (seeded by rank), reduced by `backend` at `world`; rank 0's result.
torch::Tensor all_reduced(const std::string& backend, int world, int64_t n) {
  LaunchSpec spec;
  spec.world = world;
  spec.backend = backend;
  spec.threads_per_rank = 1;
  torch::Tensor result;
  std::mutex mutex;
  const LaunchReport report = launch_rank_threads(spec, [&](RankContext& ctx) {
    auto t = torch::randn({n}, torch::Generator(at::detail::createCPUGenerator(100 + ctx.rank)));
    ctx.comm->all_reduce(t);
    std::lock_guard<std::mutex> lock(mutex);
    if (ctx.rank == 0) result = t;
  });
  EXPECT_TRUE(report.ok()) << (report.ok() ? "" : report.root_failure()->message);
  return result;
}

torch::Tensor in_rank_order(int world, int64_t n) {
  torch::Tensor sum;
  for (int r = 0; r < world; ++r) {
    auto t = torch::randn({n}, torch::Generator(at::detail::createCPUGenerator(100 + r)));
    sum = r == 0 ? t : sum + t;
  }
  return sum;
}

TEST(ShmBackend, SumsInRankOrderAndEqualsGlooBitwiseAtTwoRanks) {
  const int64_t n = 3 * (1 << 20) + 17;  // several rounds of the default 4 MiB slots
  const torch::Tensor gloo_at_two = all_reduced("gloo", 2, n);
  EXPECT_TRUE(torch::equal(all_reduced("shm", 2, n), gloo_at_two));
  // At four ranks: exactly ((x0 + x1) + x2) + x3; Gloo's ring starts each chunk elsewhere.
  const torch::Tensor shm = all_reduced("shm", 4, n);
  EXPECT_TRUE(torch::equal(shm, in_rank_order(4, n)));
  EXPECT_TRUE(torch::allclose(shm, all_reduced("gloo", 4, n), 1e-6, 1e-6));
  // Rank threads reduce in place; rank processes by reading each other's tensors, or through the
  // slots where the kernel refuses that: the same order, bitwise, on every path.
  for (const char* path : {"slots", "peer-reads"}) {
    setenv("SHARDSCOPE_SHM_PATH", path, 1);
    EXPECT_TRUE(torch::equal(all_reduced("shm", 4, n), shm)) << path;
    EXPECT_TRUE(torch::equal(all_reduced("shm", 2, n), gloo_at_two)) << path;
  }
  unsetenv("SHARDSCOPE_SHM_PATH");
}

TEST(ShmBackend, ALateRankIsNamedWithTheTimeout) {
  const LaunchSpec spec = shm_spec(3);
  std::mutex mutex;
  std::vector<torch::Tensor> given_up;  // the tensors of the ranks that timed out, kept here
  const LaunchReport report = launch_rank_threads(spec, [&](RankContext& ctx) {
    ctx.set_collective_timeout(std::chrono::milliseconds(500));
    auto t = torch::ones({8});
    if (ctx.rank == 2) std::this_thread::sleep_for(std::chrono::seconds(2));
    try {
      ctx.comm->all_reduce(t);
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex);
      if (ctx.rank != 2) given_up.push_back(t);
      throw;
    }
  });
  // The late rank must not have reduced into the tensors of ranks that had given up.
  ASSERT_EQ(given_up.size(), 2u);
  for (const auto& t : given_up) EXPECT_TRUE(torch::equal(t, torch::ones({8}))) << t;
  ASSERT_FALSE(report.ok());
  bool named = false, late_told = false;
  for (const auto& f : report.failures) {
    named = named || f.message.find("timed out after 500ms waiting for rank 2 in all_reduce") !=
                         std::string::npos;
    // The late rank finds the others arrived, then gone: it must not touch their tensors (they
    // may be freed by then; it once wrote into them), and says who left.
    late_told = late_told || (f.rank == 2 && f.message.find("left the group during all_reduce") !=
                                                 std::string::npos);
  }
  EXPECT_TRUE(named) << report.root_failure()->message;
  EXPECT_TRUE(late_told) << "rank 2 was not told that its peers left";
}

TEST(ShmBackend, ARankThatLeavesIsNamedBeforeTheTimeout) {
  const LaunchSpec spec = shm_spec(2, std::chrono::minutes(10));
  const auto t0 = std::chrono::steady_clock::now();
  const LaunchReport report = launch_rank_threads(spec, [&](RankContext& ctx) {
    auto t = torch::ones({8});
    if (ctx.rank == 1) throw std::runtime_error("rank 1 gives up");
    ctx.comm->all_reduce(t);
  });
  ASSERT_FALSE(report.ok());
  EXPECT_EQ(report.root_failure()->rank, 1);
  ASSERT_EQ(report.failures.size(), 2u);
  EXPECT_NE(report.failures[1].message.find("rank 1 left the group during all_reduce"),
            std::string::npos)
      << report.failures[1].message;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::minutes(5));
}

// A message cut short: its sender leaves while the bytes are still crossing a small ring. The
// receiver fails at once, naming the rank, instead of waiting for the rest for ever.
TEST(ShmBackend, AMessageCutShortFailsTheReceiveNamingTheSender) {
  setenv("SHARDSCOPE_SHM_RING_BYTES", "128", 1);
  const LaunchSpec spec = shm_spec(2, std::chrono::minutes(10));
  const auto t0 = std::chrono::steady_clock::now();
  const LaunchReport report = launch_rank_threads(spec, [&](RankContext& ctx) {
    auto message = torch::ones({4 << 20});  // 16 MiB through a 128-byte ring: seconds
    if (ctx.rank == 0) {
      auto sent = ctx.comm->send_async(message, 1, /*tag=*/3);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      throw std::runtime_error("rank 0 leaves mid-message");
    }
    ctx.comm->recv(message, 0, /*tag=*/3);
  });
  unsetenv("SHARDSCOPE_SHM_RING_BYTES");
  ASSERT_FALSE(report.ok());
  ASSERT_EQ(report.failures.size(), 2u);
  EXPECT_NE(report.failures[1].message.find("rank 0 left the group"), std::string::npos)
      << report.failures[1].message;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::minutes(5));
}

// Rank processes read each other's tensors by address where the kernel allows it; a read the
// kernel refuses, or of a process that is gone, fails naming the process (and the group then
// falls back to the slots, or breaks, as any failed collective does).
TEST(ShmBackend, APeerReadReadsTheBytesOrFailsNamingTheProcess) {
  uint64_t here = 0x1234;
  const uint64_t other = 0x4321;
  EXPECT_TRUE(shm::can_read_and_write_peer(getpid(), &here, &here, sizeof(here)));
  EXPECT_EQ(here, 0x1234u);  // the probe writes back what it read
  EXPECT_FALSE(shm::can_read_and_write_peer(getpid(), &here, &other, sizeof(here)));
  // A write lands at the address given, in a child process as in this one.
  int done[2];
  ASSERT_EQ(pipe(done), 0);
  const pid_t child = fork();
  if (child == 0) {
    char c;
    if (read(done[0], &c, 1) != 1) _exit(3);
    _exit(here == 0x5678 ? 0 : 1);  // the child's own copy of `here`
  }
  const uint64_t written = 0x5678;
  shm::write_peer(child, &written, &here, sizeof(here));
  EXPECT_EQ(here, 0x1234u);  // this process's copy is untouched
  ASSERT_EQ(write(done[1], "x", 1), 1);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  close(done[0]);
  close(done[1]);
  const pid_t gone = fork();
  if (gone == 0) _exit(0);
  waitpid(gone, nullptr, 0);
  uint64_t into = 0;
  for (bool write : {false, true}) {
    try {
      if (write) {
        shm::write_peer(gone, &into, &here, sizeof(into));
      } else {
        shm::read_peer(gone, &here, &into, sizeof(into));
      }
      ADD_FAILURE() << (write ? "wrote" : "read") << " a process that is gone";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("rank process " + std::to_string(gone)),
                std::string::npos)
          << e.what();
    }
  }
}

// How a group reaches its peers' tensors: in place for threads, peer reads for processes where
// the kernel allows them and every process has a core, the slots otherwise; the probe (a
// collective) runs only when peer reads are in question.
TEST(ShmBackend, APathIsChosenFromWhatEveryRankKnowsAlike) {
  using Path = shm::Collectives::Path;
  int probes = 0;
  const auto probe = [&](bool allowed) {
    return [&probes, allowed] {
      ++probes;
      return allowed;
    };
  };
  const auto facts = [](bool same_process, const std::string& forced, int world, long cores) {
    shm::PathFacts f;
    f.same_process = same_process;
    f.forced = forced;
    f.world = world;
    f.cores = cores;
    return f;
  };
  EXPECT_EQ(shm::choose_path(facts(true, "", 4, 2), probe(true)), Path::kInPlace);
  EXPECT_EQ(probes, 0);
  EXPECT_EQ(shm::choose_path(facts(false, "", 2, 2), probe(true)), Path::kPeerReads);
  EXPECT_EQ(shm::choose_path(facts(false, "", 2, 2), probe(false)), Path::kSlots);  // Yama, seccomp
  EXPECT_EQ(probes, 2);
  EXPECT_EQ(shm::choose_path(facts(false, "", 4, 2), probe(true)), Path::kSlots);  // 4 on 2 cores
  EXPECT_EQ(shm::choose_path(facts(false, "slots", 2, 8), probe(true)), Path::kSlots);
  EXPECT_EQ(probes, 2);
  EXPECT_EQ(shm::choose_path(facts(false, "peer-reads", 4, 2), probe(true)), Path::kPeerReads);
  EXPECT_EQ(shm::choose_path(facts(true, "peer-reads", 2, 2), probe(true)), Path::kPeerReads);
  EXPECT_THROW(shm::choose_path(facts(false, "peer-reads", 2, 2), probe(false)),
               std::runtime_error);
  EXPECT_THROW(shm::choose_path(facts(false, "in-place", 2, 2), probe(true)),
               std::invalid_argument);
  EXPECT_THROW(shm::choose_path(facts(false, "telepathy", 2, 2), probe(true)),
               std::invalid_argument);
}

// An in-place reduce_scatter (the output is this rank's own piece of its input, as NCCL allows)
// sums every rank's piece on every path, not the output's new value twice.
TEST(ShmBackend, AReduceScatterIntoItsOwnInputSumsEveryRanksPiece) {
  for (const char* path : {"", "slots", "peer-reads"}) {
    if (*path) setenv("SHARDSCOPE_SHM_PATH", path, 1);
    const LaunchReport report = launch_rank_threads(shm_spec(2), [&](RankContext& ctx) {
      auto in = torch::arange(8, torch::kFloat) + 100.0 * ctx.rank;
      auto out = in.chunk(2)[ctx.rank];
      const auto expected = (2 * torch::arange(8, torch::kFloat) + 100.0).chunk(2)[ctx.rank];
      ctx.comm->process_group()->_reduce_scatter_base(out, in)->wait();
      EXPECT_TRUE(torch::equal(out, expected)) << path << ", rank " << ctx.rank << ": " << out;
    });
    unsetenv("SHARDSCOPE_SHM_PATH");
    EXPECT_TRUE(report.ok()) << path << ": " << report.root_failure()->message;
  }
}

// The largest tensor that an add, add_, div_ or minimum of the process was given since it was
// reset.
std::atomic<int64_t> largest_reduction_op{0};

std::unique_ptr<at::ObserverContext> note_reduction_op(const at::RecordFunction& fn) {
  const std::string name = fn.name();
  if (name != "aten::add_" && name != "aten::add" && name != "aten::div_" &&
      name != "aten::minimum")
    return nullptr;
  const auto inputs = fn.inputs();
  if (!inputs.empty() && inputs[0].isTensor()) {
    const int64_t n = inputs[0].toTensor().numel();
    int64_t seen = largest_reduction_op.load();
    while (n > seen && !largest_reduction_op.compare_exchange_weak(seen, n)) {
    }
  }
  return nullptr;
}

// A reduction runs on the backend's thread alone: an ATen op over more than the grain size would
// fan out over the intra-op pool, and four rank processes on a 16-core GPU host, each with a pool
// of 16 spinning threads, made a `small` step take 3.7 s instead of 0.14 (H100, 2026-11-26).
TEST(ShmBackend, ReducesOnItsOwnThreadInPiecesTheIntraOpPoolNeverTakes) {
  const int64_t n = 1 << 20;  // 32 grain sizes
  for (const char* path : {"", "slots", "peer-reads"}) {
    if (*path) setenv("SHARDSCOPE_SHM_PATH", path, 1);
    largest_reduction_op = 0;
    auto handle = at::addGlobalCallback(at::RecordFunctionCallback(note_reduction_op)
                                            .needsInputs(true)
                                            .scopes({at::RecordScope::FUNCTION}));
    const LaunchReport report = launch_rank_threads(shm_spec(2), [&](RankContext& ctx) {
      auto& pg = *ctx.comm->process_group();
      for (const auto op : {c10d::ReduceOp::AVG, c10d::ReduceOp::MIN}) {
        auto t = torch::full({n}, float(ctx.rank + 1));
        c10d::AllreduceOptions options;
        options.reduceOp = op;
        std::vector<at::Tensor> tensors{t};
        pg.allreduce(tensors, options)->wait();
        const float expected = op == c10d::ReduceOp::AVG ? 1.5f : 1.0f;
        EXPECT_TRUE(torch::equal(t, torch::full({n}, expected))) << path << ", rank " << ctx.rank;
      }
      auto in = torch::full({2 * n}, float(ctx.rank + 1));
      auto out = torch::empty({n});
      pg._reduce_scatter_base(out, in)->wait();
      EXPECT_TRUE(torch::equal(out, torch::full({n}, 3.0f))) << path << ", rank " << ctx.rank;
    });
    at::removeCallback(handle);
    unsetenv("SHARDSCOPE_SHM_PATH");
    EXPECT_TRUE(report.ok()) << path << ": " << report.root_failure()->message;
    EXPECT_GT(largest_reduction_op.load(), 0) << path << ": no reduction op was seen";
    EXPECT_LE(largest_reduction_op.load(), at::internal::GRAIN_SIZE) << path;
  }
}

TEST(ShmBackend, AnUnknownForcedPathIsRefusedNamingTheVariable) {
  setenv("SHARDSCOPE_SHM_PATH", "telepathy", 1);
  const LaunchReport report = launch_rank_threads(shm_spec(2), [&](RankContext& ctx) {});
  unsetenv("SHARDSCOPE_SHM_PATH");
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.root_failure()->message.find("SHARDSCOPE_SHM_PATH: 'telepathy'"),
            std::string::npos)
      << report.root_failure()->message;
}

TEST(ShmBackend, APeerOutsideTheGroupIsRefused) {
  const LaunchSpec spec = shm_spec(2);
  const LaunchReport report = launch_rank_threads(spec, [&](RankContext& ctx) {
    auto t = torch::ones({4});
    std::vector<at::Tensor> tensors{t};
    auto group = ctx.comm->process_group();
    EXPECT_THROW(group->send(tensors, 2, 0), std::invalid_argument);
    EXPECT_THROW(group->send(tensors, ctx.rank, 0), std::invalid_argument);
    EXPECT_THROW(group->recv(tensors, -1, 0), std::invalid_argument);
  });
  EXPECT_TRUE(report.ok());
}

// The segment is a memfd without a name: once the ranks are done, no descriptor of it stays
// open here and nothing was created in /dev/shm.
int open_segments() {
  int count = 0;
  DIR* fds = opendir("/proc/self/fd");
  while (dirent* entry = readdir(fds)) {
    char target[256] = {};
    const std::string link = std::string("/proc/self/fd/") + entry->d_name;
    if (readlink(link.c_str(), target, sizeof(target) - 1) > 0 &&
        std::string(target).find("shardscope-shm") != std::string::npos)
      ++count;
  }
  closedir(fds);
  return count;
}

int dev_shm_entries() {
  int count = 0;
  if (DIR* dir = opendir("/dev/shm")) {
    while (readdir(dir) != nullptr) ++count;
    closedir(dir);
  }
  return count;
}

TEST(ShmBackend, LeavesNoSegmentBehindEvenWhenARankFails) {
  const int before = dev_shm_entries();
  const LaunchSpec spec = shm_spec(4);
  int open_while_running = 0;
  std::mutex mutex;
  const LaunchReport report = launch_rank_threads(spec, [&](RankContext& ctx) {
    auto t = torch::ones({8});
    ctx.comm->all_reduce(t);
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (ctx.rank == 0) open_while_running = open_segments();
    }
    if (ctx.rank == 3) throw std::runtime_error("rank 3 fails");
    ctx.comm->all_reduce(t);
  });
  EXPECT_FALSE(report.ok());
  EXPECT_GE(open_while_running, 1) << "the check must see a live segment to mean anything";
  EXPECT_EQ(open_segments(), 0);
  EXPECT_EQ(dev_shm_entries(), before);
}

}  // namespace
}  // namespace shardscope
