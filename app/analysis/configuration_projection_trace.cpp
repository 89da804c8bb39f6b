// A projected step drawn as a trace that view, report and the app open like a recorded one.
#include <algorithm>
#include <string>

#include "app/analysis/configuration_projection_parts.h"
#include "app/analysis/data_parallel_trace.h"
#include "profiling/trace/pipeline_pass_names.h"

namespace shardscope::analysis::projection_detail {
namespace {

std::string pass_span(pipeline::Pass pass, bool split) {
  switch (pass) {
    case pipeline::Pass::kForward:
      return std::string(profiling::kForwardPassSpan);
    case pipeline::Pass::kInput:
      return std::string(split ? profiling::kInputPassSpan : profiling::kBackwardPassSpan);
    case pipeline::Pass::kWeight:
      return std::string(profiling::kWeightPassSpan);
    case pipeline::Pass::kBackward:
      break;
  }
  return std::string(profiling::kBackwardPassSpan);
}

}  // namespace

// The step as a trace: each pipeline rank's passes; the tensor group's collectives of a pass at
// its end, after its kernels (they block the rank, so it waits through them, and together they
// take what they take between the kernels); the activations and gradients sent between stages on
// other ranks, each to its receive; then the gradient sync and the optimizer.
profiling::Trace step_trace(const Config& config, const Layout& l,
                            const std::vector<StageCost>& costs,
                            const std::vector<std::vector<pipeline::TimedAction>>& timed,
                            const ConfigurationProjection& p, double span,
                            const DataParallelTimeline* data_parallel) {
  profiling::Trace t;
  t.run.strategy = config.strategy;
  // The job's GPUs, of which one rank a pipeline stage is drawn: its data-, tensor-, context- and
  // expert-parallel peers repeat it. On GPUs a rank each, they would run over NCCL.
  t.run.world = config.world;
  t.run.device = p.hardware;
  t.run.backend = "nccl";
  t.run.projected = profiling::RecordedProjection{p.hardware, 0};
  if (l.pipelined && l.pp > 1) {
    t.run.projected->pipeline_stages = l.pp;
    t.run.projected->micro_batches = l.m;
    t.run.projected->stages_per_rank = l.v;
    t.run.projected->schedule = l.schedule;
  }
  const bool split = pipeline::splits_backward(l.schedule);
  const std::string kind = l.pipelined ? l.schedule : "gpipe";
  for (int r = 0; r < l.pp; ++r) {
    profiling::RankTrace rank;
    rank.rank = r;
    rank.lanes = {"host", "comm"};
    t.ranks.push_back(rank);
  }
  if (data_parallel != nullptr && !l.pipelined) {
    const StageCost& c = costs.at(0);
    add_data_parallel_step(t,
                           {l.m, l.dp * l.cp, c.forward.seconds, c.input.seconds + c.weight.seconds,
                            c.weight_casts, p.optimizer_s},
                           *data_parallel);
    t.normalise();
    return t;
  }
  auto add = [&](int r, const std::string& name, profiling::Category category, double t0, double t1,
                 int micro) -> profiling::Event& {
    return add_projected_span(t, r, name, category, t0, t1, micro);
  };
  std::map<std::pair<int, int>, int64_t> sent;  // per sender and receiver: sends so far
  auto transfer = [&](int from, int to, double at, int micro) {
    const int64_t seq = sent[{from, to}]++;
    for (const auto& [r, peer, op] : {std::tuple{from, to, "send"}, std::tuple{to, from, "recv"}}) {
      profiling::Event& e =
          add(r, op, profiling::Category::kCollective, at, at + p.pipeline_transfer_s, micro);
      e.lane = profiling::kCommLane;
      e.group = t.intern("pp");
      e.seq = seq;
      e.peer = int16_t(peer);
      e.group_size = 2;
      e.bytes = p.pipeline_send_bytes;
    }
  };
  // What a pass waits for between its kernels, named for what it is: the tensor group's
  // collectives, the context ring's transfers, the experts' all_to_all.
  std::string blocking;
  const auto also = [&](const char* what) {
    blocking += (blocking.empty() ? "" : " and ") + std::string(what);
  };
  if (l.tp > 1) also("tensor-parallel collectives");
  if (l.cp > 1) also("ring attention transfers");
  if (l.ep > 1) also("expert all_to_all");
  if (blocking.empty()) blocking = "collectives";
  const char* group = l.tp > 1 ? "tp" : l.cp > 1 ? "cp" : "ep";
  const int group_size = l.tp > 1 ? l.tp : l.cp > 1 ? l.cp : std::max(1, l.ep);
  for (int r = 0; r < l.pp; ++r) {
    add(r, "step 0", profiling::Category::kStep, 0, p.step_s, -1);
    for (const auto& a : timed[r]) {
      const StageCost& c = costs[a.action.stage];
      const pipeline::Pass pass = a.action.pass;
      const double comm = c.of(pass).tensor_comm;
      const std::string name = pass_span(pass, split) + " " + std::to_string(a.action.micro) +
                               (l.v > 1 ? " stage " + std::to_string(a.action.stage) : "");
      // The stage's first forward makes the step's weight copies first.
      double start = a.start;
      if (const double casts = c.first_forward_extra(a.action); casts > 0) {
        start += casts;
        add(r, "weight casts", profiling::Category::kForward, a.start, start, a.action.micro);
      }
      add(r, name,
          pass == pipeline::Pass::kForward ? profiling::Category::kForward
                                           : profiling::Category::kBackward,
          start, a.end - comm, a.action.micro);
      if (comm > 0) {
        profiling::Event& e =
            add(r, blocking, profiling::Category::kCollective, a.end - comm, a.end, a.action.micro);
        e.lane = profiling::kCommLane;
        e.group = t.intern(group);
        e.group_size = int16_t(group_size);
        add(r, "wait " + blocking, profiling::Category::kWait, a.end - comm, a.end, a.action.micro);
      }
      // What this pass hands to a stage on another rank.
      const int stage = a.action.stage, stages = l.pp * l.v;
      const int next = pass == pipeline::Pass::kForward  ? stage + 1
                       : pass == pipeline::Pass::kWeight ? -1
                                                         : stage - 1;
      if (next >= 0 && next < stages) {
        const int to = pipeline::stage_rank(kind, next, l.pp, l.v);
        if (to != r) transfer(r, to, a.end, a.action.micro);
      }
    }
    // The rank's micro-batches, its first pass to its last, as one span (a run records one a
    // micro-batch; here 64 such spans would stack over the passes): together the ranks' spans
    // bound the pipeline's window, in which the app shades the bubble.
    if (!timed[r].empty()) {
      double first = timed[r].front().start, last = timed[r].front().end;
      for (const auto& a : timed[r]) first = std::min(first, a.start), last = std::max(last, a.end);
      add(r, "micro-batches", profiling::Category::kMicroBatch, first, last, -1);
    }
    if (p.data_comm_s > 0)
      add(r, p.data_comm_what, profiling::Category::kGradSync, span, span + p.data_comm_s, -1);
    add(r, "optimizer", profiling::Category::kOptimizer, span + p.data_comm_s, p.step_s, -1);
  }
  t.normalise();
  return t;
}

}  // namespace shardscope::analysis::projection_detail
