// A run whose ranks someone else starts, torchrun or a scheduler (`shardscope worker` per rank),
// then `shardscope collect` over their --out folder: the same weights as rank threads, the same
// summary as `run`, weights Python's torch.load reads, and folders that are not a finished run's
// refused with the file named.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/cli/exit_code.h"
#include "engine/launch/rank_result_file.h"
#include "engine/state/weights.h"
#include "engine/train/run.h"
#include "tests/support/cli_runner.h"
#include "tests/support/reference_check.h"
#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

using test::cli;
using CliResult = test::CliResult;

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The shell's exit status of `command`, its stdout and stderr going to `log`.
int shell(const std::string& command, const std::filesystem::path& log) {
  const std::string line = "(" + command + ") > " + log.string() + " 2>&1";
  const int status = std::system(line.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// A port nobody listens on now (the kernel's pick for port 0).
int free_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(address);
  bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address));
  getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  close(fd);
  return ntohs(address.sin_port);
}

// The tiny GPT, DDP, world 2, two steps: a run's config file as a cluster user writes it.
Config tiny_run() {
  Config c = test::tiny_config("torch_ddp", 2, 1);
  c.steps = 2;
  return c;
}

std::filesystem::path write_config(const std::filesystem::path& dir, const nlohmann::json& config,
                                   const std::string& name = "run.json") {
  const auto path = dir / name;
  std::ofstream(path) << config.dump(2);
  return path;
}

// `world` workers as a scheduler starts them (srun, a batch system): one process each, told who
// it is by RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR / MASTER_PORT, rank 0 hosting the store.
int start_workers_like_a_scheduler(int world, const std::filesystem::path& config,
                                   const std::filesystem::path& out,
                                   const std::filesystem::path& log,
                                   const std::string& extra_env = "") {
  const int port = free_port();
  std::string command = "pids=; ";
  for (int r = 0; r < world; ++r) {
    command += "RANK=" + std::to_string(r) + " LOCAL_RANK=" + std::to_string(r) +
               " WORLD_SIZE=" + std::to_string(world) +
               " MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) + " " + extra_env +
               " " SHARDSCOPE_BINARY " worker --config " + config.string() + " --out " +
               out.string() + " & pids=\"$pids $!\"; ";
  }
  // Every worker's own status: the last non-zero one is the command's.
  command += "code=0; for p in $pids; do wait $p || code=$?; done; exit $code";
  return shell(command, log);
}

