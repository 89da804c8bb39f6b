#include "strategies/data_parallel/bucket_plan.h"

#include <algorithm>

namespace shardscope {

int64_t bucket_cap_bytes(double bucket_mb, int64_t gradient_bytes) {
  if (bucket_mb > 0) return static_cast<int64_t>(bucket_mb * 1024 * 1024);
  constexpr int64_t kDdpDefault = int64_t{25} * 1024 * 1024;
  return std::max<int64_t>(1, std::min(kDdpDefault, gradient_bytes / 4));
}

int64_t gradient_bytes(const std::vector<torch::Tensor>& params) {
  int64_t bytes = 0;
  for (const auto& p : params) {
    if (p.requires_grad()) bytes += p.numel() * p.element_size();
  }
  return bytes;
}

std::vector<std::vector<size_t>> plan_buckets(const std::vector<torch::Tensor>& params,
                                              int64_t cap_bytes) {
  std::vector<std::vector<size_t>> buckets;
  std::vector<size_t> current;
  int64_t bytes = 0;
  for (size_t n = params.size(); n-- > 0;) {
    current.push_back(n);
    bytes += params[n].numel() * params[n].element_size();
    if (bytes >= cap_bytes) {
      buckets.push_back(std::move(current));
      current.clear();
      bytes = 0;
    }
  }
  if (!current.empty()) buckets.push_back(std::move(current));
  return buckets;
}

}  // namespace shardscope
