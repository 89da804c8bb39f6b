#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include <torch/torch.h>

#include "engine/model/token_data.h"
#include "engine/train/config.h"

namespace shardscope {
namespace {

std::set<std::vector<int64_t>> rows(const torch::Tensor& t) {
  std::set<std::vector<int64_t>> out;
  auto c = t.contiguous();
  for (int64_t r = 0; r < c.size(0); ++r) {
    auto* p = c[r].data_ptr<int64_t>();
    out.insert(std::vector<int64_t>(p, p + c.size(1)));
  }
  return out;
}

TEST(TokenCorpus, ReadsTheLicenceTextsAsBytes) {
  auto corpus = TokenCorpus::load("auto", 256, 1);
  ASSERT_GT(corpus->tokens().size(), 10000u);
  auto [lo, hi] = std::minmax_element(corpus->tokens().begin(), corpus->tokens().end());
  EXPECT_GE(*lo, 0);
  EXPECT_LT(*hi, 256);
}

TEST(TokenCorpus, SyntheticIsDeterministicAndInVocabulary) {
  auto a = TokenCorpus::synthetic(50, 3, 5000), b = TokenCorpus::synthetic(50, 3, 5000);
  EXPECT_EQ(a->tokens(), b->tokens());
  EXPECT_LT(*std::max_element(a->tokens().begin(), a->tokens().end()), 50);
  EXPECT_NE(a->tokens(), TokenCorpus::synthetic(50, 4, 5000)->tokens());
}

TEST(BatchSampler, ShardsAreDisjointAndMakeUpTheGlobalBatch) {
  auto corpus = TokenCorpus::load("auto", 256, 1);
  const int world = 4, accum = 2, micro = 3, seq = 16;
  BatchSampler sampler(corpus, seq, micro, world, accum, 99);
  for (int step : {0, 5}) {
    auto global = sampler.global_batch_tensors(step);
    ASSERT_EQ(global.inputs.size(0), world * accum * micro);
    std::vector<torch::Tensor> parts;
    std::set<int64_t> ids;
    for (int r = 0; r < world; ++r) {
      for (int k = 0; k < accum; ++k) {
        for (int64_t id : sampler.shard_sequence_ids(r, k))
          EXPECT_TRUE(ids.insert(id).second) << "id " << id;
        auto b = sampler.micro_batch(step, r, k);
        EXPECT_EQ(b.inputs.sizes(), (std::vector<int64_t>{micro, seq}));
        // Targets are the inputs shifted by one token.
        EXPECT_TRUE(torch::equal(b.inputs.narrow(1, 1, seq - 1), b.targets.narrow(1, 0, seq - 1)));
        parts.push_back(b.inputs);
      }
    }
    EXPECT_EQ(ids.size(), static_cast<size_t>(world * accum * micro));
    auto union_rows = rows(torch::cat(parts));
    EXPECT_EQ(union_rows, rows(global.inputs));
  }
}

TEST(BatchSampler, IsDeterministicAndIndependentOfWorldSize) {
  auto corpus = TokenCorpus::load("auto", 256, 1);
  BatchSampler a(corpus, 16, 2, 4, 1, 7), b(corpus, 16, 2, 4, 1, 7), single(corpus, 16, 8, 1, 1, 7);
  EXPECT_TRUE(torch::equal(a.micro_batch(3, 2, 0).inputs, b.micro_batch(3, 2, 0).inputs));
  EXPECT_TRUE(torch::equal(a.global_batch_tensors(3).inputs, single.micro_batch(3, 0, 0).inputs));
  EXPECT_FALSE(torch::equal(a.global_batch_tensors(3).inputs, a.global_batch_tensors(4).inputs));
}

TEST(BatchSampler, RejectsSequencesLongerThanTheData) {
  auto corpus = TokenCorpus::synthetic(256, 1, 10);
  EXPECT_THROW(BatchSampler(corpus, 64, 1, 1, 1, 1), ConfigError);
}

}  // namespace
}  // namespace shardscope
