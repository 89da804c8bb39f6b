#include "profiling/record/device_tracer.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>

#include "profiling/record/clock.h"

#ifdef SHARDSCOPE_HAVE_CUPTI
#include <ATen/record_function.h>
#include <cupti.h>
#include <torch/cuda.h>

#include "profiling/record/memory_tracker.h"
#endif

namespace shardscope::profiling {

namespace {

// CUPTI's CUpti_ActivityMemcpyKind and CUpti_ActivityMemoryKind, in order (checked against
// cupti.h below where it is built), in Kineto's words.
constexpr const char* kCopyKinds[] = {"Unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA",
                                      "AtoD",    "DtoA", "DtoD", "HtoH", "PtoP"};
constexpr const char* kMemoryKinds[] = {"Unknown", "Pageable", "Pinned",        "Device",
                                        "Array",   "Managed",  "Device Static", "Managed Static"};

template <size_t N>
const char* kind_name(const char* const (&names)[N], int kind) {
  return kind >= 0 && static_cast<size_t>(kind) < N ? names[kind] : names[0];
}

}  // namespace

std::string memcpy_name(int copy_kind, int src_kind, int dst_kind) {
  return std::string("Memcpy ") + kind_name(kCopyKinds, copy_kind) + " (" +
         kind_name(kMemoryKinds, src_kind) + " -> " + kind_name(kMemoryKinds, dst_kind) + ")";
}

#ifdef SHARDSCOPE_HAVE_CUPTI
namespace {

static_assert(CUPTI_ACTIVITY_MEMCPY_KIND_DTOD == 8 && CUPTI_ACTIVITY_MEMCPY_KIND_PTOP == 10 &&
              CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE == 1 && CUPTI_ACTIVITY_MEMORY_KIND_DEVICE == 3 &&
              CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC == 7);

// What CUPTI hands back between flushes; its callbacks run on CUPTI's own thread.
struct Collected {
  std::mutex mutex;
  std::vector<DeviceActivity> activity;
  std::map<uint32_t, int> rank_of_correlation;  // CUPTI correlation id -> external id (rank)
  int64_t host_minus_device_ns = 0;
};

Collected& collected() {
  static Collected c;
  return c;
}

constexpr size_t kBufferBytes = 8 << 20;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(aligned_alloc(8, kBufferBytes));
  *size = kBufferBytes;
  *max_records = 0;
}

// Copies and memsets share the fields we keep; the correlation id is resolved to a rank later.
template <typename Record>
DeviceActivity copy_activity(const Record& r, std::string name) {
  DeviceActivity a;
  a.name = std::move(name);
  a.category = Category::kMemcpy;
  a.stream = r.streamId;
  a.t0_ns = static_cast<int64_t>(r.start);
  a.t1_ns = static_cast<int64_t>(r.end);
  a.bytes = static_cast<int64_t>(r.bytes);
  a.correlation = r.correlationId;
  return a;
}

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel", the name the PyTorch profiler shows.
std::string runtime_call_name(CUpti_CallbackId cbid) {
  const char* raw = nullptr;
  if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, cbid, &raw) != CUPTI_SUCCESS ||
      raw == nullptr) {
    return "cudaRuntimeCall";
  }
  std::string name = raw;
  const size_t version = name.rfind("_v");
  if (version != std::string::npos && version + 2 < name.size() &&
      name.find_first_not_of("0123456789", version + 2) == std::string::npos) {
    name.resize(version);
  }
  return name;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  Collected& c = collected();
  std::lock_guard<std::mutex> lock(c.mutex);
  CUpti_Activity* record = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) {
    DeviceActivity a;
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
      case CUPTI_ACTIVITY_KIND_KERNEL: {
        auto* k = reinterpret_cast<CUpti_ActivityKernel10*>(record);
        a.name = k->name != nullptr ? k->name : "kernel";
        a.stream = k->streamId;
        a.t0_ns = static_cast<int64_t>(k->start);
        a.t1_ns = static_cast<int64_t>(k->end);
        a.correlation = k->correlationId;  // resolved to a rank below
        c.activity.push_back(a);
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME: {
        auto* api = reinterpret_cast<CUpti_ActivityAPI*>(record);
        a.name = runtime_call_name(api->cbid);
        a.category = Category::kOther;
        a.t0_ns = static_cast<int64_t>(api->start);
        a.t1_ns = static_cast<int64_t>(api->end);
        a.correlation = api->correlationId;
        c.activity.push_back(a);
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto& copy = *reinterpret_cast<CUpti_ActivityMemcpy6*>(record);
        c.activity.push_back(
            copy_activity(copy, memcpy_name(copy.copyKind, copy.srcKind, copy.dstKind)));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto& set = *reinterpret_cast<CUpti_ActivityMemset4*>(record);
        c.activity.push_back(copy_activity(
            set, std::string("Memset (") + kind_name(kMemoryKinds, set.memoryKind) + ")"));
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        auto* e = reinterpret_cast<CUpti_ActivityExternalCorrelation*>(record);
        c.rank_of_correlation[e->correlationId] = static_cast<int>(e->externalId);
        break;
      }
      default:
        break;
    }
  }
  free(buffer);
}

// How many push_rank calls this thread is inside: a rank thread's own launches carry its id.
thread_local int pushed_ranks = 0;

// Autograd runs a CUDA backward on a device thread of its own, which the rank threads of a process
// share and on which no rank pushed its id: on an H100 every backward kernel of every rank came
// back with no rank and was dropped (0 of 2,559 launches a rank fell inside a backward). For each
// node it runs there, autograd carries the node's graph task's thread-local state over, the rank's
// memory tracker among it; so an op callback on a thread without a pushed id finds the op's rank
// there and wraps the op's launches in that rank's id.
struct PushedRank final : at::ObserverContext {};

