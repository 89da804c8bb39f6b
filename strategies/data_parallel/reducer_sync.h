#pragma once

#include <memory>
#include <string>
#include <vector>

#include <torch/types.h>

#include "engine/train/config.h"

namespace c10d {
class Reducer;
}

namespace shardscope {

class Comm;
class CommWork;

// The host span of the one rebuild, in the second step: the gap before that step's forward (rank
// 0's bucket order broadcast, new bucket buffers allocated) is DDP's own.
inline constexpr char kRebuildBucketsSpan[] =
    "DDP rebuilds its buckets in the order the first step's gradients arrived";

// PyTorch's DDP engine, c10d::Reducer, over any list of parameters and any group, driven the way
// torch.nn.parallel.DistributedDataParallel drives it from Python: gradients bucketed in reverse
// order and all-reduced (through our traced Comm) as buckets fill during backward, buckets
// rebuilt after the first iteration in the order gradients actually arrived. Backward passes
// that are not armed only accumulate into .grad, like DDP's no_sync().
class ReducerSync {
 public:
  ReducerSync(const std::vector<torch::Tensor>& params, const std::vector<std::string>& names,
              Comm& comm, const StrategyOptions& options, int64_t cap_bytes);
  ~ReducerSync();

  // Before each forward: rebuilds buckets once the real gradient order is known.
  void before_forward();
  // Before the backward that ends accumulation: its gradients are averaged over the group by the
  // time backward returns. `outputs` are needed only to find unused parameters.
  void arm(const std::vector<torch::Tensor>& outputs);
  // After the armed backward has returned: takes the device back (see arm()).
  void after_backward();

 private:
  std::shared_ptr<c10d::Reducer> reducer_;
  // The bucket all-reduces of the armed backward still to be waited for.
  std::shared_ptr<std::vector<CommWork>> in_flight_;
  bool find_unused_ = false;
  bool armed_once_ = false;  // a backward has recorded the order gradients arrive in
};

}  // namespace shardscope
