// A training step of `single` through the trainer (strategy, spans, memory tracking, the
// per-step loss gather) against the least a LibTorch program does for the same step: the same
// model, batches and optimizer in a bare loop on this thread.
#include <chrono>
#include <thread>

#include <ATen/Parallel.h>
#include <nlohmann/json.hpp>

#include "app/perf/perf_suite.h"
#include "engine/config.h"
#include "engine/gpt_model.h"
#include "engine/launcher.h"
#include "engine/optimizer_factory.h"
#include "engine/token_data.h"

namespace shardscope::perf {

namespace {

std::vector<double> plain_loop(const Config& c) {
  at::set_num_threads(default_threads_per_rank(1));
  GptModel model(c.model, c.seed);
  auto optimizer = make_optimizer(c.optimizer, model->parameters());
  auto corpus = TokenCorpus::load(c.data, c.model.vocab, c.seed);
  BatchSampler sampler(corpus, c.model.seq, c.micro_batch, 1, 1, c.seed);
  std::vector<double> seconds;
  for (int step = 0; step < c.steps; ++step) {
    const auto t0 = std::chrono::steady_clock::now();
    optimizer->zero_grad();
    Batch batch = sampler.micro_batch(step, 0, 0);
    torch::Tensor loss = model->loss(batch);
    loss.backward();
    optimizer->step();
    (void)loss.item<double>();
    seconds.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return seconds;
}

}  // namespace

void measure_engine_overhead(const PerfOptions& options, std::vector<PerfRow>& rows) {
  const std::string preset = options.quick ? "tiny" : "small";
  const int steps = options.quick ? 4 : 8, rounds = options.quick ? 2 : 3;
  nlohmann::json overrides = {
      {"strategy", "single"}, {"world", 1}, {"preset", preset}, {"steps", steps}};
  Config config = config_from_json(overrides);
  finalize(config);
  std::vector<double> ours, plain, ratios;
  // Interleaved rounds: this machine is noisy, so each ratio compares neighbours in time.
  for (int r = 0; r <= rounds; ++r) {
    if (options.progress)
      options.progress("  single through the trainer vs a plain loop, " + round_name(r));
    const auto av = measure_run(overrides.dump()).step_seconds;
    // On a fresh thread of its own, as a rank runs: a thread that has run OpenMP work keeps
    // its team of workers, and a second live team spinning on two cores slowed the next run's
    // ranks by 40 % when the loop ran here on the main thread.
    std::vector<double> bv;
    std::thread([&] { bv = plain_loop(config); }).join();
    const double a = median_step_seconds(av);
    const double b = median_step_seconds(bv);
    if (r == 0) continue;  // warm-up (see round_name)
    ours.push_back(a);
    plain.push_back(b);
    ratios.push_back(a / b);
  }
  PerfRow row;
  row.section = "engine";
  row.what = "step of `single` (" + preset + ") vs plain LibTorch loop";
  row.ours = median(ours) * 1e3;
  row.baseline = median(plain) * 1e3;
  row.unit = "ms/step";
  row.ratio = median(ratios);
  row.target = "<= 1.05";
  row.met = row.ratio <= 1.05;
  rows.push_back(row);
}

}  // namespace shardscope::perf
