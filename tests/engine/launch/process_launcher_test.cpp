// Process mode: rank processes of the real binary meet over a TCPStore and train exactly as rank
// threads do; a rank that dies or hangs stops the run within a bounded time, named, and leaves
// no process behind, not even when the launcher itself is killed (its run directory goes with
// the next launch).
#include "engine/launch/process_launcher.h"

#include <gtest/gtest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "engine/state/checkpoint.h"
#include "engine/state/weights.h"
#include "engine/train/run.h"
#include "tests/support/reference_check.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

class ProcessMode : public testing::Test {
 protected:
  void SetUp() override { setenv("SHARDSCOPE_WORKER", SHARDSCOPE_BINARY, 1); }
};

Config processes(Config c) {
  c.mode = "processes";
  return c;
}

void expect_same_weights(const RunSummary& threads, const RunSummary& processes) {
  ASSERT_TRUE(threads.ok) << threads.failure;
  ASSERT_TRUE(processes.ok) << processes.failure;
  EXPECT_EQ(weights_checksum(threads.weights), weights_checksum(processes.weights));
  EXPECT_EQ(compare_weights(processes.weights, threads.weights).max_abs, 0.0);
  ASSERT_EQ(threads.steps.size(), processes.steps.size());
  for (size_t i = 0; i < threads.steps.size(); ++i)
    EXPECT_EQ(threads.steps[i].loss, processes.steps[i].loss) << "step " << i;
}

bool no_children_left() {
  return waitpid(-1, nullptr, WNOHANG) == -1 && errno == ECHILD;
}

TEST_F(ProcessMode, GivesTheSameWeightsAsThreadModeAtWorldTwoAndFour) {
  for (int world : {2, 4}) {
    Config c = test::tiny_config("torch_ddp", world, 2);
    c.reference = false;
    RunSummary in_threads = run_training(c);
    std::vector<int> progress;
    RunCallbacks callbacks;
    callbacks.on_step = [&](const StepRecord& s) { progress.push_back(s.step); };
    RunSummary in_processes = run_training(processes(c), callbacks);
    expect_same_weights(in_threads, in_processes);
    EXPECT_EQ(progress, (std::vector<int>{0, 1, 2, 3, 4})) << "rank 0's progress, live";
    // Each rank's record came back: its communication and its memory.
    for (const auto& r : in_processes.ranks) {
      EXPECT_FALSE(r.comm_events.empty()) << "rank " << r.rank;
      EXPECT_GT(r.comm_bytes_per_step, 0);
      EXPECT_GT(r.peak_allocated_bytes, 0);
    }
    ASSERT_EQ(in_processes.trace.ranks.size(), static_cast<size_t>(world));
    for (const auto& r : in_processes.trace.ranks) EXPECT_FALSE(r.events.empty());
  }
  EXPECT_TRUE(no_children_left());
}

TEST_F(ProcessMode, ShardedLayoutsOverSubGroupsMatchTheReference) {
  Config c = test::tiny_config("hybrid", 1, 1);
  c.world = 4;
  c.model.layers = 4;
  c.strategy_options.tensor_parallel = 2;
  c.strategy_options.pipeline_parallel = 2;
  c.strategy_options.micro_batches = 4;
  finalize(c);
  test::expect_matches_reference(run_training(processes(c)));
}

TEST_F(ProcessMode, ARankThatDiesStopsTheRunNamedAndNothingIsLeft) {
  Config c = test::tiny_config("ddp_bucketed", 2, 1);
  c.reference = false;
  c.collective_timeout_s = 5;
  c.fault = parse_fault("rank=1,step=2,kind=exit");
  const auto t0 = std::chrono::steady_clock::now();
  RunSummary s = run_training(processes(c));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(s.ok);
  EXPECT_EQ(s.failed_rank, 1);
  EXPECT_NE(s.failure.find("exited with status 3"), std::string::npos) << s.failure;
  // Rank 0 stops on its own when rank 1's connections close, well inside its timeout.
  EXPECT_LT(took, c.collective_timeout_s + 10) << "seconds";
  EXPECT_TRUE(no_children_left());
  // What was recorded up to the failure is still there.
  ASSERT_EQ(s.trace.ranks.size(), 2u);
  EXPECT_FALSE(s.trace.ranks[0].events.empty());
}

