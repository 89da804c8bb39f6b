#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "profiling/trace/memory_kind.h"
#include "profiling/trace/run_record.h"

namespace shardscope::profiling {

// What an event is, for colouring and for the metrics (compute vs communication).
enum class Category : uint8_t {
  kStep,        // one optimizer step on a rank
  kMicroBatch,  // forward + backward of one micro-batch
  kForward,     // forward of one unit (embeddings, a block, the head)
  kBackward,    // backward of one unit
  kGradSync,    // waiting for / finishing gradient synchronisation
  kOptimizer,   // optimizer step (and what a strategy does around it)
  kCollective,  // a communication call, from issue to completion
  kWait,        // the caller blocked on a communication call
  kKernel,      // a device kernel (CUPTI)
  kMemcpy,      // a device copy or memset (CUPTI)
  kOther,
};
constexpr int kCategoryCount = static_cast<int>(Category::kOther) + 1;
const char* category_name(Category category);
bool parse_category(const std::string& name, Category* out);
// Compute for the HTA metrics: forward, backward and device kernels that are not collectives.
bool is_compute(Category category);
bool is_communication(Category category);

// The host span of a rank waiting for its turn on a shared device (--serialize-compute): time it
// would not have spent on a device of its own, which projection leaves out.
constexpr const char* kDeviceTurnWaitName = "wait for the device";

// Fixed lanes of every rank (device streams get lanes of their own after these).
enum Lane : uint8_t { kHostLane = 0, kCommLane = 1 };

struct Event {
  int64_t t0_ns = 0;
  int64_t t1_ns = 0;
  int64_t bytes = 0;  // collectives: this rank's input payload
  // Collectives: sequence number within the group (links ranks). Device work and the CUDA
  // runtime calls that launched it: CUPTI's correlation id (links a kernel to its launch).
  int64_t seq = -1;
  uint32_t name = 0;   // index into Trace::strings
  uint32_t group = 0;  // collectives: process group name, index into Trace::strings
  int32_t step = -1;
  // Host spans: the microseconds the recording thread was off its core within the span (a busy
  // machine's preemption, or a wait), where measured (HostSpan::off_cpu_us); else 0.
  int32_t off_cpu_us = 0;
  int16_t micro = -1;
  int16_t peer = -1;  // point-to-point peer or broadcast root
  int16_t group_size = 0;
  uint8_t lane = kHostLane;
  Category category = Category::kOther;
};

// Events are many (a GPU step's kernels): the field above fits what was padding.
static_assert(sizeof(Event) == 56, "an Event's size is part of a trace's memory");

struct CounterSample {
  int64_t t_ns = 0;
  int64_t bytes = 0;
  MemoryKind kind = MemoryKind::kOther;
};

struct RankTrace {
  int rank = 0;
  std::vector<std::string> lanes;       // lane index -> name
  std::vector<Event> events;            // sorted by (lane, t0)
  std::vector<CounterSample> counters;  // sorted by time
  std::string failure;                  // empty unless the rank failed
};

// One run: what ran and what it found (run_record.h: config, world, strategy, device, backend,
// versions, the result),
// and per rank its lanes, events and memory counters. Strings are interned once per trace.
struct Trace {
  RunRecord run;
  std::vector<std::string> strings{""};
  std::vector<RankTrace> ranks;

  uint32_t intern(const std::string& s);
  const std::string& str(uint32_t id) const { return strings.at(id); }
  size_t event_count() const;
  // Sorts every rank's events by (lane, t0) and counters by time.
  void normalise();

 private:
  std::unordered_map<std::string, uint32_t> index_;
};

}  // namespace shardscope::profiling
