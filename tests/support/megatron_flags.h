#pragma once
// The flags of `project` for Megatron's published GPT runs, shared by the tests that hold the
// projection to them.
#include <map>
#include <string>
#include <vector>

namespace shardscope::test {

// Megatron's 22B row of Korthikanti et al. 2022 (t 8, one micro-batch of 4 sequences), with
// flags `replace`d or added.
inline std::vector<std::string> megatron_22b(const std::map<std::string, std::string>& replace = {},
                                             const std::vector<std::string>& extra = {}) {
  std::map<std::string, std::string> flags = {{"--hardware", "8xA100"}, {"--strategy", "tp"},
                                              {"--world", "8"},         {"--tp", "8"},
                                              {"--layers", "48"},       {"--d-model", "6144"},
                                              {"--heads", "64"},        {"--seq", "2048"},
                                              {"--vocab", "51200"},     {"--mlp-ratio", "4"},
                                              {"--global-batch", "4"},  {"--precision", "bf16"}};
  for (const auto& [flag, value] : replace) flags[flag] = value;
  std::vector<std::string> args = {"project"};
  for (const auto& [flag, value] : flags) {
    if (value.empty()) continue;  // left out
    args.push_back(flag);
    args.push_back(value);
  }
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

inline double mean(const std::vector<double>& values) {
  double sum = 0;
  for (double v : values) sum += v;
  return values.empty() ? 0 : sum / double(values.size());
}

}  // namespace shardscope::test
