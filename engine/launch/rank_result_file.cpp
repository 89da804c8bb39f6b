#include "engine/launch/rank_result_file.h"

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "engine/state/atomic_file.h"
#include "engine/state/weights.h"

// Each type's fields, listed once, give both directions of its JSON form.
namespace shardscope::profiling {
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(CommEvent, op, group, dtype, bytes, group_size, peer, seq, async,
                                   emulated, step, micro, t_issue_ns, t_wait_begin_ns,
                                   t_complete_ns, t_wait_end_ns)
}  // namespace shardscope::profiling

namespace shardscope {

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(StepRecord, step, loss, local_loss, step_time_s,
                                   local_step_time_s, lr, routed_tokens)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(MemoryBytes, parameters, gradients, optimizer_state,
                                   comm_buffers, host)

namespace {

using nlohmann::json;

std::string path_of(const std::string& dir, int rank, const char* suffix) {
  return dir + "/rank-" + std::to_string(rank) + suffix;
}

}  // namespace

json step_record_json(const StepRecord& s) {
  return s;
}

StepRecord step_record_of(const json& j) {
  return j.get<StepRecord>();
}

void write_rank_outcome(const std::string& dir, int rank, const RankOutcome& outcome,
                        const profiling::RankEventLog& log) {
  json out = {{"rank", rank}, {"peak_allocated_bytes", outcome.peak_allocated_bytes}};
  if (!outcome.partial.empty()) out["partial"] = outcome.partial;
  if (outcome.failure) {
    out["failure"] = {{"message", outcome.failure->message}, {"t_ns", outcome.failure->t_ns}};
  }
  if (outcome.result) {
    const RankResult& r = *outcome.result;
    json steps = json::array();
    for (const auto& s : r.steps) steps.push_back(step_record_json(s));
    json names = json::array();
    for (const auto& [name, tensor] : r.weights) names.push_back(name);
    // Written before the JSON: a reader that finds the JSON finds the weights complete. The
    // format is --export-weights's, so Python's torch.load reads a rank's weights too.
    export_weights(path_of(dir, rank, ".weights"), r.weights);
    out["result"] = {
        {"steps", steps},
        {"weight_names", names},
        {"replicated", r.replicated},
        {"memory", r.memory},
        {"first_step", r.first_step},
        {"checkpoint_step", r.checkpoint_step},
        {"stopped_by_signal", r.stopped_by_signal},
        {"reports_loss", r.reports_loss},
        {"device_allocator_peak_bytes", r.device_allocator_peak_bytes},
        {"backward_passes_on_second_thread", r.backward_thread.passes_on_second_thread},
        {"backward_passes_on_own_thread", r.backward_thread.passes_on_own_thread},
        {"backward_hooks_off_own_thread", r.backward_thread.hooks_off_own_thread}};
  }
  json events = json::array(), spans = json::array(), memory = json::array();
  for (const auto& e : log.snapshot()) events.push_back(e);
  for (const auto& s : log.spans()) {
    spans.push_back(
        {s.name, static_cast<int>(s.category), s.t0_ns, s.t1_ns, s.step, s.micro, s.off_cpu_us});
  }
  for (const auto& m : log.memory()) {
    memory.push_back({m.t_ns, static_cast<int>(m.kind), m.bytes});
  }
  json device = json::array();
  for (const auto& a : outcome.device_activity) {
    device.push_back({a.rank, a.name, static_cast<int>(a.category), a.stream, a.t0_ns, a.t1_ns,
                      a.bytes, a.correlation});
  }
  out["device_activity"] = std::move(device);
  out["events"] = std::move(events);
  out["spans"] = std::move(spans);
  out["memory_samples"] = std::move(memory);
  write_file_atomically(path_of(dir, rank, ".json"), out.dump());
}

bool write_rank_outcome_unless_present(const std::string& dir, int rank, const RankOutcome& outcome,
                                       const profiling::RankEventLog& log) {
  std::error_code ec;
  if (std::filesystem::exists(rank_outcome_path(dir, rank), ec)) return false;
  write_rank_outcome(dir, rank, outcome, log);
  return true;
}

std::string rank_outcome_path(const std::string& dir, int rank) {
  return path_of(dir, rank, ".json");
}

bool read_rank_outcome(const std::string& dir, int rank, RankOutcome& outcome,
                       profiling::RankEventLog& log) {
  std::ifstream file(path_of(dir, rank, ".json"));
  if (!file) return false;
  json in = json::parse(file, nullptr, /*allow_exceptions=*/false);
  if (in.is_discarded()) return false;
  outcome.peak_allocated_bytes = in.at("peak_allocated_bytes");
  if (in.contains("partial")) outcome.partial = in["partial"];
  if (in.contains("failure")) {
    outcome.failure = RankFailure{rank, in["failure"].at("message"), in["failure"].at("t_ns")};
  }
  if (in.contains("result")) {
    const json& r = in["result"];
    RankResult result;
    result.rank = rank;
    for (const auto& s : r.at("steps")) result.steps.push_back(step_record_of(s));
    const std::string weights_file = path_of(dir, rank, ".weights");
    const auto& names = r.at("weight_names");
    result.weights = read_exported_weights(weights_file);
    if (result.weights.size() != names.size()) return false;
    for (size_t i = 0; i < names.size(); ++i) {
      if (result.weights[i].first != names[i].get<std::string>()) return false;
    }
    result.replicated = r.at("replicated");
    result.memory = r.at("memory").get<MemoryBytes>();
    result.first_step = r.at("first_step");
    result.checkpoint_step = r.at("checkpoint_step");
    result.stopped_by_signal = r.at("stopped_by_signal");
    result.reports_loss = r.value("reports_loss", true);
    result.device_allocator_peak_bytes = r.value("device_allocator_peak_bytes", int64_t{0});
    result.backward_thread = {r.value("backward_passes_on_second_thread", int64_t{0}),
                              r.value("backward_passes_on_own_thread", int64_t{0}),
                              r.value("backward_hooks_off_own_thread", int64_t{0})};
    outcome.result = std::move(result);
  }
  for (const auto& a : in.value("device_activity", json::array())) {
    profiling::DeviceActivity activity;
    activity.rank = a.at(0);
    activity.name = a.at(1);
    activity.category = static_cast<profiling::Category>(a.at(2).get<int>());
    activity.stream = a.at(3);
    activity.t0_ns = a.at(4);
    activity.t1_ns = a.at(5);
    activity.bytes = a.at(6);
    activity.correlation = a.at(7);
    outcome.device_activity.push_back(std::move(activity));
  }
  std::vector<profiling::CommEvent> events;
  std::vector<profiling::HostSpan> spans;
  std::vector<profiling::MemorySample> memory;
  for (const auto& e : in.at("events")) events.push_back(e.get<profiling::CommEvent>());
  for (const auto& s : in.at("spans")) {
    profiling::HostSpan span;
    span.name = s.at(0);
    span.category = static_cast<profiling::Category>(s.at(1).get<int>());
    span.t0_ns = s.at(2);
    span.t1_ns = s.at(3);
    span.step = s.at(4);
    span.micro = s.at(5);
    if (s.size() > 6) span.off_cpu_us = s.at(6);
    spans.push_back(std::move(span));
  }
  for (const auto& m : in.at("memory_samples")) {
    memory.push_back({m.at(0).get<int64_t>(),
                      static_cast<profiling::MemoryKind>(m.at(1).get<int>()),
                      m.at(2).get<int64_t>()});
  }
  log.restore(std::move(events), std::move(spans), std::move(memory));
  return true;
}

}  // namespace shardscope
