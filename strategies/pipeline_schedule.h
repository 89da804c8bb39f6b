#pragma once

#include <string>
#include <vector>

namespace shardscope::pipeline {

enum class Pass { kForward, kBackward };

struct Action {
  Pass pass;
  int micro;  // micro-batch index, 0 .. m-1
  bool operator==(const Action& other) const { return pass == other.pass && micro == other.micro; }
};

// What stage `stage` of `stages` does, in order, for `micro_batches` micro-batches.
//  gpipe: every forward, then every backward.
//  1f1b:  (PipeDream-Flush) stages-stage-1 warm-up forwards, then one forward and one backward
//         alternately, then the remaining backwards; a stage never holds more than
//         stages-stage micro-batches' activations.
// Both keep forwards and backwards in micro-batch order, so sends and receives between two
// stages always pair up in the same order.
std::vector<Action> schedule(const std::string& kind, int stage, int stages, int micro_batches);

// The most micro-batches whose forward is done and backward is not, at any point of `actions`.
int peak_in_flight(const std::vector<Action>& actions);

// The idle fraction of each stage's time in the pipeline, if every stage's forward takes
// `forward_time` and backward `backward_time` and nothing else costs time: executes every
// stage's schedule with its dependencies (forward i after the previous stage's forward i,
// backward i after the next stage's backward i).
double simulated_bubble(const std::string& kind, int stages, int micro_batches,
                        double forward_time = 1.0, double backward_time = 2.0);

// The textbook bubble fraction (p - 1) / (m + p - 1).
double bubble_formula(int stages, int micro_batches);

}  // namespace shardscope::pipeline
