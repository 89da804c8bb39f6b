// The projection of a configuration as `project` prints it: JSON, or text for a reader.
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

#include "app/analysis/configuration_projection.h"

namespace shardscope::analysis {

nlohmann::json projection_json(const ConfigurationProjection& p) {
  return {{"hardware", p.hardware},
          {"precision", p.precision},
          {"gpus", p.gpus},
          {"nodes", p.nodes},
          {"layout",
           {{"tp", p.tp},
            {"pp", p.pp},
            {"dp", p.dp},
            {"cp", p.cp},
            {"ep", p.ep},
            {"stages_per_rank", p.stages_per_rank},
            {"micro_batches", p.micro_batches},
            {"micro_batch_sequences", p.micro_batch_sequences},
            {"accumulation_passes", p.accumulation_passes},
            {"schedule", p.schedule}}},
          {"step_s", p.step_s},
          {"mfu", p.mfu},
          {"peak_bytes", p.memory.total()},
          {"fits", p.fits},
          {"breakdown_s",
           {{"compute", p.compute_s},
            {"tensor_comm", p.tensor_comm_s},
            {"pipeline_wait", p.pipeline_wait_s},
            {"data_comm", p.data_comm_s},
            {"optimizer", p.optimizer_s}}},
          // Of data_comm: the compute running slower beside the collectives.
          {"data_comm_compute_slowed_s", p.data_comm_slowed_s},
          // Of compute: the bf16 weight copies made once a step.
          {"weight_casts_s", p.weight_casts_s},
          {"pipeline_transfer_s", p.pipeline_transfer_s},
          {"pipeline_send_bytes", p.pipeline_send_bytes},
          {"layer_forward_s", p.layer_forward_s},
          {"layer_backward_s", p.layer_backward_s},
          {"model_flops", p.model_flops},
          {"memory_bytes",
           {{"parameters", p.memory.parameters},
            {"gradients", p.memory.gradients},
            {"optimizer_state", p.memory.optimizer_state},
            {"activations", p.memory.activations}}}};
}

std::string projection_text(const ConfigurationProjection& p) {
  auto f = [](const char* format, double value) {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, value);
    return std::string(buf);
  };
  const double gib = 1024.0 * 1024 * 1024;
  std::ostringstream o;
  o << "projected step on " << p.gpus << (p.gpus == 1 ? " GPU of " : " GPUs of ") << p.hardware
    << " (" << p.nodes << (p.nodes == 1 ? " node" : " nodes") << "): tp " << p.tp << " x pp "
    << p.pp << " x dp " << p.dp;
  if (p.cp > 1) o << " x cp " << p.cp << " (ring attention, s/" << p.cp << " tokens a rank)";
  if (p.ep > 0) o << ", experts over ep " << p.ep << " by all_to_all";
  if (p.pp > 1) o << ", " << p.schedule << " with " << p.stages_per_rank << " stage(s) a rank";
  o << ", " << p.micro_batches << " micro-batches of " << p.micro_batch_sequences << " sequences";
  if (p.accumulation_passes > 1) o << ", " << p.accumulation_passes << " accumulation passes";
  o << (p.precision == "fp32" ? ", fp32 (no autocast)\n" : ", bf16 mixed precision\n");
  o << "  step              " << f("%.3f s", p.step_s) << "   MFU " << f("%.1f %%", 100 * p.mfu)
    << "\n";
  o << "  compute           " << f("%.3f s", p.compute_s);
  if (p.weight_casts_s > 0)
    o << "  (bf16 weight copies made once a step: " << f("%.1f ms", 1e3 * p.weight_casts_s) << ")";
  o << "\n";
  // Whatever the passes wait for between their kernels, named for the layout.
  std::string within = p.tp > 1 ? "the tensor group's collectives" : "";
  if (p.cp > 1) within += std::string(within.empty() ? "" : ", ") + "the ring's transfers";
  if (p.ep > 1) within += std::string(within.empty() ? "" : ", ") + "the experts' all_to_all";
  o << "  tensor comm       " << f("%.3f s", p.tensor_comm_s) << "  (blocking, between kernels"
    << (within.empty() ? "" : ": " + within) << ")\n";
  o << "  pipeline bubble   " << f("%.3f s", p.pipeline_wait_s) << "  (transfers "
    << f("%.2f ms", 1e3 * p.pipeline_transfer_s) << " a hop included)\n";
  o << "  data comm         " << f("%.3f s", p.data_comm_s) << "  (" << p.data_comm_what;
  if (p.data_comm_slowed_s > 0)
    o << "; of it " << f("%.2f ms", 1e3 * p.data_comm_slowed_s)
      << " the compute slower beside them";
  o << ")\n";
  o << "  optimizer         " << f("%.3f s", p.optimizer_s) << "\n";
  o << "  one block, one micro-batch: forward " << f("%.2f ms", 1e3 * p.layer_forward_s)
    << ", backward " << f("%.2f ms", 1e3 * p.layer_backward_s) << "\n";
  o << "  memory per GPU    " << f("%.2f GiB", p.memory.total() / gib) << " of "
    << f("%.0f GiB", p.memory_capacity_bytes / gib) << (p.fits ? "" : "  DOES NOT FIT") << ": "
    << "parameters " << f("%.2f", p.memory.parameters / gib) << ", gradients "
    << f("%.2f", p.memory.gradients / gib) << ", optimizer "
    << f("%.2f", p.memory.optimizer_state / gib) << ", activations "
    << f("%.2f", p.memory.activations / gib) << "\n";
  return o.str();
}

}  // namespace shardscope::analysis
