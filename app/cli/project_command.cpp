#include "app/cli/project_command.h"
#include "app/cli/cli_flags.h"
#include "app/cli/run_outputs.h"

#include "app/analysis/configuration_projection.h"
#include "app/analysis/layout_search.h"
#include "app/analysis/node_placement.h"
#include "app/analysis/trace_figures.h"
#include "app/analysis/trace_open.h"
#include "app/analysis/trace_output.h"
#include "app/analysis/trace_projection.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/state/atomic_file.h"
#include "engine/train/config_bounds.h"
#include "profiling/io/trace_io.h"
#include "profiling/metrics/figure_text.h"
#include "profiling/metrics/trace_metrics.h"
#include "profiling/projection/collective_model.h"
#include "profiling/projection/memory_projection.h"
#include "profiling/projection/trace_replay.h"

namespace shardscope::cli {
namespace {

std::string fmt(const char* format, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), format, value);
  return buf;
}

std::string human_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while (bytes >= 1024 && u < 3) {
    bytes /= 1024;
    ++u;
  }
  return fmt(u == 0 ? "%.0f" : "%.4g", bytes) + " " + units[u];
}

std::string pad(const std::string& s, size_t width) {
  return s.size() >= width ? s + " " : s + std::string(width - s.size(), ' ');
}

int project_collective(const ProjectOptions& o, const profiling::HardwareProfile& hw,
                       std::ostream& printed) {
  std::ostringstream out;  // printed whole once every row is priced: an error prints no table
  if (o.ranks_given && o.ranks < 2)
    throw std::invalid_argument("--ranks must be at least 2, got " + std::to_string(o.ranks));
  const int ranks = o.ranks_given ? o.ranks : hw.gpus();
  // The model's own words, prefixed with the flag the user typed.
  const auto flagged = [](const char* flag, auto&& f) {
    try {
      return f();
    } catch (const std::invalid_argument& e) {
      throw std::invalid_argument(std::string(flag) + ": " + e.what());
    }
  };
  std::vector<int64_t> sizes;
  if (!o.bytes.empty()) {
    sizes.push_back(flagged("--bytes", [&] { return profiling::parse_bytes(o.bytes); }));
  } else {
    for (int64_t s = 4; s <= (int64_t{1} << 30); s *= 4) sizes.push_back(s);
  }
  out << o.collective << " on " << hw.name << " (" << hw.description << "), " << ranks
      << " ranks, algorithm " << o.algorithm << "\n"
      << pad("size", 12) << pad("time us", 12) << pad("algbw", 12) << pad("busbw", 12)
      << pad("algorithm", 14) << "protocol\n";
  // What the model refuses, named by the flag at fault: the algorithm, checked first, then the
  // collective, then the ranks.
  try {
    profiling::estimate_collective(o.collective, sizes.front(), ranks, hw, o.algorithm);
  } catch (const std::invalid_argument& e) {
    const std::string why = e.what();
    const char* flag = why.find("algorithm") != std::string::npos ? "--algorithm"
                       : why.rfind("no cost model", 0) == 0       ? "--collective"
                                                                  : "--ranks";
    throw std::invalid_argument(std::string(flag) + ": " + why);
  }
  for (int64_t size : sizes) {
    const auto e = profiling::estimate_collective(o.collective, size, ranks, hw, o.algorithm);
    out << pad(human_bytes(double(size)), 12) << pad(fmt("%.1f", e.time_s * 1e6), 12)
        << pad(profiling::format_gbps(e.algbw_gbps), 12)
        << pad(profiling::format_gbps(e.busbw_gbps), 12) << pad(e.algorithm, 14)
        << profiling::protocol_name(e.protocol) << "\n";
  }
  printed << out.str();
  return 0;
}

