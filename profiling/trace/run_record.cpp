#include "profiling/trace/run_record.h"

#include <cmath>
#include <limits>

#include "profiling/trace/run_record_json.h"

namespace shardscope::profiling {
namespace {

using nlohmann::json;

// A field's value, or `fallback` where it is missing or of another type: a trace from another
// version or tool is read as far as it goes, never rejected for its description.
template <class T>
T get(const json& j, const char* key, T fallback) {
  const auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    return fallback;
  }
}

const json& member(const json& j, const char* key) {
  static const json kNull;
  const auto it = j.find(key);
  return it == j.end() ? kNull : *it;
}

// A JSON number, or NaN for what a NaN or infinite double was written as (null).
double number(const json& v) {
  return v.is_number() ? v.get<double>() : std::numeric_limits<double>::quiet_NaN();
}

std::vector<double> numbers(const json& array) {
  std::vector<double> out;
  if (!array.is_array()) return out;
  for (const auto& v : array) out.push_back(number(v));
  return out;
}

// Per rank, per step, counts: each count a JSON integer that fits (anything else reads as 0, a
// float never cast into an integer), each level an array (anything else reads as empty).
std::vector<std::vector<std::vector<int64_t>>> routed_tokens_of(const json& ranks) {
  std::vector<std::vector<std::vector<int64_t>>> out;
  if (!ranks.is_array()) return out;
  for (const auto& rank : ranks) {
    auto& steps = out.emplace_back();
    if (!rank.is_array()) continue;
    for (const auto& step : rank) {
      auto& counts = steps.emplace_back();
      if (!step.is_array()) continue;
      for (const auto& v : step) {
        const bool fits = v.is_number_integer() &&
                          (!v.is_number_unsigned() ||
                           v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()));
        counts.push_back(fits ? v.get<int64_t>() : 0);
      }
    }
  }
  return out;
}

std::optional<MemoryCategories> categories_of(const json& j) {
  if (!j.is_object()) return std::nullopt;
  MemoryCategories bytes{};
  for (int k = 0; k < kMemoryCategoryCount; ++k)
    bytes[k] = get(j, memory_kind_name(static_cast<MemoryKind>(k)), int64_t{0});
  return bytes;
}

json categories_json(const MemoryCategories& bytes) {
  json out = json::object();
  for (int k = 0; k < kMemoryCategoryCount; ++k)
    out[memory_kind_name(static_cast<MemoryKind>(k))] = bytes[k];
  return out;
}

RecordedRank rank_of(const json& j) {
  RecordedRank r;
  r.rank = get(j, "rank", 0);
  r.checksum = get(j, "checksum", std::string());
  r.weight_sum = get(j, "weight_sum", 0.0);
  r.comm_calls = get(j, "comm_calls", int64_t{0});
  r.comm_bytes_per_step = get(j, "comm_bytes_per_step", int64_t{0});
  r.peak_allocated_bytes = get(j, "peak_allocated_bytes", int64_t{0});
  r.device_allocator_peak_bytes = get(j, "device_allocator_peak_bytes", int64_t{0});
  r.peak_breakdown = categories_of(member(j, "peak_breakdown"));
  r.formula_bytes = categories_of(member(j, "formula_bytes"));
  const json& m = member(j, "memory_bytes");
  r.holdings = {get(m, "parameters", int64_t{0}), get(m, "gradients", int64_t{0}),
                get(m, "optimizer_state", int64_t{0}), get(m, "comm_buffers", int64_t{0}),
                get(m, "host", int64_t{0})};
  return r;
}

json rank_json(const RecordedRank& r) {
  json out = {{"rank", r.rank},
              {"checksum", r.checksum},
              {"weight_sum", r.weight_sum},
              {"comm_calls", r.comm_calls},
              {"comm_bytes_per_step", r.comm_bytes_per_step},
              {"peak_allocated_bytes", r.peak_allocated_bytes},
              {"memory_bytes",
               {{"parameters", r.holdings.parameters},
                {"gradients", r.holdings.gradients},
                {"optimizer_state", r.holdings.optimizer_state},
                {"comm_buffers", r.holdings.comm_buffers},
                {"host", r.holdings.host}}}};
  if (r.device_allocator_peak_bytes > 0)
    out["device_allocator_peak_bytes"] = r.device_allocator_peak_bytes;
  if (r.peak_breakdown) out["peak_breakdown"] = categories_json(*r.peak_breakdown);
  if (r.formula_bytes) out["formula_bytes"] = categories_json(*r.formula_bytes);
  return out;
}

