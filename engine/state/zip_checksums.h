#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace shardscope {

// The CRC-32 each entry of the zip file at `path` declares in its central directory, by record
// name as PyTorchStreamReader gives it (the archive's top folder removed: "data.pkl", "data/0").
// LibTorch's reader is built without miniz's CRC checks, so a flipped byte inside a tensor loads
// silently; the reader checks each record it reads against these. Throws WeightsFileError on a
// directory that cannot be read.
std::map<std::string, uint32_t> zip_record_checksums(const std::string& path);

// zlib's CRC-32 of `size` bytes.
uint32_t crc32_of(const void* data, size_t size);

}  // namespace shardscope