int project_memory(const ProjectOptions& o, const Config& config,
                   const profiling::HardwareProfile& hw, std::ostream& printed) {
  // The model as a run would have it (heads that divide its width, at most 1024 layers, ...).
  validate_structure(config);
  if (o.micro_batch < 1) throw ConfigError("micro_batch", "must be at least 1");
  if (o.micro_batches < 0)
    throw ConfigError("strategy_options.micro_batches", "must not be negative");
  std::ostringstream out;  // printed whole once every row is projected
  const ModelConfig& m = config.model;
  const profiling::ModelShape shape = model_shape(m);
  const int n = hw.gpus();
  out << "memory per GPU for " << config.preset << " ("
      << fmt("%.3g", profiling::model_parameters(shape) / 1e9) << " B parameters, seq " << m.seq
      << ", micro-batch " << o.micro_batch << ", "
      << (o.fp32 ? "fp32 Adam" : "bf16 mixed precision with Adam") << ") on " << hw.name << ": "
      << n << " GPUs of " << fmt("%.0f", hw.gpu_memory_gib) << " GiB\n"
      << pad("layout", 22) << pad("sharding", 10) << pad("params GiB", 12) << pad("grads", 9)
      << pad("optim", 9) << pad("activ.", 9) << pad("total", 9) << "fits\n";
  struct Degrees {
    int dp, tp, pp;
  };
  std::vector<Degrees> layouts;
  for (int tp = 1; tp <= n; tp *= 2) {
    for (int pp = 1; tp * pp <= n; pp *= 2) {
      if (n % (tp * pp) == 0 && pp <= m.layers && m.heads % tp == 0)
        layouts.push_back({n / (tp * pp), tp, pp});
    }
  }
  const double gib = 1024.0 * 1024 * 1024;
  for (const auto& deg : layouts) {
    for (const char* zero : profiling::kZeroStages) {
      if (deg.dp == 1 && zero != profiling::kZeroStages[0]) continue;  // nothing to shard over
      profiling::TrainingLayout layout;
      layout.zero = zero;
      layout.dp = deg.dp;
      layout.tp = deg.tp;
      layout.pp = deg.pp;
      layout.micro_batch = o.micro_batch;
      layout.micro_batches = o.micro_batches > 0 ? o.micro_batches : deg.pp;
      layout.mixed_precision = !o.fp32;
      layout.sequence_parallel = config.strategy_options.sequence_parallel;
      layout.activation_checkpointing = config.strategy_options.activation_checkpointing;
      const auto p = profiling::project_memory(shape, layout);
      std::string name = "dp" + std::to_string(deg.dp);
      if (deg.tp > 1) name += " x tp" + std::to_string(deg.tp);
      if (deg.pp > 1) name += " x pp" + std::to_string(deg.pp);
      out << pad(name, 22) << pad(zero, 10) << pad(fmt("%.2f", p.parameters / gib), 12)
          << pad(fmt("%.2f", p.gradients / gib), 9) << pad(fmt("%.2f", p.optimizer_state / gib), 9)
          << pad(fmt("%.2f", p.activations / gib), 9) << pad(fmt("%.2f", p.total() / gib), 9)
          << (p.total() <= hw.gpu_memory_gib * gib ? "yes" : "NO (out of memory)") << "\n";
    }
  }
  printed << out.str();
  return 0;
}

// What project reads, so that --out never writes over it: the traces and a --hardware profile
// given as a file.
std::vector<InputFile> project_inputs(const ProjectOptions& o) {
  std::vector<InputFile> inputs = trace_inputs(o.traces);
  add_hardware_input(o.hardware, inputs);
  return inputs;
}

