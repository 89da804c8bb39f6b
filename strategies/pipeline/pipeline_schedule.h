#pragma once

#include <functional>
#include <string>
#include <vector>

namespace shardscope::pipeline {

// kBackward is a whole backward pass of a stage; the zero-bubble schedules split it into kInput
// (the gradient of the stage's input, which the previous stage waits for) and kWeight (the
// gradients of its weights, which nobody waits for and so fills the bubble).
enum class Pass { kForward, kBackward, kInput, kWeight };

struct Action {
  Pass pass;
  int micro;       // micro-batch index, 0 .. m-1
  int stage = -1;  // the (virtual) pipeline stage, 0 .. p*v-1
  bool operator==(const Action& other) const {
    return pass == other.pass && micro == other.micro && stage == other.stage;
  }
};

// The schedules (`--schedule`), and how many stages each runs per rank by default. Each schedule
// describes itself where its order is defined (pipeline_orders.cpp, registered in
// schedule_registry.h); these functions ask it. schedule_kinds() lists them in the order they are
// defined: 1f1b (the default), gpipe, interleaved-1f1b, zero-bubble, zbv, dualpipev.
const std::vector<std::string>& schedule_kinds();
int default_stages_per_rank(const std::string& kind);
// Why `kind` is no schedule, cannot run `stages_per_rank` stages per rank, or cannot run
// `micro_batches` over `ranks` ranks; "" where it can.
std::string kind_problem(const std::string& kind);
std::string stages_per_rank_problem(const std::string& kind, int stages_per_rank);
std::string micro_batches_problem(const std::string& kind, int ranks, int micro_batches);
// Whether the schedule splits backward into input-gradient and weight-gradient passes.
bool splits_backward(const std::string& kind);

// Which stages rank `rank` holds, in its chunk order, and which rank holds `stage`. Interleaved
// schedules loop (stage r + k p on rank r); the V-shaped ones (zbv, dualpipev) fold the pipeline
// back (stages r and 2p-1-r on rank r), so the first and last stage share rank 0.
std::vector<int> rank_stages(const std::string& kind, int rank, int ranks, int stages_per_rank);
int stage_rank(const std::string& kind, int stage, int ranks, int stages_per_rank);

// What rank `rank` of `ranks` does, in order, for `micro_batches` micro-batches; throws
// std::invalid_argument where the schedule cannot run them. Each order is described where it is
// defined (pipeline_orders.cpp): gpipe every forward then every backward, 1f1b PipeDream-Flush,
// and the orders of PyTorch's Interleaved1F1B, InterleavedZeroBubble, ZBVZeroBubble and DualPipeV
// (overlapped F+B pairs run as their forward, then their backward), checked action by action
// against torch.distributed.pipelining in tests/strategies/pipeline/pipeline_orders_test.cpp.
// Every stage runs its forwards, and its backwards, in micro-batch order, so sends and
// receives between two stages pair up in order.
std::vector<Action> schedule(const std::string& kind, int rank, int ranks, int micro_batches,
                             int stages_per_rank = 1);

// The most micro-batches whose forward is done and whose activations are not yet freed (by the
// backward, or by the weight pass where backward is split), summed over the rank's stages.
int peak_in_flight(const std::vector<Action>& actions);

// Relative cost of each pass in simulated_bubble (a backward is input + weight).
struct PassCosts {
  double forward = 1.0;
  double input = 1.0;
  double weight = 1.0;
};

// The idle fraction of each rank's time in the pipeline if every pass costs `costs` and nothing
// else costs time: executes every rank's order with its dependencies (a forward after the
// previous stage's forward, an input gradient or backward after the next stage's, a weight pass
// after its own stage's input pass).
double simulated_bubble(const std::string& kind, int ranks, int micro_batches,
                        int stages_per_rank = 1, PassCosts costs = {});

// Every rank's order executed with each pass's own cost (`seconds(pass, stage)`, where a whole
// backward is kBackward) and `transfer_s` added where a pass waits for another rank's: when each
// action of each rank starts and ends, from 0.
struct TimedAction {
  Action action;
  double start = 0, end = 0;
};
// `first_forward_s(stage)`, if given, is added to the stage's first forward (micro-batch 0): what
// a stage does once a step before its first micro-batch (casting its weights to bf16).
std::vector<std::vector<TimedAction>> simulate_schedule(
    const std::string& kind, int ranks, int micro_batches, int stages_per_rank,
    const std::function<double(Pass, int)>& seconds, double transfer_s = 0,
    const std::function<double(int)>& first_forward_s = nullptr);

// The bubble each schedule's paper gives, as a fraction of the step (equal forward, input and
// weight passes where backward is split), and that formula as text.
double bubble_formula(const std::string& kind, int ranks, int micro_batches,
                      int stages_per_rank = 1);
std::string bubble_formula_text(const std::string& kind);

}  // namespace shardscope::pipeline
