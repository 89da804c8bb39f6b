#include "strategies/bucket_plan.h"

namespace shardscope {

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
