#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engine/model/batch.h"

namespace shardscope {

// The token stream every rank samples from. Byte-level: each byte of the text is one token.
class TokenCorpus {
 public:
  // source: "auto" (the licence texts under /usr/share/common-licenses, else synthetic),
  // "synthetic", or the path of a text file.
  static std::shared_ptr<const TokenCorpus> load(const std::string& source, int vocab,
                                                 uint64_t seed);
  static std::shared_ptr<const TokenCorpus> synthetic(int vocab, uint64_t seed, size_t length);

  const std::vector<int64_t>& tokens() const { return tokens_; }
  const std::string& description() const { return description_; }

 private:
  std::vector<int64_t> tokens_;
  std::string description_;
};

// Deterministic global batches and their per-rank shards. Sequence j of a step's global batch
// starts at an offset that depends only on (seed, step, j); rank r's micro-batch k takes the
// sequences j = (k * world + r) * micro_batch + i, i < micro_batch, so shards are disjoint and
// together are exactly the global batch whatever the world size.
class BatchSampler {
 public:
  BatchSampler(std::shared_ptr<const TokenCorpus> corpus, int seq, int micro_batch, int world,
               int grad_accum, uint64_t seed);

  int global_batch() const { return micro_batch_ * world_ * grad_accum_; }
  std::vector<int64_t> sequence_offsets(int step, const std::vector<int64_t>& sequence_ids) const;
  std::vector<int64_t> shard_sequence_ids(int rank, int micro) const;
  Batch micro_batch(int step, int rank, int micro) const;
  Batch global_batch_tensors(int step) const;  // all sequences, j = 0 .. global_batch - 1

 private:
  Batch gather(const std::vector<int64_t>& offsets) const;

  std::shared_ptr<const TokenCorpus> corpus_;
  int seq_, micro_batch_, world_, grad_accum_;
  uint64_t seed_;
};

}  // namespace shardscope
