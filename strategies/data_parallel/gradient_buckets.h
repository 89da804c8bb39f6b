#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include <torch/types.h>

#include "engine/comm/comm.h"

namespace shardscope {

// DDP's gradient buckets over any list of parameters and any group: gradients are packed into
// flat buffers of at most `cap_bytes`, filled in reverse order (roughly the order backward
// produces them), and each buffer is averaged over the group by one all-reduce. With overlap a
// bucket's all-reduce starts as soon as its last gradient is in, so it runs under the rest of
// backward; without it everything is reduced in finish().
class GradientBuckets {
 public:
  GradientBuckets(std::vector<torch::Tensor> params, Comm& comm, int64_t cap_bytes,
                  c10::ScalarType dtype, bool overlap);

  // Parameter i's gradient is complete in .grad (or it has none: then zeros are sent).
  void ready(size_t i);
  // After backward: every parameter not reported ready contributes zeros, every bucket is
  // reduced and waited for, and the averaged gradients are written back. Parameters with
  // used[i] false (no rank of the group had a gradient) are left without one.
  void finish(const std::vector<bool>& was_ready, const std::vector<bool>& used);

  int64_t buffer_bytes() const;

 private:
  struct Bucket {
    std::vector<size_t> params;    // indices into params_
    std::vector<int64_t> offsets;  // element offset of each in `buffer`
    torch::Tensor buffer;
    size_t pending = 0;
    bool launched = false;
    CommWork work;
  };

  Bucket& fill(size_t i);
  void launch(Bucket& bucket);

  std::vector<torch::Tensor> params_;
  Comm& comm_;
  bool overlap_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> bucket_of_;
};

}  // namespace shardscope