// Per rank, whether its losses are losses. Results recorded before `reports_loss` say nothing:
// a rank that only ever recorded 0 computed none.
void read_reports_loss(const json& result, RunResult& r) {
  const json& reports = member(result, "reports_loss");
  const size_t recorded = reports.is_array() ? reports.size() : 0;
  for (size_t i = 0; i < r.rank_losses.size(); ++i) {
    const std::vector<double>& losses = r.rank_losses[i];
    if (i < recorded) {
      r.reports_loss.push_back(reports[i].is_boolean() ? reports[i].get<bool>() : !losses.empty());
      continue;
    }
    bool all_zero = !losses.empty();
    for (double l : losses) all_zero = all_zero && l == 0;
    r.reports_loss.push_back(!all_zero);
  }
}

}  // namespace

RunResult run_result_of(const json& j) {
  RunResult r;
  if (!j.is_object()) return r;
  r.data = get(j, "data", std::string());
  r.parameters = get(j, "parameters", int64_t{0});
  r.ok = get(j, "ok", false);
  r.failed_rank = get(j, "failed_rank", -1);
  r.failure = get(j, "failure", std::string());
  for (const auto& s : member(j, "steps")) {
    if (!s.is_object()) continue;
    r.steps.push_back({get(s, "step", 0), number(member(s, "loss")), get(s, "step_time_s", 0.0),
                       get(s, "lr", 0.0)});
  }
  for (const auto& rank : member(j, "ranks"))
    if (rank.is_object()) r.ranks.push_back(rank_of(rank));
  r.replicated = get(j, "replicated", true);
  r.ranks_agree = get(j, "ranks_agree", false);
  r.max_rank_delta = get(j, "max_rank_delta", 0.0);
  if (const json& ref = member(j, "reference"); ref.is_object()) {
    r.reference = RecordedReference{
        get(ref, "max_abs_deviation", 0.0), get(ref, "rel_deviation", 0.0),
        get(ref, "worst_parameter", std::string()), get(ref, "worst_parameter_rel_deviation", 0.0),
        numbers(member(ref, "losses"))};
  }
  if (const json& resumed = member(j, "resumed_from"); resumed.is_object()) {
    r.resumed_from = RecordedResume{get(resumed, "folder", std::string()), get(resumed, "step", 0),
                                    get(resumed, "skipped", std::vector<std::string>())};
  }
  r.checkpoint = get(j, "checkpoint", std::string());
  r.stopped_by_signal = get(j, "stopped_by_signal", 0);
  r.wall_s = get(j, "wall_s", 0.0);
  const json& losses = member(j, "rank_losses");
  r.has_rank_detail = losses.is_array() || j.contains("weight_sync");
  for (const auto& rank : losses) r.rank_losses.push_back(numbers(rank));
  read_reports_loss(j, r);
  r.routed_tokens = routed_tokens_of(member(j, "routed_tokens"));
  const json& sync = member(j, "weight_sync");
  for (const auto& g : member(sync, "groups"))
    r.sync_groups.push_back(g.is_string() ? g.get<std::string>() : std::string("?"));
  for (const auto& row : member(sync, "ranks")) {
    if (!row.is_object()) continue;
    r.sync_ranks.push_back({get(row, "rank", 0), numbers(member(row, "vs_rank0")),
                            numbers(member(row, "vs_reference"))});
  }
  return r;
}

json run_result_json(const RunResult& r) {
  json out;
  out["data"] = r.data;
  out["parameters"] = r.parameters;
  out["ok"] = r.ok;
  if (!r.ok) {
    out["failed_rank"] = r.failed_rank;
    out["failure"] = r.failure;
  }
  json steps = json::array();
  for (const auto& s : r.steps)
    steps.push_back(
        {{"step", s.step}, {"loss", s.loss}, {"step_time_s", s.step_time_s}, {"lr", s.lr}});
  out["steps"] = steps;
  json ranks = json::array();
  for (const auto& rank : r.ranks) ranks.push_back(rank_json(rank));
  out["ranks"] = ranks;
  out["replicated"] = r.replicated;
  out["ranks_agree"] = r.ranks_agree;
  out["max_rank_delta"] = r.max_rank_delta;
  out["reference"] = nullptr;
  if (r.reference) {
    out["reference"] = {
        {"max_abs_deviation", r.reference->max_abs_deviation},
        {"rel_deviation", r.reference->rel_deviation},
        {"worst_parameter", r.reference->worst_parameter},
        {"worst_parameter_rel_deviation", r.reference->worst_parameter_rel_deviation},
        {"losses", r.reference->losses}};
  }
  if (r.resumed_from) {
    out["resumed_from"] = {{"folder", r.resumed_from->folder},
                           {"step", r.resumed_from->step},
                           {"skipped", r.resumed_from->skipped}};
  }
  if (!r.checkpoint.empty()) out["checkpoint"] = r.checkpoint;
  if (r.stopped_by_signal != 0) out["stopped_by_signal"] = r.stopped_by_signal;
  out["wall_s"] = r.wall_s;
  if (r.has_rank_detail) {
    out["rank_losses"] = r.rank_losses;
    out["reports_loss"] = r.reports_loss;
    if (!r.routed_tokens.empty()) out["routed_tokens"] = r.routed_tokens;
    json rows = json::array();
    for (const auto& row : r.sync_ranks) {
      json j = {{"rank", row.rank}, {"vs_rank0", row.vs_rank0}};
      if (!row.vs_reference.empty()) j["vs_reference"] = row.vs_reference;
      rows.push_back(j);
    }
    out["weight_sync"] = {{"groups", r.sync_groups}, {"ranks", rows}};
  }
  return out;
}

