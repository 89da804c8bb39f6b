#include "app/analysis/run_attributes.h"

#include <cstdio>
#include <set>

#include <nlohmann/json.hpp>

#include "engine/state/recorded_config.h"
#include "strategies/layout/parallel_layout.h"

namespace shardscope::analysis {
namespace {

std::string megabytes(double mb) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%g MB", mb);
  return buf;
}

bool same_shape(const ModelConfig& a, const ModelConfig& b) {
  return a.vocab == b.vocab && a.d_model == b.d_model && a.heads == b.heads &&
         a.layers == b.layers && a.seq == b.seq && a.mlp_ratio == b.mlp_ratio &&
         a.tie_embeddings == b.tie_embeddings;
}

}  // namespace

RunAttributes run_attributes(const profiling::RunRecord& run, const std::string& lens) {
  RunAttributes a;
  a.lens = lens;
  if (!run.has_config()) return a;
  const std::optional<Config> recorded = recorded_config(run);
  if (!recorded) {
    // A run description from another version: name it by what it says plainly.
    a.strategy = run.strategy.empty() ? "?" : run.strategy;
    a.world = run.world;
    return a;
  }
  const Config& config = *recorded;
  a.known = true;
  a.strategy = config.strategy;
  a.world = config.world;
  a.preset = config.preset;
  try {
    if (!same_shape(config.model, preset_model(config.preset))) a.preset += " + custom shape";
  } catch (const ConfigError&) {
  }
  const StrategyOptions& o = config.strategy_options;
  // Each strategy overlaps through one of the two (ddp/zero2 through `overlap`, fsdp through
  // `prefetch`); the other stays at its default, on.
  a.overlap = o.overlap && o.prefetch ? "on" : "off";
  try {
    if (layout_of(config).pipeline > 1) a.schedule = o.schedule;
  } catch (const ConfigError&) {
  }
  a.bucket = o.bucket_mb > 0 ? megabytes(o.bucket_mb) : "default";
  a.precision = o.precision;
  a.model = to_json(config).value("model", nlohmann::json::object()).dump();
  a.global_batch = config.global_batch > 0 ? config.global_batch : config.global_batch_size();
  return a;
}

const std::vector<std::string>& attribute_names() {
  static const std::vector<std::string> names{"preset", "overlap",   "schedule",
                                              "bucket", "precision", "lens"};
  return names;
}

std::string attribute_header(const std::string& name) {
  return name == "overlap" ? "overlap option" : name;
}

std::string attribute_value(const RunAttributes& run, const std::string& name) {
  if (name == "preset") return run.preset;
  if (name == "overlap") return run.overlap;
  if (name == "schedule") return run.schedule;
  if (name == "bucket") return run.bucket;
  if (name == "precision") return run.precision;
  if (name == "lens") return run.lens;
  return "";
}

std::vector<std::string> distinguishing_attributes(const std::vector<RunAttributes>& runs) {
  // Traces without our run description have no attributes to tell apart.
  std::vector<const RunAttributes*> known;
  for (const auto& run : runs) {
    if (run.known) known.push_back(&run);
  }
  // An attribute sets runs apart when two runs that have it differ in it: a pipeline schedule
  // names pipeline runs beside each other, not a pipeline run beside data-parallel ones (its
  // strategy does that).
  std::vector<std::string> shown;
  for (const auto& name : attribute_names()) {
    std::set<std::string> values;
    for (const auto* run : known) {
      const std::string value = attribute_value(*run, name);
      if (!value.empty()) values.insert(value);
    }
    if (values.size() > 1) shown.push_back(name);
  }
  return shown;
}

std::string run_label(const RunAttributes& run, const std::vector<std::string>& shown) {
  if (run.strategy.empty()) return "trace";
  std::string label = run.strategy + " w" + std::to_string(run.world);
  for (const auto& name : shown) {
    const std::string value = attribute_value(run, name);
    if (value.empty()) continue;
    // Values that need their name to be read: "overlap off", "bucket 0.1 MB".
    const bool named = name == "overlap" || name == "bucket";
    label += ", " + (named ? name + " " : std::string()) + value;
  }
  return label;
}

std::vector<std::string> run_labels(const std::vector<RunAttributes>& runs) {
  const auto shown = distinguishing_attributes(runs);
  std::vector<std::string> labels;
  for (const auto& run : runs) labels.push_back(run_label(run, shown));
  return labels;
}

std::string why_not_comparable(const RunAttributes& run, const RunAttributes& baseline) {
  if (!run.known || !baseline.known) return "no run description";
  if (run.model != baseline.model) return "other model than torch_ddp's";
  if (run.global_batch != baseline.global_batch) return "other global batch than torch_ddp's";
  return "";
}

}  // namespace shardscope::analysis