nlohmann::json read_json(const std::filesystem::path& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

// Rank threads in this process on the same config: what the workers must reproduce bitwise.
void expect_same_as_threads(const Config& config, const nlohmann::json& collected) {
  Config threads = config;
  threads.reference = false;
  const RunSummary expected = run_training(threads);
  ASSERT_TRUE(expected.ok) << expected.failure;
  ASSERT_EQ(collected["ranks"].size(), expected.ranks.size());
  for (size_t r = 0; r < expected.ranks.size(); ++r)
    EXPECT_EQ(collected["ranks"][r]["checksum"], expected.ranks[r].checksum) << "rank " << r;
  ASSERT_EQ(collected["steps"].size(), expected.steps.size());
  for (size_t i = 0; i < expected.steps.size(); ++i)
    EXPECT_EQ(collected["steps"][i]["loss"].get<double>(), expected.steps[i].loss) << "step " << i;
}

TEST(Torchrun, OneNodeTrainsLikeThreadsAndCollectChecksTheReference) {
  const std::string python = SHARDSCOPE_TEST_PYTHON;
  const std::string torchrun = python.substr(0, python.rfind('/') + 1) + "torchrun";
  if (!std::filesystem::exists(torchrun)) GTEST_SKIP() << "no torchrun at " << torchrun;
  const auto dir = test::test_temp_dir();
  const Config config = tiny_run();
  const auto config_file = write_config(dir, to_json(config));
  const auto out = dir / "out";
  const auto log = dir / "torchrun.log";
  // --standalone: a rendezvous on a free port, whose TCPStore torchrun's agent hosts
  // (TORCHELASTIC_USE_AGENT_STORE=True); --no-python: the worker is a binary.
  const int code = shell(torchrun + " --standalone --nproc-per-node 2 --no-python " +
                             SHARDSCOPE_BINARY " worker --config " + config_file.string() +
                             " --out " + out.string(),
                         log);
  const std::string printed = slurp(log);
  ASSERT_EQ(code, 0) << printed;
  // No rank tried to host the store the agent already hosts.
  EXPECT_EQ(printed.find("failed to bind"), std::string::npos) << printed;
  EXPECT_EQ(printed.find("failed to listen"), std::string::npos) << printed;
  // Rank 0 shows its steps as `run` does.
  EXPECT_NE(printed.find("step  loss"), std::string::npos) << printed;
  EXPECT_NE(printed.find("\n   1  "), std::string::npos) << printed;

  const auto summary = dir / "summary.json";
  const CliResult r = cli({"collect", out.string(), "--json", summary.string(), "--reference"});
  ASSERT_EQ(r.code, cli::kExitOk) << r.err << r.out;
  EXPECT_NE(r.out.find("ranks agree: yes"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("relative deviation"), std::string::npos) << r.out;
  const nlohmann::json collected = read_json(summary);
  EXPECT_LE(collected["reference"]["rel_deviation"].get<double>(), test::kReferenceTolerance);
  EXPECT_EQ(collected["config"]["world"], 2);
  expect_same_as_threads(config, collected);
}

// A config written for any size of job takes the world from WORLD_SIZE; one that names a world
// must agree with it. Rank 0 prints its steps, every rank its own failure; under our launcher
// they keep quiet.
TEST(SchedulerWorkers, TakeTheWorldFromWorldSizeWhenTheConfigHasNone) {
  const auto dir = test::test_temp_dir();
  const Config config = tiny_run();
  nlohmann::json json = to_json(config);
  json.erase("world");
  const auto config_file = write_config(dir, json);
  const auto out = dir / "out";
  const auto log = dir / "workers.log";
  ASSERT_EQ(start_workers_like_a_scheduler(2, config_file, out, log), 0) << slurp(log);
  EXPECT_NE(slurp(log).find("\n   1  "), std::string::npos) << slurp(log);
  // Rank 0's header says what ran: rank processes (it once said "threads", the config's default).
  EXPECT_NE(slurp(log).find("world 2 (processes, cpu,"), std::string::npos) << slurp(log);

  const auto summary = dir / "summary.json";
  const CliResult r = cli({"collect", out.string(), "--json", summary.string()});
  ASSERT_EQ(r.code, cli::kExitOk) << r.err << r.out;
  EXPECT_NE(r.out.find("reference: not checked"), std::string::npos) << r.out;
  EXPECT_EQ(read_json(out / "config.json")["world"], 2);
  expect_same_as_threads(config, read_json(summary));

  // A rank's weights cut short (a copy that stopped, a rank that died writing them) are refused
  // in our words, exit 2, where miniz's text and a stack dump once came out with exit 1.
  const auto cut = dir / "cut";
  std::filesystem::copy(out, cut);
  std::filesystem::resize_file(cut / "rank-0.weights", 3000);
  const CliResult truncated = cli({"collect", cut.string()});
  EXPECT_EQ(truncated.code, cli::kExitBadInput) << truncated.err;
  EXPECT_NE(truncated.err.find((cut / "rank-0.weights").string() + ": truncated"),
            std::string::npos)
      << truncated.err;
  EXPECT_EQ(truncated.err.find("miniz"), std::string::npos) << truncated.err;

  // The folder's files are collect's inputs: no output writes over one, and none of them that is
  // a folder or a FIFO is read (one aborted, the other hung).
  const std::string config_bytes = slurp(out / "config.json");
  for (const std::vector<std::string>& outputs :
       std::vector<std::vector<std::string>>{{"--json", (out / "config.json").string()},
                                             {"--json", (out / "rank-0.json").string()},
                                             {"--trace", (out / "rank-1.weights").string()},
                                             {"--trace", out.string() + "/"}}) {
    const CliResult over = cli({"collect", out.string(), outputs[0], outputs[1]});
    EXPECT_EQ(over.code, cli::kExitBadInput) << outputs[1] << ": " << over.err;
    EXPECT_NE(over.err.find("is the folder input"), std::string::npos) << over.err;
  }
  EXPECT_EQ(slurp(out / "config.json"), config_bytes);
  EXPECT_EQ(cli({"collect", out.string()}).code, cli::kExitOk);
  EXPECT_EQ(cli({"collect", out.string(), "--reference", "--tolerance", "nan"}).code,
            cli::kExitBadInput);
  for (const bool fifo : {false, true}) {
    const auto odd = dir / (fifo ? "fifo" : "folder");
    std::filesystem::copy(out, odd);
    std::filesystem::remove(odd / "config.json");
    if (fifo) {
      ASSERT_EQ(mkfifo((odd / "config.json").c_str(), 0644), 0);
    } else {
      std::filesystem::create_directory(odd / "config.json");
    }
    const CliResult r = cli({"collect", odd.string()});
    EXPECT_EQ(r.code, cli::kExitBadInput) << r.err;
    EXPECT_NE(r.err.find("config.json"), std::string::npos) << r.err;
  }

  // Quiet when our own launcher shows the progress.
  const auto quiet_log = dir / "quiet.log";
  ASSERT_EQ(start_workers_like_a_scheduler(2, config_file, dir / "quiet", quiet_log,
                                           "SHARDSCOPE_LAUNCHER_REPORTS=1"),
            0)
      << slurp(quiet_log);
  EXPECT_EQ(slurp(quiet_log).find("step  loss"), std::string::npos) << slurp(quiet_log);

  json["world"] = 4;
  const auto four = write_config(dir, json, "world-4.json");
  const auto bad_log = dir / "bad.log";
  EXPECT_EQ(start_workers_like_a_scheduler(2, four, dir / "bad", bad_log), cli::kExitBadInput);
  EXPECT_NE(slurp(bad_log).find("WORLD_SIZE: 2 processes, but the config's world is 4"),
            std::string::npos)
      << slurp(bad_log);
}

TEST(SchedulerWorkers, AFailedRankSaysSoAndCollectExitsWithOne) {
  const auto dir = test::test_temp_dir();
  Config config = tiny_run();
  config.fault = parse_fault("rank=1,step=1");
  config.collective_timeout_s = 30;
  const auto config_file = write_config(dir, to_json(config));
  const auto out = dir / "out";
  const auto log = dir / "workers.log";
  EXPECT_EQ(start_workers_like_a_scheduler(2, config_file, out, log), cli::kExitRunFailed);
  EXPECT_NE(slurp(log).find("rank 1 failed: injected fault"), std::string::npos) << slurp(log);

  const auto trace = dir / "failed.sst";
  const CliResult r = cli({"collect", out.string(), "--trace", trace.string()});
  EXPECT_EQ(r.code, cli::kExitRunFailed) << r.err;
  EXPECT_NE(r.err.find("rank 1 failed: injected fault"), std::string::npos) << r.err;
  const CliResult report = cli({"report", trace.string()});
  ASSERT_EQ(report.code, cli::kExitOk) << report.err;
  EXPECT_NE(report.out.find("rank 1 FAILED: injected fault"), std::string::npos) << report.out;
}

// A rank's weights file is what Python's torch.load reads (weights_only, its default), in the
// model's order, equal to collect --export-weights and to what the C++ side reads back.
TEST(SchedulerWorkers, RankWeightsLoadInPythonAndEqualTheExport) {
  const auto dir = test::test_temp_dir();
  const auto config_file = write_config(dir, to_json(tiny_run()));
  const auto out = dir / "out";
  const auto log = dir / "workers.log";
  ASSERT_EQ(start_workers_like_a_scheduler(2, config_file, out, log), 0) << slurp(log);
  const auto exported = dir / "weights.pt";
  const auto summary = dir / "summary.json";
  const CliResult r = cli({"collect", out.string(), "--quiet", "--json", summary.string(),
                           "--export-weights", exported.string()});
  ASSERT_EQ(r.code, cli::kExitOk) << r.err;

  const NamedTensors rank0 = read_exported_weights((out / "rank-0.weights").string());
  EXPECT_EQ(weights_checksum(rank0), read_json(summary)["ranks"][0]["checksum"]);
  EXPECT_EQ(weights_checksum(read_exported_weights(exported.string())), weights_checksum(rank0));

  const auto script = dir / "load.py";
  std::ofstream(script) << "import sys, torch\n"
                           "rank = torch.load(sys.argv[1])\n"
                           "export = torch.load(sys.argv[2])\n"
                           "assert list(rank) == list(export), 'names or order differ'\n"
                           "assert all(torch.equal(rank[k], export[k]) for k in rank)\n"
                           "print(len(rank), ' '.join(rank))\n";
  const auto python_log = dir / "python.log";
  ASSERT_EQ(shell(std::string(SHARDSCOPE_TEST_PYTHON) + " " + script.string() + " " +
                      (out / "rank-0.weights").string() + " " + exported.string(),
                  python_log),
            0)
      << slurp(python_log);
  std::string names;
  for (const auto& [name, tensor] : rank0) names += " " + name;
  EXPECT_EQ(slurp(python_log), std::to_string(rank0.size()) + names + "\n");
}

// Folders that are not a finished run's: exit 2, naming the file at fault.
TEST(Collect, RefusesWhatIsNotAFinishedRunNamingTheFile) {
  const auto dir = test::test_temp_dir();
  auto expect_refused = [](const std::filesystem::path& folder, const std::string& names) {
    const CliResult r = cli({"collect", folder.string()});
    EXPECT_EQ(r.code, cli::kExitBadInput) << r.err;
    EXPECT_NE(r.err.find(names), std::string::npos) << r.err;
  };
  expect_refused(dir / "nowhere", (dir / "nowhere").string() + ": no such folder");
  expect_refused("/dev/null", "/dev/null: not a folder");  // there, but not a folder

  const auto other = dir / "other";  // a folder of something else
  std::filesystem::create_directories(other);
  std::ofstream(other / "notes.txt") << "hello\n";
  expect_refused(other, (other / "config.json").string() + ": missing");
  std::ofstream(other / "config.json") << "{\"world\": ";
  expect_refused(other, (other / "config.json").string() + ": not a JSON object");
  std::ofstream(other / "config.json") << "{\"world\": 2, \"steps\": -1}";
  expect_refused(other, (other / "config.json").string() + ": steps");

  const auto run = dir / "run";  // rank 0 finished (a failure), rank 1 did not
  std::filesystem::create_directories(run);
  std::ofstream(run / "config.json") << to_json(tiny_run()).dump();
  RankOutcome failed;
  failed.failure = RankFailure{0, "connection closed by peer", 1};
  write_rank_outcome(run.string(), 0, failed, profiling::RankEventLog(0));
  expect_refused(run, (run / "rank-1.json").string() + ": missing");
  // Once "is a directory, not a rank 1 of world 2 writes it when it ends; ...".
  std::filesystem::create_directories(run / "rank-1.json");
  expect_refused(run,
                 (run / "rank-1.json").string() + " is a directory, not a rank's outcome file");
  std::filesystem::remove(run / "rank-1.json");
  std::ofstream(run / "rank-1.json") << "not json";
  expect_refused(run, (run / "rank-1.json").string() + ": not a JSON object");
  RankOutcome partial;
  partial.partial = kPartialSnapshot;
  write_rank_outcome(run.string(), 1, partial, profiling::RankEventLog(1));
  expect_refused(run, (run / "rank-1.json").string() + ": unfinished");

  // A config beside the ranks that is not theirs: they trained two steps, it says five (and
  // `collect --reference` once trained five and called the ranks wrong, exit 3).
  const auto other_config = dir / "other-config";
  std::filesystem::create_directories(other_config);
  Config five = tiny_run();
  five.steps = 5;
  std::ofstream(other_config / "config.json") << to_json(five).dump();
  RankOutcome two_steps;
  two_steps.result = RankResult{};
  two_steps.result->steps.resize(2);
  write_rank_outcome(other_config.string(), 0, two_steps, profiling::RankEventLog(0));
  expect_refused(other_config, (other_config / "rank-0.json").string() +
                                   ": the rank trained to step 2, " + other_config.string() +
                                   "/config.json says 5 steps");

  // Or whose model is not theirs: a replica holds the whole model (a config of another width was
  // summarised as that model, exit 0).
  const auto other_model = dir / "other-model";
  std::filesystem::create_directories(other_model);
  std::ofstream(other_model / "config.json") << to_json(tiny_run()).dump();
  RankOutcome narrow;
  narrow.result = RankResult{};
  narrow.result->steps.resize(2);
  narrow.result->weights = {{"tok_emb.weight", torch::zeros({10, 3})}};
  write_rank_outcome(other_model.string(), 0, narrow, profiling::RankEventLog(0));
  expect_refused(other_model, (other_model / "rank-0.weights").string() +
                                  " holds 30 parameters, the model of " + other_model.string() +
                                  "/config.json has ");

  // Both ranks finished: the run failed, which is exit 1 as for `run`.
  RankOutcome root;
  root.failure = RankFailure{1, "out of memory", 0};
  write_rank_outcome(run.string(), 1, root, profiling::RankEventLog(1));
  const CliResult r = cli({"collect", run.string()});
  EXPECT_EQ(r.code, cli::kExitRunFailed) << r.err;
  EXPECT_NE(r.err.find("rank 1 failed: out of memory"), std::string::npos) << r.err;
}

// One worker started as `rank` of a job at `port` in the background of a shell command; its exit
// status goes into DIR/code-NAME.
std::string worker_in_background(const std::string& name, int rank, int port,
                                 const std::filesystem::path& config,
                                 const std::filesystem::path& dir) {
  return "(RANK=" + std::to_string(rank) +
         " WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
         " " SHARDSCOPE_BINARY " worker --config " + config.string() + " --out " +
         (dir / ("out-" + name)).string() + " > " + (dir / (name + ".log")).string() +
         " 2>&1; echo $? > " + (dir / ("code-" + name)).string() + ") & ";
}

int code_of(const std::filesystem::path& dir, const std::string& name) {
  return std::stoi(slurp(dir / ("code-" + name)));
}

// A second set of workers on the same MASTER_PORT with another config (seed 2) once joined the
// first and trained with it, both exiting 0. Its rank is refused naming the config, and the
// first job trains as threads do.
TEST(SchedulerWorkers, ARankOfAnotherConfigOnTheSamePortIsRefused) {
  const auto dir = test::test_temp_dir();
  const Config mine = tiny_run();
  nlohmann::json other = to_json(mine);
  other["seed"] = 2;
  const auto config = write_config(dir, to_json(mine)),
             intruder = write_config(dir, other, "b.json");
  const int port = free_port();
  // Rank 0 first, then the intruder's rank 1 (which must be refused), then the real rank 1.
  const std::string command = worker_in_background("rank0", 0, port, config, dir) + "sleep 1; " +
                              worker_in_background("intruder", 1, port, intruder, dir) +
                              "sleep 2; " + worker_in_background("rank1", 1, port, config, dir) +
                              "wait";
  shell(command, dir / "shell.log");
  EXPECT_EQ(code_of(dir, "intruder"), 2) << slurp(dir / "intruder.log");
  EXPECT_NE(slurp(dir / "intruder.log").find("runs another config"), std::string::npos)
      << slurp(dir / "intruder.log");
  EXPECT_EQ(code_of(dir, "rank0"), 0) << slurp(dir / "rank0.log");
  EXPECT_EQ(code_of(dir, "rank1"), 0) << slurp(dir / "rank1.log");
  std::filesystem::copy(dir / "out-rank1" / "rank-1.json", dir / "out-rank0" / "rank-1.json");
  std::filesystem::copy(dir / "out-rank1" / "rank-1.weights", dir / "out-rank0" / "rank-1.weights");
  const CliResult r =
      cli({"collect", (dir / "out-rank0").string(), "--json", (dir / "collected.json").string()});
  ASSERT_EQ(r.code, 0) << r.err;
  expect_same_as_threads(mine, read_json(dir / "collected.json"));
}

// Two workers claim rank 1 of the same job: the second to join is refused, the job trains. Both
// start once rank 0 listens (a client that finds nobody there backs off for up to a minute),
// and the job is long enough (300 tiny steps) to be running when both arrive.
TEST(SchedulerWorkers, ASecondWorkerForTheSameRankIsRefused) {
  const auto dir = test::test_temp_dir();
  Config run = tiny_run();
  run.steps = 300;
  const auto config = write_config(dir, to_json(run));
  const int port = free_port();
  shell(worker_in_background("rank0", 0, port, config, dir) + "sleep 2; " +
            worker_in_background("a", 1, port, config, dir) +
            worker_in_background("b", 1, port, config, dir) + "wait",
        dir / "shell.log");
  const int a = code_of(dir, "a"), b = code_of(dir, "b");
  EXPECT_EQ(code_of(dir, "rank0"), 0) << slurp(dir / "rank0.log");
  EXPECT_EQ(std::min(a, b), 0) << slurp(dir / "a.log") << slurp(dir / "b.log");
  EXPECT_EQ(std::max(a, b), 2) << slurp(dir / "a.log") << slurp(dir / "b.log");
  const std::string refused = slurp(dir / (a == 2 ? "a.log" : "b.log"));
  EXPECT_NE(refused.find("has already joined"), std::string::npos) << refused;
}

// A stray worker for a rank of a job that has ended (its store gone) once wrote its failure over
// that rank's finished rank-N.json after its timeout, and a stray rank 0 the config rank 0 kept.
// Neither joined the job: both fail saying so and leave the job's files as they were.
TEST(SchedulerWorkers, AStrayWorkerAfterTheJobLeavesItsFilesAsTheyWere) {
  const auto dir = test::test_temp_dir();
  nlohmann::json config = to_json(tiny_run());
  config["collective_timeout_s"] = 3;
  const auto config_file = write_config(dir, config);
  const auto out = dir / "out";
  ASSERT_EQ(start_workers_like_a_scheduler(2, config_file, out, dir / "job.log"), 0)
      << slurp(dir / "job.log");
  const std::string rank1 = slurp(out / "rank-1.json"), rank0 = slurp(out / "rank-0.json"),
                    kept_config = slurp(out / "config.json");
  nlohmann::json other = config;
  other["seed"] = 7;  // a stray rank 0 of another config must not replace the kept one either
  const auto other_file = write_config(dir, other, "other.json");
  const int port = free_port();
  const std::string env = "WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port);
  const int stray1 = shell("RANK=1 " + env + " " SHARDSCOPE_BINARY " worker --config " +
                               config_file.string() + " --out " + out.string(),
                           dir / "stray1.log");
  const int stray0 = shell("RANK=0 " + env + " " SHARDSCOPE_BINARY " worker --config " +
                               other_file.string() + " --out " + out.string(),
                           dir / "stray0.log");
  EXPECT_EQ(stray1, 1) << slurp(dir / "stray1.log");
  EXPECT_EQ(stray0, 1) << slurp(dir / "stray0.log");
  EXPECT_NE(slurp(dir / "stray1.log").find("rank-1.json left as it was"), std::string::npos)
      << slurp(dir / "stray1.log");
  // One line says why; LibTorch's retries once added a stack dump each.
  EXPECT_EQ(slurp(dir / "stray1.log").find("frame #"), std::string::npos)
      << slurp(dir / "stray1.log");
  EXPECT_EQ(slurp(out / "rank-1.json"), rank1);
  EXPECT_EQ(slurp(out / "rank-0.json"), rank0);
  EXPECT_EQ(slurp(out / "config.json"), kept_config);
  const CliResult r = cli({"collect", out.string()});
  EXPECT_EQ(r.code, 0) << r.err;
}

// What a scheduler's environment gets wrong is refused at once (exit 2), naming the variable:
// "+1" was taken as rank 1; a wildcard MASTER_ADDR had rank 0's store listen on every interface;
// an address not this host's was blamed on MASTER_PORT.
TEST(SchedulerWorkers, AWrongLaunchEnvironmentIsRefusedNamingTheVariable) {
  const auto dir = test::test_temp_dir();
  const auto config = write_config(dir, to_json(tiny_run()));
  const std::string port = std::to_string(free_port());
  const struct {
    std::string env, variable, says;
  } cases[] = {
      {"RANK=+1 MASTER_ADDR=127.0.0.1", "RANK", "non-negative integer, got '+1'"},
      {"RANK=' 1' MASTER_ADDR=127.0.0.1", "RANK", "non-negative integer"},
      {"RANK=0 MASTER_ADDR=0.0.0.0", "MASTER_ADDR", "every interface"},
      {"RANK=0 MASTER_ADDR=::", "MASTER_ADDR", "every interface"},
      {"RANK=0 MASTER_ADDR=192.0.2.1", "MASTER_ADDR", "Cannot assign requested address"},
  };
  for (const auto& c : cases) {
    const auto log = dir / "worker.log";
    const int code = shell(c.env + " WORLD_SIZE=2 MASTER_PORT=" + port +
                               " " SHARDSCOPE_BINARY " worker --config " + config.string() +
                               " --out " + (dir / "out").string(),
                           log);
    EXPECT_EQ(code, 2) << c.env << ": " << slurp(log);
    EXPECT_NE(slurp(log).find("error: " + c.variable + ": "), std::string::npos)
        << c.env << ": " << slurp(log);
    EXPECT_NE(slurp(log).find(c.says), std::string::npos) << c.env << ": " << slurp(log);
  }
}

// MASTER_PORT held by a program that accepts connections and never answers: rank 1 once waited
// until that program went away (98 s, 400 s), past its timeout and a SIGTERM; rank 0 failed with
// a stack dump. Rank 1 now gives up within its timeout saying why, and rank 0 says in one line
// that the port is taken (exit 2, bad input).
TEST(SchedulerWorkers, APortHeldByASilentListenerEndsWithinTheTimeout) {
  const auto dir = test::test_temp_dir();
  nlohmann::json config = to_json(tiny_run());
  config["collective_timeout_s"] = 3;
  const auto path = write_config(dir, config);
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(listener, 16), 0);  // the kernel completes connections; nobody reads them
  socklen_t length = sizeof(address);
  getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length);
  const int port = ntohs(address.sin_port);
  shell(worker_in_background("rank1", 1, port, path, dir) +
            worker_in_background("rank0", 0, port, path, dir) + "wait",
        dir / "shell.log");
  close(listener);
  EXPECT_EQ(code_of(dir, "rank1"), 1) << slurp(dir / "rank1.log");
  EXPECT_NE(slurp(dir / "rank1.log").find("could not meet the other ranks within the 3 s"),
            std::string::npos)
      << slurp(dir / "rank1.log");
  const std::string rank0 = slurp(dir / "rank0.log");
  // A port another process holds is the launch's bad input: exit 2, naming MASTER_PORT.
  EXPECT_EQ(code_of(dir, "rank0"), 2) << rank0;
  EXPECT_NE(rank0.find("MASTER_PORT"), std::string::npos) << rank0;
  EXPECT_NE(rank0.find("Address already in use"), std::string::npos) << rank0;
  EXPECT_EQ(rank0.find("frame #"), std::string::npos) << "a stack dump: " << rank0;
}

