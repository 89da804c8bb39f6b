#include "app/cli/run_summary_text.h"

#include <csignal>
#include <cstdio>
#include <iomanip>
#include <ostream>

#include "app/cli/exit_code.h"
#include "engine/launch/backward_thread.h"

namespace shardscope::cli {
namespace {

// fp32 strategies agree with the fp32 reference to rounding (seen: below 1e-6). bf16 keeps 8
// mantissa bits (relative step 2^-8 = 3.9e-3); after 20 AdamW steps the weights were seen
// 3e-3 apart and losses 2e-4.
constexpr double kDefaultTolerance = 1e-5;
constexpr double kBf16Tolerance = 2e-2;

}  // namespace

std::string format_number(const char* fmt, double value) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, value);
  return buf;
}

std::string signal_name(int signal_number) {
  if (signal_number == SIGINT) return "SIGINT (Ctrl-C)";
  if (signal_number == SIGTERM) return "SIGTERM";
  return "signal " + std::to_string(signal_number);
}

void print_run_header(const Config& c, std::ostream& out) {
  out << "shardscope run: " << c.strategy << ", world " << c.world << " (" << c.mode << ", "
      << c.device << ", " << c.backend << "), preset " << c.preset << "\n"
      << "  model: d_model " << c.model.d_model << ", " << c.model.heads << " heads, "
      << c.model.layers << " layers, seq " << c.model.seq << ", vocab " << c.model.vocab << " ("
      << format_number("%.3g", parameter_count(c.model) / 1e6) << " M parameters)\n"
      << "  batch: " << c.micro_batch << " seq/rank x " << c.world << " ranks x " << c.grad_accum
      << " accumulation = " << c.global_batch_size() << " sequences per step; optimizer "
      << c.optimizer.name << " lr " << c.optimizer.lr << "\n";
  if (backward_thread_emulated())
    out << "  backward: on a second thread, as autograd runs it on a GPU "
           "(SHARDSCOPE_BACKWARD_THREAD=1)\n";
}

void print_step_heading(std::ostream& out) {
  out << "\nstep  loss      step time\n";
}

void print_step(const StepRecord& r, std::ostream& out) {
  out << std::setw(4) << r.step << "  " << format_number("%-8.5f", r.loss) << "  "
      << format_number("%.3f s", r.step_time_s) << "\n";
}

void print_run_results(const RunSummary& s, std::ostream& out, const char* no_reference) {
  out << "\nrank  checksum          weight sum        MB: params  grads  optim  comm  host  "
         "sent/step  peak alloc\n";
  auto mb = [](int64_t bytes) { return format_number("%6.2f", bytes / 1e6); };
  for (const auto& r : s.ranks) {
    const MemoryBytes& m = r.memory;
    out << std::setw(4) << r.rank << "  " << r.checksum << "  "
        << format_number("%-16.9g", r.weight_sum) << "  " << mb(m.parameters) << " "
        << mb(m.gradients) << " " << mb(m.optimizer_state) << " " << mb(m.comm_buffers) << " "
        << mb(m.host) << "  " << mb(r.comm_bytes_per_step) << "   " << mb(r.peak_allocated_bytes)
        << "\n";
  }
  // On a GPU with a process per rank, the device's own allocator is a second witness of each
  // rank's peak (our hook counts the same blocks, so the two should agree).
  std::string witness;
  for (const auto& r : s.ranks) {
    if (r.device_allocator_peak_bytes <= 0) continue;
    witness += (witness.empty() ? "" : ", ") + ("rank " + std::to_string(r.rank) + " ") +
               format_number("%.2f MB", r.device_allocator_peak_bytes / 1e6);
  }
  if (!witness.empty())
    out << "device allocator peak (torch.cuda.max_memory_allocated): " << witness << "\n";
  if (s.replicated) {
    out << "ranks agree: " << (s.ranks_agree ? "yes" : "NO") << " (max |delta| across ranks "
        << format_number("%.3g", s.max_rank_delta) << ")\n";
  } else {
    out << "ranks agree: n/a (sharded strategy; weights gathered for the check)\n";
  }
  if (s.reference) {
    const auto& d = s.reference->deviation;
    out << "reference (single device, same global batches): relative deviation "
        << format_number("%.3g", d.rel) << ", max |delta| " << format_number("%.3g", d.max_abs)
        << "; largest in " << d.worst << " (" << format_number("%.3g", d.worst_rel) << ")\n";
  } else {
    out << "reference: " << no_reference << "\n";
  }
}

double default_tolerance(const Config& config) {
  const bool bf16 =
      config.strategy_options.precision == "bf16" || config.strategy_options.reduce_dtype == "bf16";
  return bf16 ? kBf16Tolerance : kDefaultTolerance;
}

int check_run_results(const RunSummary& summary, double tolerance, std::ostream& err) {
  if (summary.replicated && !summary.ranks_agree) {
    err << "error: ranks disagree on the weights\n";
    return kExitMismatch;
  }
  if (summary.reference && !summary.reference->within(tolerance)) {
    err << "error: weights deviate from the single-device reference by "
        << format_number("%.3g", summary.reference->deviation.rel) << " (tolerance "
        << format_number("%.3g", tolerance) << ")\n";
    return kExitMismatch;
  }
  return kExitOk;
}

int conclude_run(const RunSummary& summary, const Conclusion& how, std::ostream& out,
                 std::ostream& err) {
  if (!summary.ok) {
    err << "run failed: " << summary.failure << "\n";
    if (!summary.checkpoint.empty() && !how.resume_command.empty()) {
      err << "the newest valid checkpoint is " << summary.checkpoint << "; continue with:\n  "
          << how.resume_command << "\n";
    }
    return kExitRunFailed;
  }
  if (summary.stopped_by_signal != 0) {
    const int done = summary.steps.empty() ? summary.resumed_step : summary.steps.back().step + 1;
    if (done >= how.steps) {
      out << "\nstopped by " << signal_name(summary.stopped_by_signal) << " after training all "
          << how.steps << " steps, while the single-device reference was training: the weights "
          << "were not compared with it\n";
    } else {
      out << "\nstopped by " << signal_name(summary.stopped_by_signal) << " after " << done
          << " of " << how.steps << " steps (every rank finished the same step)\n";
    }
    if (!how.resume_command.empty()) {
      if (!summary.checkpoint.empty()) {
        out << "checkpoint written to " << summary.checkpoint << "; continue with:\n  "
            << how.resume_command << "\n";
      } else if (summary.config.checkpoint_dir.empty()) {
        out << "no checkpoint was written (no --checkpoint-dir): a new run starts from step 0\n";
      } else {
        out << "no checkpoint was written to " << summary.config.checkpoint_dir
            << " before the stop: a new run starts from step 0\n";
      }
    }
    return kExitStoppedBySignal + summary.stopped_by_signal;
  }
  print_run_results(summary, out, how.no_reference);
  return check_run_results(summary, how.tolerance, err);
}

}  // namespace shardscope::cli