int project_trace(const ProjectOptions& o, const std::string& precision,
                  const profiling::HardwareProfile& hw, std::ostream& out) {
  // What a trace is not projected with: each names something else to project.
  const std::pair<bool, const char*> other_projections[] = {
      {!o.collective.empty(), "--collective"},
      {!o.bytes.empty(), "--bytes"},
      {o.ranks_given, "--ranks"},
      {o.memory, "--memory"},
      {o.fp32, "--fp32 (--memory's; a trace's kernels take --precision fp32)"},
      {o.search, "--search"},
      {o.nodes != 0, "--nodes"}};
  for (const auto& [given, flag] : other_projections) {
    if (given)
      throw std::invalid_argument(std::string(flag) +
                                  " does not apply to a trace, which is replayed onto the "
                                  "profile's GPUs one rank a GPU");
  }
  // A trace is projected as it ran: of the run flags, only the precision its compute is priced
  // in applies (bf16 unless told fp32, whatever the run recorded).
  bool precision_given = false;
  for (const auto& key : o.run_keys) {
    if (key == "strategy_options.precision") {
      precision_given = true;
      continue;
    }
    throw ConfigError(key,
                      "applies to a configuration projected without a trace; a trace is "
                      "projected as it ran, and of the run flags only --precision applies to it");
  }
  if (precision_given && o.compute_scale > 0)
    throw std::invalid_argument(
        "--precision prices the compute kernel by kernel, which --compute-scale replaces: give "
        "one of them");
  // Before any work: a projection that ends in a refused write was wasted.
  std::vector<OutputClaim> claims;  // held until the projection is written
  if (!o.out.empty()) claims = check_output_file("--out", o.out, project_inputs(o));
  const profiling::Trace measured = analysis::open_trace_paths(o.traces);
  std::string named;  // the paths as given, for the reader
  for (const auto& path : o.traces) named += (named.empty() ? "" : " ") + path;
  // What the replay finds wrong in a trace the reader took (a negative size, a schedule that
  // cannot have run, a collective some rank never issued) is named with the trace.
  const analysis::TraceProjection t = [&] {
    try {
      return analysis::project_recorded_trace(measured, hw, o.compute_scale, precision);
    } catch (const ConfigError&) {
      throw;  // a flag's, named by it
    } catch (const std::exception& e) {
      throw std::runtime_error(named + ": " + e.what());
    }
  }();
  if (precision_given) analysis::require_priced_precision(t, hw);
  if (o.json) {
    // Both traces' figures (trace_figures.h), machine-readable: what was measured and what the
    // hardware would do.
    const nlohmann::json j = {{"trace", named},
                              {"hardware", hw.name},
                              {"compute_scale", t.compute_scale},
                              {"compute_scale_source", t.scale_source},
                              {"compute_model", t.compute_model},
                              {"precision", t.precision},
                              {"recorded_precision", t.recorded_precision},
                              {"launch_bound", t.launch_bound},
                              {"measured", analysis::figures_json(measured)},
                              {"projected", analysis::figures_json(t.projected)}};
    out << j.dump(2) << "\n";
    if (!o.out.empty())
      write_file_atomically(o.out, profiling::serialise_trace(t.projected, o.out));
    return 0;
  }
  const analysis::StepSummary &m = t.measured_summary, &p = t.projected_summary;
  out << "projection of " << named << " (" << measured.ranks.size() << " ranks) onto " << hw.name
      << "\n"
      << (t.compute_model.empty()
              ? "compute scale " + fmt("%.4g", t.compute_scale) + " (" + t.scale_source + ")"
              : t.compute_model + "; the rest of the host's time x " +
                    fmt("%.4g", t.compute_scale) + " (" + t.scale_source + ")")
      << "\n\n"
      << pad("", 26) << pad("measured", 14) << "projected\n"
      << pad("step time (slowest rank)", 26) << pad(fmt("%.2f ms", m.step_s * 1e3), 14)
      << fmt("%.2f ms", p.step_s * 1e3) << "\n"
      << pad("exposed communication", 26) << pad(fmt("%.2f ms", m.exposed_s * 1e3), 14)
      << fmt("%.2f ms", p.exposed_s * 1e3) << "\n"
      << pad("overlap", 26) << pad(fmt("%.0f %%", 100 * m.overlap), 14)
      << fmt("%.0f %%", 100 * p.overlap) << "\n";
  if (p.step_s > 0) {
    out << pad("scaling efficiency", 26) << pad(fmt("%.0f %%", 100 * t.measured_efficiency), 14)
        << fmt("%.0f %%", 100 * t.projected_efficiency) << "\n";
  }
  if (t.mfu)
    out << pad("MFU on " + hw.name, 26) << pad("", 14) << profiling::format_percent(*t.mfu) << "\n";
  const profiling::Trace& projected = t.projected;
  if (!o.out.empty()) {
    write_file_atomically(o.out, profiling::serialise_trace(projected, o.out));
    out << "projected trace written to " << o.out << "\n";
  }
  return 0;
}