// A rank process that vanishes mid-run still leaves its trace up to its last snapshot.
TEST_F(ProcessMode, ARankThatDiesLateKeepsItsRecordUpToItsLastSnapshot) {
  Config c = test::tiny_config("ddp_bucketed", 2, 1);
  c.steps = 400;
  c.reference = false;
  c.collective_timeout_s = 5;
  c.fault = parse_fault("rank=1,step=250,kind=exit");
  // Snapshots every 50 ms, so some are taken before step 250 on however fast a machine.
  setenv("SHARDSCOPE_SNAPSHOT_MS", "50", 1);
  struct Unset {
    ~Unset() { unsetenv("SHARDSCOPE_SNAPSHOT_MS"); }
  } unset;
  RunSummary s = run_training(processes(c));
  EXPECT_FALSE(s.ok);
  EXPECT_EQ(s.failed_rank, 1);
  EXPECT_NE(s.failure.find("exited with status 3"), std::string::npos) << s.failure;
  EXPECT_NE(s.failure.find("last snapshot"), std::string::npos) << s.failure;
  ASSERT_EQ(s.trace.ranks.size(), 2u);
  // Rank 1's record is there, and it ends before the step it died in.
  const auto& dead = s.trace.ranks[1];
  ASSERT_FALSE(dead.events.empty());
  int last_step = -1;
  for (const auto& e : dead.events) last_step = std::max(last_step, e.step);
  EXPECT_GT(last_step, 0);
  EXPECT_LT(last_step, 250);
  EXPECT_TRUE(no_children_left());
}

TEST_F(ProcessMode, AHungRankIsTerminatedOnceTheOthersTimeOut) {
  Config c = test::tiny_config("ddp_bucketed", 2, 1);
  c.reference = false;
  c.collective_timeout_s = 2;
  c.fault = parse_fault("rank=1,step=1,kind=hang");
  const auto t0 = std::chrono::steady_clock::now();
  RunSummary s = run_training(processes(c));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.failure.find("rank 1"), std::string::npos) << s.failure;
  EXPECT_NE(s.failure.find("signal"), std::string::npos) << s.failure;
  EXPECT_LT(took, 60) << "seconds: timeout, grace period, then SIGTERM";
  EXPECT_TRUE(no_children_left());
}

// A rank alone has no peer whose collective would time out: its hang once held the launcher (and
// the user) forever. The launcher applies the peers' rule to its steps.
TEST_F(ProcessMode, ALoneRankThatHangsIsStoppedByTheLauncher) {
  Config c = test::tiny_config("ddp_bucketed", 1, 1);
  c.reference = false;
  c.steps = 4;
  c.collective_timeout_s = 2;
  c.fault = parse_fault("rank=0,step=1,kind=hang");
  const auto t0 = std::chrono::steady_clock::now();
  RunSummary s = run_training(processes(c));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.failure.find("rank 0"), std::string::npos) << s.failure;
  EXPECT_NE(s.failure.find("made no progress for"), std::string::npos) << s.failure;
  EXPECT_NE(s.failure.find("after step 0 (the limit: 2 s)"), std::string::npos) << s.failure;
  EXPECT_LT(took, 60) << "seconds: the limit, then SIGTERM and SIGKILL";
  EXPECT_TRUE(no_children_left());
}

