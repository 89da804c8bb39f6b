#pragma once

// Helpers that config.cpp (reading a configuration) and config_validation.cpp (checking it) share.
#include <string>
#include <vector>

namespace shardscope::config_detail {

// "cuda" or "cuda:N".
bool is_cuda_device(const std::string& device);

// Throws ConfigError(field, message) unless `ok`.
void require(bool ok, const std::string& field, const std::string& message);

// "a, b, c": the known values a message lists.
std::string join(const std::vector<std::string>& items);

}  // namespace shardscope::config_detail
