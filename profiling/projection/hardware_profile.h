#pragma once

#include <optional>
#include <string>
#include <vector>

#include "profiling/projection/gpu_compute_model.h"

namespace shardscope::profiling {

// NCCL's three protocols: low latency (8-byte flag per 8 bytes, half the bandwidth), LL128 (a
// flag per 128 bytes) and Simple (full bandwidth, highest latency).
enum class Protocol { kLL, kLL128, kSimple };
constexpr int kProtocolCount = 3;
const char* protocol_name(Protocol protocol);

// One kind of link a GPU talks over: NVLink / NVSwitch or PCIe inside a node, the network
// between nodes.
struct Link {
  std::string kind;                                  // nvswitch, nvlink, pcie, infiniband, ...
  double bandwidth_gbps = 0;                         // per GPU, each way, GB/s (10^9 bytes)
  double efficiency = 1;                             // fraction a ring reaches of it at large sizes
  double hw_latency_us[kProtocolCount] = {0, 0, 0};  // per ring step
};

// A machine to project onto: how many GPUs, how fast they compute, how they are connected.
// Loaded from assets/hardware/NAME.json.
struct HardwareProfile {
  std::string name;
  std::string description;
  // The file it was read from when given by path, not by name (empty otherwise).
  std::string file;
  // How a message names it: "8xH100", or "8xH100 (from FILE)" for a copy given by path, whose
  // name field says what it was copied from rather than which file is at fault.
  std::string label() const { return file.empty() ? name : name + " (from " + file + ")"; }
  int gpus_per_node = 8;
  int nodes = 1;
  double gpu_memory_gib = 80;
  double peak_bf16_tflops = 0;  // 0 with compute_as_measured
  // One GPU's rate on the benchmark a run measures its own device with (a 4096 x 4096 bf16
  // matmul), measured on such a GPU; 0: not measured, and half the peak stands in for it.
  double matmul_tflops = 0;
  // Each rank computes exactly as fast as the device that measured the trace ("compute": "as
  // measured"): compute scale 1, no calibration; only the links are this profile's.
  bool compute_as_measured = false;
  double launch_us = 0;  // per collective: kernel launch and completion, outside NCCL's model
  // A machine whose collectives are not NCCL's (this machine's Gloo): one protocol at full
  // bandwidth with a measured base latency instead of NCCL's three.
  bool nccl_protocols = true;
  double base_latency_us = 0;  // with nccl_protocols false
  Link intra;                  // inside a node
  Link inter;                  // between nodes (unused with one node)
  bool has_inter = false;      // an "inter" link is given: `--nodes N` may add nodes
  GpuCompute gpu;              // per-kernel rates ("gpu"); unknown in profiles without one
  // How CUDA names this profile's GPU, in part ("H100 80GB HBM3"): a foreign GPU trace that
  // names its device is priced as measured on this profile's GPU.
  std::vector<std::string> device_names;

  int gpus() const { return gpus_per_node * nodes; }
};

// The directory profiles are read from: $SHARDSCOPE_ASSETS/hardware, else the source tree's.
std::string hardware_profile_directory();
std::vector<std::string> hardware_profile_names();
// The shipped profile whose device_names name `device` (as CUDA names a GPU), if any.
std::optional<HardwareProfile> profile_of_device(const std::string& device);
// `name_or_path`: a profile name (8xH100) or a path to a .json file. Throws std::runtime_error
// naming the file and the field for a missing or malformed profile.
HardwareProfile load_hardware_profile(const std::string& name_or_path);
HardwareProfile parse_hardware_profile(const std::string& json_text, const std::string& origin);

}  // namespace shardscope::profiling

namespace shardscope::profiling {

// What `shardscope calibrate` measures on this machine: all_reduce times of a tiny and a large
// buffer at two world sizes, a matmul rate, and the memory.
struct CalibrationPoints {
  int small_world = 2, large_world = 4;
  double small_bytes = 8, large_bytes = 0;
  double t_small_at_small_world_s = 0, t_small_at_large_world_s = 0;
  double t_large_at_small_world_s = 0;
  double matmul_tflops = 0;
  double memory_gib = 0;
};

// A profile whose model reproduces the calibration: per-step latency from how the tiny
// all_reduce grows with the world (2(n-1) steps), the base latency from the rest, bandwidth from
// the large one. One protocol (Simple), no launch overhead.
HardwareProfile fit_profile(const CalibrationPoints& points, const std::string& name,
                            const std::string& description);
std::string profile_json(const HardwareProfile& profile);

}  // namespace shardscope::profiling