// With the default (adaptive) timeout, the others give up on a hung rank after max(5 s, 10 x the
// slowest step), not after a fixed minute: tiny steps take milliseconds, so 5 s.
TEST_F(ProcessMode, AHangIsFoundFromTheStepTimes) {
  Config c = test::tiny_config("ddp_bucketed", 2, 1);
  c.reference = false;
  c.steps = 6;
  ASSERT_EQ(c.collective_timeout_s, 0) << "the default is adaptive";
  c.fault = parse_fault("rank=1,step=3,kind=hang");
  RunSummary s = run_training(processes(c));
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.failure.find("rank 1"), std::string::npos) << s.failure;
  EXPECT_NE(s.failure.find("5000ms"), std::string::npos) << s.failure;
  EXPECT_TRUE(no_children_left());
}

// The launcher is killed outright: its rank processes must not outlive it.
TEST_F(ProcessMode, RankProcessesDieWithTheirLauncher) {
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    // A run whose rank 1 hangs, with a long timeout: it would go on for minutes.
    execl(SHARDSCOPE_BINARY, SHARDSCOPE_BINARY, "run", "--mode", "processes", "--world", "2",
          "--strategy", "ddp_bucketed", "--steps", "3", "--timeout", "300", "--inject-fault",
          "rank=1,step=1,kind=hang", "--no-reference", "--quiet", static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until both rank processes exist.
  std::vector<pid_t> ranks;
  for (int tries = 0; tries < 300 && ranks.size() < 2; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ranks.clear();
    std::ifstream children("/proc/" + std::to_string(launcher) + "/task/" +
                           std::to_string(launcher) + "/children");
    for (pid_t pid; children >> pid;) ranks.push_back(pid);
  }
  ASSERT_EQ(ranks.size(), 2u) << "the launcher did not start its ranks";
  kill(launcher, SIGKILL);
  int status = 0;
  waitpid(launcher, &status, 0);
  // The ranks get SIGKILL from the kernel (PR_SET_PDEATHSIG); they may linger as zombies until
  // whoever adopted them reaps them, but they no longer run.
  auto running = [](pid_t pid) {
    std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
    std::string pid_text, comm, state;
    if (!(stat >> pid_text >> comm >> state)) return false;
    return state != "Z" && state != "X";
  };
  for (int tries = 0; tries < 100; ++tries) {
    if (!running(ranks[0]) && !running(ranks[1])) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_FALSE(running(ranks[0]));
  EXPECT_FALSE(running(ranks[1]));

  // Killed, the launcher could not remove its run directory; the next launch removes it, and
  // leaves alone one whose launcher is alive (this process stands in for one).
  auto run_directories_of = [](pid_t pid) {
    const std::string prefix = "shardscope-run-" + std::to_string(pid) + "-";
    int count = 0;
    for (const auto& entry : std::filesystem::directory_iterator("/tmp"))
      count += entry.path().filename().string().rfind(prefix, 0) == 0;
    return count;
  };
  // (Another process-mode launch running beside this test may have removed it already.)
  EXPECT_LE(run_directories_of(launcher), 1);
  const auto live =
      std::filesystem::path("/tmp") / ("shardscope-run-" + std::to_string(getpid()) + "-live");
  std::filesystem::create_directories(live);
  std::ofstream(live / "config.json") << "{}";
  const RunSummary next = run_training(processes(test::tiny_config("ddp_bucketed", 2, 1)));
  EXPECT_TRUE(next.ok) << next.failure;
  EXPECT_EQ(run_directories_of(launcher), 0);
  EXPECT_TRUE(std::filesystem::exists(live / "config.json"));
  test::remove_tree(live);
}

// A preempted job: SIGTERM reaches the launcher only. It asks every rank to stop; they finish
// the same step, write a checkpoint, and the launcher exits 143 saying how to resume, with no
// rank process left. Resuming continues from that step.
TEST_F(ProcessMode, SigtermStopsEveryRankAfterOneStepWithACheckpointToResumeFrom) {
  const std::string dir = test::test_temp_dir().string();
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t launcher = fork();
  ASSERT_GE(launcher, 0);
  if (launcher == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    execl(SHARDSCOPE_BINARY, SHARDSCOPE_BINARY, "run", "--mode", "processes", "--world", "2",
          "--strategy", "zero2", "--preset", "tiny", "--steps", "400", "--checkpoint-dir",
          dir.c_str(), "--no-reference", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  std::string text, line;
  std::vector<pid_t> ranks;
  bool signalled = false;
  char buffer[4096];
  for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) > 0;) {
    text.append(buffer, static_cast<size_t>(n));
    // Once step 2 is printed, both ranks are training: note who they are, then preempt.
    if (!signalled && text.find("\n   2  ") != std::string::npos) {
      std::ifstream children("/proc/" + std::to_string(launcher) + "/task/" +
                             std::to_string(launcher) + "/children");
      for (pid_t pid; children >> pid;) ranks.push_back(pid);
      kill(launcher, SIGTERM);
      signalled = true;
    }
  }
  close(out[0]);
  int status = 0;
  ASSERT_EQ(waitpid(launcher, &status, 0), launcher);
  ASSERT_TRUE(signalled) << text;
  ASSERT_TRUE(WIFEXITED(status)) << text;
  EXPECT_EQ(WEXITSTATUS(status), 128 + SIGTERM) << text;
  EXPECT_NE(text.find("stopped by SIGTERM after "), std::string::npos) << text;
  EXPECT_NE(text.find("--resume " + dir), std::string::npos) << text;
  EXPECT_EQ(ranks.size(), 2u);
  for (pid_t rank : ranks) EXPECT_NE(kill(rank, 0), 0) << "rank process " << rank << " is left";

  const CheckpointInfo checkpoint = find_checkpoint(dir);
  EXPECT_GE(checkpoint.step, 3);
  EXPECT_LT(checkpoint.step, 400);
  Config resumed = test::tiny_config("zero2", 2, 1);
  resumed.mode = "processes";
  resumed.micro_batch = 4;  // the CLI's default, as in the run that wrote the checkpoint
  resumed.steps = checkpoint.step + 2;
  resumed.resume = dir;
  const RunSummary s = run_training(resumed);
  ASSERT_TRUE(s.ok) << s.failure;
  EXPECT_EQ(s.resumed_step, checkpoint.step);
  ASSERT_EQ(s.steps.size(), 2u);
  test::expect_matches_reference(s);
}

}  // namespace
}  // namespace shardscope

