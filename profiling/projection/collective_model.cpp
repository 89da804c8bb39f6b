#include "profiling/projection/collective_model.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <stdexcept>

#include "profiling/metrics/trace_metrics.h"

namespace shardscope::profiling {
namespace {

// NCCL's base latencies per protocol, microseconds (tuning.cc: LL, LL128, Simple).
constexpr double kBaseLatencyUs[kProtocolCount] = {6.6, 14.0, 8.4};
// Share of the link's bandwidth each protocol carries as payload.
constexpr double kProtocolEfficiency[kProtocolCount] = {0.5, 120.0 / 128.0, 1.0};

struct Shape {
  double steps;        // latency-bound steps
  double wire_factor;  // bytes through each GPU's link, as a multiple of S
};

Shape ring_shape(const std::string& op, int n) {
  if (n <= 1) return {0, 0};
  if (op == "all_reduce") return {2.0 * (n - 1), 2.0 * (n - 1) / n};
  if (op.rfind("all_gather", 0) == 0 || op.rfind("reduce_scatter", 0) == 0)
    return {double(n - 1), double(n - 1) / n};
  if (op == "broadcast" || op == "reduce") return {double(n - 1), 1.0};
  if (op == "all_to_all") return {double(n - 1), double(n - 1) / n};
  if (op == "send" || op == "recv") return {1.0, 1.0};
  throw std::invalid_argument("no cost model for collective '" + op + "'");
}

// The fastest protocol for one phase over `link` (only Simple, at the measured base latency,
// on a machine whose collectives are not NCCL's).
void best_over_protocols(double steps, double wire_bytes, const Link& link,
                         const HardwareProfile& hw, double* time_s, Protocol* protocol) {
  *time_s = std::numeric_limits<double>::infinity();
  for (int p = hw.nccl_protocols ? 0 : 2; p < kProtocolCount; ++p) {
    const double share = hw.nccl_protocols ? kProtocolEfficiency[p] : 1.0;
    const double base = hw.nccl_protocols ? kBaseLatencyUs[p] : hw.base_latency_us;
    const double bandwidth = link.bandwidth_gbps * 1e9 * link.efficiency * share;
    const double t = (base + steps * link.hw_latency_us[p]) * 1e-6 +
                     (wire_bytes > 0 ? wire_bytes / bandwidth : 0.0);
    if (t < *time_s) {
      *time_s = t;
      *protocol = static_cast<Protocol>(p);
    }
  }
}

double phase_time(const std::string& op, double bytes, int n, const Link& link,
                  const HardwareProfile& hw, Protocol* protocol, bool tree) {
  if (n <= 1) return 0;
  double t = 0;
  if (tree) {
    // Inside a node NCCL's tree is a chain: n-1 hops up and n-1 down, each GPU sending and
    // receiving the whole buffer.
    best_over_protocols(2.0 * (n - 1), 2.0 * bytes, link, hw, &t, protocol);
  } else {
    const Shape shape = ring_shape(op, n);
    best_over_protocols(shape.steps, shape.wire_factor * bytes, link, hw, &t, protocol);
  }
  return t;
}

}  // namespace

CollectiveEstimate estimate_collective(const std::string& op, int64_t bytes, int ranks,
                                       const HardwareProfile& hw, const std::string& algorithm) {
  if (algorithm != "auto" && algorithm != "ring" && algorithm != "tree")
    throw std::invalid_argument("unknown algorithm '" + algorithm + "' (ring, tree, auto)");
  if (ranks < 1 || ranks > hw.gpus())
    throw std::invalid_argument(std::to_string(ranks) + " ranks on " + hw.label() + ", which has " +
                                std::to_string(hw.gpus()) + " GPUs");
  if (bytes < 0) throw std::invalid_argument("negative size");
  if (algorithm == "tree" && op != "all_reduce")
    throw std::invalid_argument("the tree algorithm is for all_reduce only");
  ring_shape(op, 2);  // rejects unknown ops

  CollectiveEstimate e;
  e.op = op;
  e.bytes = bytes;
  e.ranks = ranks;
  const double S = double(bytes);
  const int per_node = std::min(ranks, hw.gpus_per_node);
  const int nodes = (ranks + per_node - 1) / per_node;
  if (nodes == 1) {
    Protocol ring_protocol = Protocol::kSimple, tree_protocol = Protocol::kSimple;
    const double ring = phase_time(op, S, ranks, hw.intra, hw, &ring_protocol, false);
    double tree = std::numeric_limits<double>::infinity();
    if (op == "all_reduce" && algorithm != "ring")
      tree = phase_time(op, S, ranks, hw.intra, hw, &tree_protocol, true);
    const bool use_tree = algorithm == "tree" || (algorithm == "auto" && tree < ring);
    e.algorithm = use_tree ? "tree" : "ring";
    e.protocol = use_tree ? tree_protocol : ring_protocol;
    e.time_s = (use_tree ? tree : ring) + (ranks > 1 ? hw.launch_us * 1e-6 : 0.0);
  } else {
    // Inside the nodes, between them on each GPU's rail with 1/per_node of the data, inside again.
    Protocol protocol = Protocol::kSimple, inter_protocol = Protocol::kSimple;
    double t = 0;
    if (op == "all_reduce") {
      t += 2 * phase_time("reduce_scatter", S, per_node, hw.intra, hw, &protocol, false);
      t += phase_time("all_reduce", S / per_node, nodes, hw.inter, hw, &inter_protocol, false);
    } else if (op.rfind("all_gather", 0) == 0 || op.rfind("reduce_scatter", 0) == 0) {
      t += phase_time(op, S, per_node, hw.intra, hw, &protocol, false);
      t += phase_time(op, S / per_node, nodes, hw.inter, hw, &inter_protocol, false);
    } else {
      t += phase_time(op, S, per_node, hw.intra, hw, &protocol, false);
      t += phase_time(op, S, nodes, hw.inter, hw, &inter_protocol, false);
    }
    e.algorithm = "hierarchical";
    e.protocol = inter_protocol;
    e.time_s = t + hw.launch_us * 1e-6;
  }
  e.algbw_gbps = e.time_s > 0 ? S / e.time_s / 1e9 : 0;
  e.busbw_gbps = e.algbw_gbps * busbw_factor(op, ranks);
  return e;
}

int64_t parse_bytes(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() &&
         (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.'))
    ++digits;
  if (digits == 0) throw std::invalid_argument("expected a size like 1GiB, got '" + text + "'");
  double number = 0;
  try {
    number = std::stod(text.substr(0, digits));
  } catch (const std::exception&) {
    throw std::invalid_argument("expected a size like 1GiB, got '" + text + "'");
  }
  const std::string unit = text.substr(digits);
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  if (unit == "KB" || unit == "kB") scale = 1e3;
  if (unit == "MB") scale = 1e6;
  if (unit == "GB") scale = 1e9;
  if (unit == "KiB" || unit == "K") scale = 1024.0;
  if (unit == "MiB" || unit == "M") scale = 1024.0 * 1024;
  if (unit == "GiB" || unit == "G") scale = 1024.0 * 1024 * 1024;
  if (scale == 0)
    throw std::invalid_argument("unknown size unit '" + unit + "' (B, KB, MB, GB, KiB, MiB, GiB)");
  // A size beyond a petabyte is a typo, and past 2^63 it would wrap negative.
  if (!(number * scale <= 1e15))
    throw std::invalid_argument("size '" + text + "' is too large (at most 1 PB)");
  return static_cast<int64_t>(std::llround(number * scale));
}

}  // namespace shardscope::profiling