// Workers given different configs (rank 1 seed 2): rank 1 is refused at once, and rank 0, which
// once waited out its 60 s on the store's keys, stops too, naming rank 1 and the config.
TEST(SchedulerWorkers, RanksGivenDifferentConfigsStopNamingTheRank) {
  const auto dir = test::test_temp_dir();
  const Config mine = tiny_run();
  nlohmann::json other = to_json(mine);
  other["seed"] = 2;
  const auto config = write_config(dir, to_json(mine)), theirs = write_config(dir, other, "b.json");
  const int port = free_port();
  shell(worker_in_background("rank0", 0, port, config, dir) +
            worker_in_background("rank1", 1, port, theirs, dir) + "wait",
        dir / "shell.log");
  EXPECT_EQ(code_of(dir, "rank1"), 2) << slurp(dir / "rank1.log");
  EXPECT_EQ(code_of(dir, "rank0"), 2) << slurp(dir / "rank0.log");
  EXPECT_NE(slurp(dir / "rank0.log")
                .find("rank 1 came to 127.0.0.1:" + std::to_string(port) + " with another config"),
            std::string::npos)
      << slurp(dir / "rank0.log");
}

// A rank killed mid-run: Gloo tells its peers "Connection reset by peer [127.0.0.1]:30087", a
// port nobody can map to a rank. They now name the rank whose process is gone.
TEST(SchedulerWorkers, APeerKilledMidRunIsNamedByRank) {
  const auto dir = test::test_temp_dir();
  Config run = tiny_run();
  run.steps = 100000;
  run.collective_timeout_s = 30;
  const auto config = write_config(dir, to_json(run));
  const int port = free_port();
  // Rank 1 is killed once rank 0 has reported a step (its log shows step 5).
  shell(worker_in_background("rank0", 0, port, config, dir) +
            "(RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=" + std::to_string(port) +
            " exec " SHARDSCOPE_BINARY " worker --config " + config.string() + " --out " +
            (dir / "out-rank1").string() + " > " + (dir / "rank1.log").string() +
            " 2>&1) & victim=$!; for i in $(seq 600); do grep -q '^   5 ' " +
            (dir / "rank0.log").string() + " && break; sleep 0.1; done; kill -9 $victim; wait",
        dir / "shell.log");
  EXPECT_EQ(code_of(dir, "rank0"), 1) << slurp(dir / "rank0.log");
  EXPECT_NE(slurp(dir / "rank0.log").find("rank 0 failed: rank 1 (pid "), std::string::npos)
      << slurp(dir / "rank0.log");
}

TEST(Collect, HelpDocumentsIt) {
  const CliResult top = cli({"--help"});
  EXPECT_NE(top.out.find("collect"), std::string::npos) << top.out;
  const CliResult help = cli({"collect", "--help"});
  EXPECT_EQ(help.code, cli::kExitOk);
  for (const char* flag : {"--reference", "--json", "--trace", "--export-weights", "--tolerance"})
    EXPECT_NE(help.out.find(flag), std::string::npos) << flag;
}

}  // namespace
}  // namespace shardscope