namespace shardscope {
namespace {

// A rank stopped (SIGSTOP) while it holds the shared device's turn once froze every peer on the
// turn's lock file for 12 minutes, the first SIGTERM ignored (issue 33). The turn is now waited
// for as long as a collective is, and the peers name the rank that holds it.
TEST(ProcessModeTurns, ARankStoppedHoldingTheDeviceIsNamedWithinTheTimeout) {
  setenv("SHARDSCOPE_WORKER", SHARDSCOPE_BINARY, 1);
  Config c = test::tiny_config("ddp_bucketed", 3, 1);
  c.reference = false;
  c.steps = 8;
  c.mode = "processes";
  ASSERT_FALSE(c.contended) << "ranks take turns by default";
  c.fault = parse_fault("rank=1,step=5,kind=stop");
  finalize(c);
  const auto t0 = std::chrono::steady_clock::now();
  const RunSummary s = run_training(c);
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_FALSE(s.ok);
  // The peers give up either on the turn (naming its holder) or, where they were already waiting
  // for rank 1 in a collective, on that collective; either way within the bound, naming rank 1.
  EXPECT_NE(s.failure.find("rank 1"), std::string::npos) << s.failure;
  if (s.failure.find("shared device's turn") != std::string::npos) {
    EXPECT_NE(s.failure.find("shared device's turn, which rank 1 (pid"), std::string::npos)
        << s.failure;
  }
  EXPECT_LT(took, 60) << "the adaptive bound is max(5 s, 10 x the slowest step)";
}

}  // namespace
}  // namespace shardscope