RunRecord run_record_of(const json& j) {
  RunRecord run;
  if (!j.is_object()) return run;
  const json& config = member(j, "config");
  if (config.is_object()) run.config_json = config.dump();
  // Older descriptions had the strategy and world in the configuration only.
  run.strategy = get(j, "strategy", get(config, "strategy", std::string()));
  run.world = get(j, "world", get(config, "world", 0));
  run.mode = get(j, "mode", std::string());
  run.device = get(j, "device", std::string());
  run.backend = get(j, "backend", std::string());
  run.torch = get(j, "torch", std::string());
  run.device_matmul_tflops = get(j, "device_matmul_tflops", 0.0);
  run.device_name = get(j, "device_name", std::string());
  run.turns_drain_device = get(j, "turns_drain_device", false);
  if (const json& result = member(j, "result"); result.is_object())
    run.result = run_result_of(result);
  if (const json& p = member(j, "projected"); p.is_object()) {
    RecordedProjection projected{get(p, "hardware", std::string()), get(p, "compute_scale", 0.0)};
    if (const json& pipe = member(p, "pipeline"); pipe.is_object()) {
      projected.pipeline_stages = get(pipe, "stages", 0);
      projected.micro_batches = get(pipe, "micro_batches", 0);
      projected.stages_per_rank = get(pipe, "stages_per_rank", 1);
      projected.schedule = get(pipe, "schedule", std::string());
    }
    run.projected = projected;
  }
  return run;
}

json run_record_json(const RunRecord& run) {
  json out = json::object();
  // A description of ours says everything; another's only what it had.
  const bool ours = run.has_config();
  if (ours) out["config"] = json::parse(run.config_json, nullptr, false);
  auto put = [&](const char* key, const auto& value, bool present) {
    if (ours || present) out[key] = value;
  };
  put("strategy", run.strategy, !run.strategy.empty());
  put("world", run.world, run.world != 0);
  put("mode", run.mode, !run.mode.empty());
  put("device", run.device, !run.device.empty());
  put("backend", run.backend, !run.backend.empty());
  put("torch", run.torch, !run.torch.empty());
  put("device_matmul_tflops", run.device_matmul_tflops, run.device_matmul_tflops != 0);
  if (!run.device_name.empty()) out["device_name"] = run.device_name;
  if (run.turns_drain_device) out["turns_drain_device"] = true;
  if (run.result) out["result"] = run_result_json(*run.result);
  if (run.projected) {
    out["projected"] = {{"hardware", run.projected->hardware},
                        {"compute_scale", run.projected->compute_scale}};
    if (run.projected->pipeline_stages > 1)
      out["projected"]["pipeline"] = {{"stages", run.projected->pipeline_stages},
                                      {"micro_batches", run.projected->micro_batches},
                                      {"stages_per_rank", run.projected->stages_per_rank},
                                      {"schedule", run.projected->schedule}};
  }
  return out;
}

bool RunRecord::empty() const {
  return !has_config() && strategy.empty() && world == 0 && mode.empty() && device.empty() &&
         backend.empty() && torch.empty() && device_matmul_tflops == 0 && device_name.empty() &&
         !result && !projected;
}

RunRecord run_record_from_json(std::string_view text) {
  return run_record_of(json::parse(text, nullptr, /*allow_exceptions=*/false));
}

std::string run_record_to_json(const RunRecord& run) {
  return run_record_json(run).dump();
}

}  // namespace shardscope::profiling
