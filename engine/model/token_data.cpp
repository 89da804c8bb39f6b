#include "engine/model/token_data.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <stdexcept>

#include <torch/torch.h>

#include "engine/state/hashing.h"
#include "engine/train/config.h"
#include "profiling/io/input_file.h"

namespace shardscope {
namespace {

constexpr const char* kLicenceDir = "/usr/share/common-licenses";

std::string read_file(const std::filesystem::path& path) {
  if (const std::string why =
          profiling::input_file_problem(path.string(), profiling::kMaxDataBytes, "text file");
      !why.empty())
    throw ConfigError("data", why);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw ConfigError("data", "cannot read '" + path.string() + "'");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

std::shared_ptr<const TokenCorpus> TokenCorpus::synthetic(int vocab, uint64_t seed, size_t length) {
  // A small "language": a fixed lexicon of random words drawn in a skewed order, so that a model
  // can actually learn something from it (losses fall) while staying deterministic.
  auto corpus = std::make_shared<TokenCorpus>();
  const int words = 64;
  std::vector<std::vector<int64_t>> lexicon(words);
  uint64_t state = mix64(seed ^ 0x5eed);
  for (auto& word : lexicon) {
    int len = 2 + static_cast<int>((state = mix64(state)) % 6);
    for (int i = 0; i < len; ++i)
      word.push_back(static_cast<int64_t>((state = mix64(state)) % vocab));
  }
  while (corpus->tokens_.size() < length) {
    state = mix64(state);
    // Half the draws come from 8 frequent words: a skewed distribution worth learning.
    size_t index = (state & 1) ? (state >> 8) % words : (state >> 8) % 8;
    const auto& word = lexicon[index];
    corpus->tokens_.insert(corpus->tokens_.end(), word.begin(), word.end());
  }
  corpus->tokens_.resize(length);
  corpus->description_ = "synthetic (" + std::to_string(length) + " tokens)";
  return corpus;
}

std::shared_ptr<const TokenCorpus> TokenCorpus::load(const std::string& source, int vocab,
                                                     uint64_t seed) {
  if (source == "synthetic") return synthetic(vocab, seed, 1 << 18);
  std::vector<std::filesystem::path> files;
  if (source == "auto") {
    std::error_code ec;
    if (std::filesystem::is_directory(kLicenceDir, ec)) {
      for (const auto& entry : std::filesystem::directory_iterator(kLicenceDir, ec)) {
        if (entry.is_regular_file()) files.push_back(entry.path());  // symlinks would repeat texts
      }
    }
    std::sort(files.begin(), files.end());
    if (files.empty()) return synthetic(vocab, seed, 1 << 18);
  } else {
    files.push_back(source);
  }
  auto corpus = std::make_shared<TokenCorpus>();
  for (const auto& file : files) {
    for (unsigned char ch : read_file(file)) corpus->tokens_.push_back(ch);
  }
  corpus->description_ = (source == "auto" ? std::string(kLicenceDir) : source) + " (" +
                         std::to_string(files.size()) + " file(s), " +
                         std::to_string(corpus->tokens_.size()) + " byte tokens)";
  return corpus;
}

BatchSampler::BatchSampler(std::shared_ptr<const TokenCorpus> corpus, int seq, int micro_batch,
                           int world, int grad_accum, uint64_t seed)
    : corpus_(std::move(corpus)),
      seq_(seq),
      micro_batch_(micro_batch),
      world_(world),
      grad_accum_(grad_accum),
      seed_(seed) {
  if (static_cast<int64_t>(corpus_->tokens().size()) < seq_ + 2) {
    throw ConfigError("model.seq", "sequence of " + std::to_string(seq_) +
                                       " tokens is longer than the data (" +
                                       std::to_string(corpus_->tokens().size()) + " tokens)");
  }
}

std::vector<int64_t> BatchSampler::shard_sequence_ids(int rank, int micro) const {
  std::vector<int64_t> ids(micro_batch_);
  std::iota(ids.begin(), ids.end(), static_cast<int64_t>(micro * world_ + rank) * micro_batch_);
  return ids;
}

std::vector<int64_t> BatchSampler::sequence_offsets(int step,
                                                    const std::vector<int64_t>& ids) const {
  const uint64_t span = corpus_->tokens().size() - static_cast<uint64_t>(seq_) - 1;
  std::vector<int64_t> offsets;
  for (int64_t j : ids) {
    uint64_t h = mix64(mix64(seed_ ^ 0xda7a) ^
                       mix64(static_cast<uint64_t>(step) << 20 ^ static_cast<uint64_t>(j)));
    offsets.push_back(static_cast<int64_t>(h % (span + 1)));
  }
  return offsets;
}

Batch BatchSampler::gather(const std::vector<int64_t>& offsets) const {
  const auto& tokens = corpus_->tokens();
  const int64_t rows = static_cast<int64_t>(offsets.size());
  auto inputs = torch::empty({rows, seq_}, torch::kLong);
  auto targets = torch::empty({rows, seq_}, torch::kLong);
  auto* in = inputs.data_ptr<int64_t>();
  auto* out = targets.data_ptr<int64_t>();
  for (int64_t r = 0; r < rows; ++r) {
    std::copy_n(tokens.begin() + offsets[r], seq_, in + r * seq_);
    std::copy_n(tokens.begin() + offsets[r] + 1, seq_, out + r * seq_);
  }
  return {inputs, targets};
}

Batch BatchSampler::micro_batch(int step, int rank, int micro) const {
  return gather(sequence_offsets(step, shard_sequence_ids(rank, micro)));
}

Batch BatchSampler::global_batch_tensors(int step) const {
  std::vector<int64_t> ids(global_batch());
  std::iota(ids.begin(), ids.end(), 0);
  return gather(sequence_offsets(step, ids));
}

}  // namespace shardscope
