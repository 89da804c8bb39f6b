#include "app/project_command.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/atomic_file.h"
#include "profiling/collective_model.h"
#include "profiling/memory_projection.h"
#include "profiling/trace_io.h"
#include "profiling/trace_metrics.h"
#include "profiling/trace_replay.h"

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
                       std::ostream& out) {
  const int ranks = o.ranks > 0 ? o.ranks : hw.gpus();
  std::vector<int64_t> sizes;
  if (!o.bytes.empty()) {
    sizes.push_back(profiling::parse_bytes(o.bytes));
  } else {
    for (int64_t s = 4; s <= (int64_t{1} << 30); s *= 4) sizes.push_back(s);
  }
  out << o.collective << " on " << hw.name << " (" << hw.description << "), " << ranks
      << " ranks, algorithm " << o.algorithm << "\n"
      << pad("size", 12) << pad("time us", 12) << pad("algbw GB/s", 12) << pad("busbw GB/s", 12)
      << pad("algorithm", 14) << "protocol\n";
  for (int64_t size : sizes) {
    const auto e = profiling::estimate_collective(o.collective, size, ranks, hw, o.algorithm);
    out << pad(human_bytes(double(size)), 12) << pad(fmt("%.1f", e.time_s * 1e6), 12)
        << pad(fmt("%.2f", e.algbw_gbps), 12) << pad(fmt("%.2f", e.busbw_gbps), 12)
        << pad(e.algorithm, 14) << profiling::protocol_name(e.protocol) << "\n";
  }
  return 0;
}

int project_memory(const ProjectOptions& o, const Config& config,
                   const profiling::HardwareProfile& hw, std::ostream& out) {
  const ModelConfig& m = config.model;
  profiling::ModelShape shape{m.vocab, m.d_model,   m.heads,         m.layers,
                              m.seq,   m.mlp_ratio, m.tie_embeddings};
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
    for (const char* zero : {"ddp", "zero1", "zero2", "zero3"}) {
      if (deg.dp == 1 && std::string(zero) != "ddp") continue;  // nothing to shard over
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
  return 0;
}

// A dense transformer reaches about half of a GPU's peak in practice (MFU ~ 0.5).
constexpr double kAchievableFraction = 0.5;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

struct StepSummary {
  double step_s = 0, exposed_s = 0, overlap = 0, compute_s = 0;
};

// Medians over steps (the first left out when there are more) of the slowest rank's step, and
// the mean over ranks of exposed communication, overlap and compute.
StepSummary summarise(const profiling::Trace& trace) {
  std::map<int, std::vector<profiling::StepMetrics>> by_step;
  for (const auto& m : profiling::step_metrics(trace)) by_step[m.step].push_back(m);
  if (by_step.size() > 1) by_step.erase(by_step.begin());
  std::vector<double> step, exposed, overlap, compute;
  for (const auto& [s, ranks] : by_step) {
    double slowest = 0, e = 0, o = 0, c = 0;
    for (const auto& m : ranks) {
      slowest = std::max(slowest, m.span_ns * 1e-9);
      e += m.exposed_comm_ns * 1e-9 / ranks.size();
      o += m.overlap_fraction() / ranks.size();
      c += m.compute_ns * 1e-9;
    }
    step.push_back(slowest);
    exposed.push_back(e);
    overlap.push_back(o);
    compute.push_back(c);
  }
  return {median(step), median(exposed), median(overlap), median(compute)};
}

int project_trace(const ProjectOptions& o, const profiling::HardwareProfile& hw,
                  std::ostream& out) {
  const profiling::Trace measured = profiling::read_trace_file(o.trace);
  double scale = o.compute_scale;
  std::string scale_source = "given";
  if (scale <= 0) {
    if (hw.name == "this-machine") {
      scale = 1;
      scale_source = "the trace's own machine";
    } else {
      profiling::HardwareProfile here;
      try {
        here = profiling::load_hardware_profile("this-machine");
      } catch (const std::exception&) {
        throw std::runtime_error(
            "the measuring machine's speed is unknown: run `shardscope calibrate` once, or give "
            "--compute-scale (projected / measured compute time)");
      }
      scale = here.peak_bf16_tflops / (hw.peak_bf16_tflops * kAchievableFraction);
      scale_source = "this machine's calibrated matmul rate against half the target's peak";
    }
  }
  profiling::ReplayOptions options;
  options.compute_scale = scale;
  const profiling::Trace projected = profiling::replay_trace(measured, hw, options);
  const StepSummary m = summarise(measured), p = summarise(projected);
  const size_t n = measured.ranks.size();
  out << "projection of " << o.trace << " (" << n << " ranks) onto " << hw.name << "\n"
      << "compute scale " << fmt("%.4g", scale) << " (" << scale_source << ")\n\n"
      << pad("", 26) << pad("measured", 14) << "projected\n"
      << pad("step time (slowest rank)", 26) << pad(fmt("%.2f ms", m.step_s * 1e3), 14)
      << fmt("%.2f ms", p.step_s * 1e3) << "\n"
      << pad("exposed communication", 26) << pad(fmt("%.2f ms", m.exposed_s * 1e3), 14)
      << fmt("%.2f ms", p.exposed_s * 1e3) << "\n"
      << pad("overlap", 26) << pad(fmt("%.0f %%", 100 * m.overlap), 14)
      << fmt("%.0f %%", 100 * p.overlap) << "\n";
  // Scaling efficiency: one GPU would do every rank's compute itself.
  if (p.step_s > 0) {
    out << pad("scaling efficiency", 26)
        << pad(fmt("%.0f %%", 100 * m.compute_s / (n * m.step_s)), 14)
        << fmt("%.0f %%", 100 * p.compute_s / (n * p.step_s)) << "\n";
  }
  auto run = nlohmann::json::parse(measured.run_json, nullptr, false);
  if (run.is_object() && run.contains("config") && p.step_s > 0) {
    try {
      const auto& c = run["config"];
      const auto& model = c.at("model");
      profiling::ModelShape shape{
          model.at("vocab"), model.at("d_model"),   model.at("heads"),         model.at("layers"),
          model.at("seq"),   model.at("mlp_ratio"), model.at("tie_embeddings")};
      const double tokens = double(c.at("micro_batch").get<int>()) * c.at("world").get<int>() *
                            c.at("grad_accum").get<int>() * shape.seq;
      const double flops = 6.0 * profiling::model_parameters(shape) * tokens;
      out << pad("MFU on " + hw.name, 26) << pad("", 14)
          << fmt("%.1f %%", 100 * flops / (p.step_s * n * hw.peak_bf16_tflops * 1e12)) << "\n";
    } catch (const std::exception&) {
      // A trace without our run description: no model, no MFU.
    }
  }
  if (!o.out.empty()) {
    write_file_atomically(o.out, profiling::serialise_trace(projected, o.out));
    out << "projected trace written to " << o.out << "\n";
  }
  return 0;
}

}  // namespace

int project_command(const ProjectOptions& o, const Config& config, std::ostream& out,
                    std::ostream& err) {
  try {
    const auto hw = profiling::load_hardware_profile(o.hardware);
    if (!o.trace.empty()) return project_trace(o, hw, out);
    if (!o.collective.empty()) return project_collective(o, hw, out);
    if (o.memory) return project_memory(o, config, hw, out);
    err << "error: project: give a TRACE, --collective OP or --memory\n";
    return 2;
  } catch (const std::exception& e) {
    err << "error: project: " << e.what() << "\n";
    return 2;
  }
}

}  // namespace shardscope::cli