// A configuration that is never run, projected from what each of its kernels costs.
int project_configured(const ProjectOptions& o, const Config& config,
                       const profiling::HardwareProfile& hw, std::ostream& out) {
  if (o.nodes < 0) throw ConfigError("nodes", "must be at least 1");
  if (config.world < 1) throw ConfigError("world", "must be at least 1");
  if (config.global_batch < 0) throw ConfigError("global_batch", "must not be negative");
  if (config.micro_batch < 1) throw ConfigError("micro_batch", "must be at least 1");
  std::vector<OutputClaim> claims;  // held until the projection is written
  if (!o.out.empty()) claims = check_output_file("--out", o.out, project_inputs(o));
  if (o.search) {
    std::string refused;
    const auto layouts = analysis::search_layouts(config, hw, o.nodes, &refused);
    if (layouts.empty()) {
      throw std::invalid_argument(
          "no layout of this model and batch over these GPUs could be projected" +
          (refused.empty() ? std::string() : ": every one is refused, the first with " + refused));
    }
    out << analysis::search_text(layouts, 15);
    return 0;
  }
  const analysis::ConfigurationProjection p =
      analysis::project_configuration(config, hw, o.nodes, /*draw=*/!o.out.empty());
  if (!o.out.empty() && p.trace.ranks.empty())
    throw std::invalid_argument("--out " + o.out + ": nothing written, " + p.undrawn);
  if (o.json) {
    out << analysis::projection_json(p).dump(2) << "\n";
  } else {
    out << analysis::projection_text(p);
  }
  if (!o.out.empty()) {
    write_file_atomically(o.out, profiling::serialise_trace(p.trace, o.out));
    if (!o.json) out << "projected trace written to " << o.out << "\n";
  }
  return 0;
}

}  // namespace

int project_command(const ProjectOptions& o, const Config& config, std::ostream& out,
                    std::ostream& err) {
  try {
    // 0 is the default (from the profiles); anything else must be a usable ratio.
    if (!std::isfinite(o.compute_scale) || o.compute_scale < 0) {
      throw std::invalid_argument("--compute-scale must be a positive number, got " +
                                  fmt("%g", o.compute_scale));
    }
    // A millionfold either way compares no two devices that exist, and past it the projected
    // times round to 0.00 ms or overflow.
    if (o.compute_scale != 0 && (o.compute_scale < 1e-6 || o.compute_scale > 1e6)) {
      throw std::invalid_argument("--compute-scale must lie between 1e-06 and 1e+06, got " +
                                  fmt("%g", o.compute_scale));
    }
    const auto hw = profiling::load_hardware_profile(o.hardware);
    if (!o.traces.empty()) return project_trace(o, config.strategy_options.precision, hw, out);
    if (!o.collective.empty()) return project_collective(o, analysis::on_nodes(hw, o.nodes), out);
    if (o.memory) return project_memory(o, config, hw, out);
    if (!o.configured)
      throw std::invalid_argument(
          "nothing to project: give a trace, --collective, --memory, or the run flags of a "
          "configuration (for example --preset gpt2-small --strategy fsdp --world 8)");
    return project_configured(o, config, hw, out);
  } catch (const ConfigError& e) {
    // Named as the user gave it: the flag (--global-batch), not the config key.
    err << "error: project: " << RunFlags::describe_key(e.field()) << ": "
        << std::string(e.what()).substr(e.field().size() + 2) << "\n";
    return 2;
  } catch (const std::exception& e) {
    err << "error: project: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace shardscope::cli