std::unique_ptr<at::ObserverContext> op_begins(const at::RecordFunction&) {
  if (pushed_ranks > 0) return nullptr;
  const RankMemoryTracker* tracker = RankMemoryTracker::current();
  if (tracker == nullptr) return nullptr;
  cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
                                         static_cast<uint64_t>(tracker->rank()));
  return std::make_unique<PushedRank>();
}

void op_ends(const at::RecordFunction&, at::ObserverContext* pushed) {
  uint64_t id = 0;
  if (pushed != nullptr)
    cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id);
}

at::CallbackHandle op_callback = 0;

std::string cupti_error(CUptiResult result) {
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  return text != nullptr ? text : "unknown CUPTI error";
}

}  // namespace

bool DeviceTracer::built_with_cupti() {
  return true;
}

bool DeviceTracer::enable(std::string* why) {
  if (enabled_) return true;
  // To take apart what CUPTI costs a run (docs/running-on-a-gpu.md): off, no-runtime (no runtime
  // calls recorded, so kernels lose their launching call) or no-op-callback (kernels launched on
  // autograd's device thread lose their rank).
  const char* env = std::getenv("SHARDSCOPE_CUPTI");
  const std::string variant = env != nullptr ? env : "";
  if (variant == "off") {
    if (why) *why = "SHARDSCOPE_CUPTI=off: device tracing is off, host tracing goes on";
    return false;
  }
  if (!torch::cuda::is_available()) {
    if (why) *why = "no CUDA device or driver: device tracing is off, host tracing goes on";
    return false;
  }
  CUptiResult r = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
  for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                  CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME,
                                  CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION}) {
    if (kind == CUPTI_ACTIVITY_KIND_RUNTIME && variant == "no-runtime") continue;
    if (r == CUPTI_SUCCESS) r = cuptiActivityEnable(kind);
  }
  if (r != CUPTI_SUCCESS) {
    if (why) *why = "CUPTI could not be enabled: " + cupti_error(r);
    return false;
  }
  uint64_t device_now = 0;
  cuptiGetTimestamp(&device_now);
  collected().host_minus_device_ns = now_ns() - static_cast<int64_t>(device_now);
  if (variant != "no-op-callback")
    op_callback = at::addGlobalCallback(at::RecordFunctionCallback(op_begins, op_ends));
  enabled_ = true;
  return true;
}

void DeviceTracer::push_rank(int rank) {
  ++pushed_ranks;
  if (enabled_) {
    cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
                                           static_cast<uint64_t>(rank));
  }
}

void DeviceTracer::pop_rank() {
  --pushed_ranks;
  uint64_t id = 0;
  if (enabled_) cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &id);
}

std::vector<DeviceActivity> DeviceTracer::collect() {
  if (!enabled_) return {};
  torch::cuda::synchronize();
  cuptiActivityFlushAll(0);
  Collected& c = collected();
  std::lock_guard<std::mutex> lock(c.mutex);
  // Of the runtime calls, only those that launched device work: the rest (cudaGetDevice, stream
  // queries, ...) would outnumber the kernels and explain nothing about them.
  std::set<uint32_t> launched;
  for (const auto& a : c.activity) {
    if (a.category != Category::kOther) launched.insert(a.correlation);
  }
  std::vector<DeviceActivity> out;
  for (auto a : c.activity) {
    if (a.category == Category::kOther && launched.count(a.correlation) == 0) continue;
    auto it = c.rank_of_correlation.find(a.correlation);
    a.rank = it != c.rank_of_correlation.end() ? it->second : -1;
    a.t0_ns += c.host_minus_device_ns;
    a.t1_ns += c.host_minus_device_ns;
    out.push_back(std::move(a));
  }
  c.activity.clear();
  return out;
}

void DeviceTracer::disable() {
  if (!enabled_) return;
  if (op_callback != 0) at::removeCallback(op_callback);
  op_callback = 0;
  for (CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                  CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME,
                                  CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION}) {
    cuptiActivityDisable(kind);
  }
  enabled_ = false;
}

#else  // no CUPTI in this build

bool DeviceTracer::built_with_cupti() {
  return false;
}

bool DeviceTracer::enable(std::string* why) {
  if (why) *why = "built without CUPTI: device tracing is off, host tracing goes on";
  return false;
}
void DeviceTracer::push_rank(int) {}
void DeviceTracer::pop_rank() {}
std::vector<DeviceActivity> DeviceTracer::collect() {
  return {};
}
void DeviceTracer::disable() {}

#endif

DeviceTracer& DeviceTracer::instance() {
  static DeviceTracer tracer;
  return tracer;
}

void add_device_activity(Trace& trace, const std::vector<DeviceActivity>& activity) {
  for (const auto& a : activity) {
    for (auto& r : trace.ranks) {
      if (r.rank != a.rank) continue;
      const std::string lane_name = a.category == Category::kOther
                                        ? std::string(kCudaRuntimeLane)
                                        : "stream " + std::to_string(a.stream);
      auto it = std::find(r.lanes.begin(), r.lanes.end(), lane_name);
      if (it == r.lanes.end()) {
        if (r.lanes.size() >= 255) break;
        r.lanes.push_back(lane_name);
        it = r.lanes.end() - 1;
      }
      Event e;
      e.name = trace.intern(a.name);
      e.category = a.category;
      e.lane = static_cast<uint8_t>(it - r.lanes.begin());
      e.t0_ns = a.t0_ns;
      e.t1_ns = std::max(a.t0_ns, a.t1_ns);
      e.bytes = a.bytes;
      e.seq = a.correlation;
      r.events.push_back(e);
    }
  }
  trace.normalise();
}

}  // namespace shardscope::profiling
