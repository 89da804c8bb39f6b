#pragma once

#include <string>
#include <vector>

#include "engine/model/gpt_model.h"

namespace shardscope {

// Copies to contiguous CPU fp32 tensors, detached, in the same order.
NamedTensors to_cpu_copy(const NamedTensors& weights);

// FNV-1a over names and raw bytes: equal strings mean bitwise-equal weights.
std::string weights_checksum(const NamedTensors& weights);
double weights_sum(const NamedTensors& weights);

// How far trained weights are from the reference. The headline is the relative deviation of the
// whole model, ||w - ref|| / ||ref|| over all weights: rounding differences of a different
// summation order land near 1e-7 in fp32. Per tensor figures show where it concentrates; a tensor
// whose gradient is mathematically zero (the attention key bias: softmax ignores a shift shared
// by all keys) is pushed around by rounding noise that Adam normalises, so it stands out there.
struct WeightDeviation {
  double max_abs = 0.0;    // largest elementwise |w - ref|
  double rel = 0.0;        // ||w - ref|| / ||ref|| over all weights
  std::string worst;       // tensor with the largest own ||w - ref|| / ||ref||
  double worst_rel = 0.0;  // and that value
};

// Compares `actual` with `expected` by name; throws if names or shapes differ.
WeightDeviation compare_weights(const NamedTensors& actual, const NamedTensors& expected);

// Parameters grouped as a person reads the model: "embeddings", "block N", "head" (final LN and
// the output projection).
std::string weight_group(const std::string& name);

// Largest elementwise |actual - expected| within each group, groups in model order; throws like
// compare_weights.
struct GroupDeviation {
  std::string group;
  double max_abs = 0.0;
};
std::vector<GroupDeviation> group_deviations(const NamedTensors& actual,
                                             const NamedTensors& expected);

// Writes name -> tensor in PyTorch's zip serialisation, readable by Python's torch.load.
void export_weights(const std::string& path, const NamedTensors& weights);

// Reads what export_weights wrote (or Python's torch.save of a dict name -> tensor) back, in the
// file's order; throws naming `path` when it is not such a file.
NamedTensors read_exported_weights(const std::string& path);
// Why `path` cannot be a whole weights archive, from its tail alone (a file cut short), or "".
std::string weights_file_problem(const std::string& path);

}  // namespace shardscope
