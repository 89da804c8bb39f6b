#include "engine/state/zip_checksums.h"

#include <zlib.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "engine/state/weights_file.h"

namespace shardscope {
namespace {

constexpr uint32_t kEndOfDirectory = 0x06054b50;
constexpr uint32_t kZip64EndLocator = 0x07064b50;
constexpr uint32_t kZip64End = 0x06064b50;
constexpr uint32_t kDirectoryEntry = 0x02014b50;

uint64_t little_endian(const std::vector<char>& bytes, size_t at, int width) {
  if (at + static_cast<size_t>(width) > bytes.size())
    throw WeightsFileError("its zip directory is truncated");
  uint64_t value = 0;
  for (int i = width - 1; i >= 0; --i)
    value = (value << 8) | static_cast<unsigned char>(bytes[at + static_cast<size_t>(i)]);
  return value;
}

std::vector<char> read_range(std::ifstream& in, uint64_t offset, uint64_t size) {
  std::vector<char> bytes(static_cast<size_t>(size));
  in.seekg(static_cast<std::streamoff>(offset));
  if (!in.read(bytes.data(), static_cast<std::streamsize>(size)))
    throw WeightsFileError("its zip directory lies outside the file (truncated?)");
  return bytes;
}

struct Directory {
  uint64_t offset = 0, size = 0, entries = 0;
};

// The end-of-directory record is in the last 64 KiB + 22 bytes (its comment is at most 64 KiB);
// where its fields overflow, the zip64 record the locator before it points to holds them.
Directory find_directory(std::ifstream& in, uint64_t file_size) {
  const uint64_t tail = std::min<uint64_t>(file_size, 65535 + 22);
  const std::vector<char> end = read_range(in, file_size - tail, tail);
  for (size_t back = 22; back <= end.size(); ++back) {
    const size_t at = end.size() - back;
    if (little_endian(end, at, 4) != kEndOfDirectory) continue;
    Directory d{little_endian(end, at + 16, 4), little_endian(end, at + 12, 4),
                little_endian(end, at + 10, 2)};
    if (d.offset != 0xffffffffu && d.size != 0xffffffffu && d.entries != 0xffffu) return d;
    if (at < 20 || little_endian(end, at - 20, 4) != kZip64EndLocator)
      throw WeightsFileError("its zip64 directory locator is missing");
    const std::vector<char> z64 = read_range(in, little_endian(end, at - 20 + 8, 8), 56);
    if (little_endian(z64, 0, 4) != kZip64End) throw WeightsFileError("its zip64 directory is bad");
    return {little_endian(z64, 48, 8), little_endian(z64, 40, 8), little_endian(z64, 32, 8)};
  }
  throw WeightsFileError("it has no zip directory (not a zip file, or truncated)");
}

}  // namespace

uint32_t crc32_of(const void* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* bytes = static_cast<const Bytef*>(data);
  while (size > 0) {  // zlib takes a uInt length
    const uInt n = static_cast<uInt>(std::min<size_t>(size, 1u << 30));
    crc = crc32(crc, bytes, n);
    bytes += n;
    size -= n;
  }
  return static_cast<uint32_t>(crc);
}

std::map<std::string, uint32_t> zip_record_checksums(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw WeightsFileError("cannot open for reading");
  in.seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(in.tellg());
  const Directory d = find_directory(in, file_size);
  if (d.offset + d.size > file_size) throw WeightsFileError("its zip directory lies outside it");
  const std::vector<char> dir = read_range(in, d.offset, d.size);
  std::map<std::string, uint32_t> crcs;
  size_t at = 0;
  for (uint64_t i = 0; i < d.entries; ++i) {
    if (little_endian(dir, at, 4) != kDirectoryEntry)
      throw WeightsFileError("its zip directory is corrupt");
    const auto crc = static_cast<uint32_t>(little_endian(dir, at + 16, 4));
    const size_t name_length = little_endian(dir, at + 28, 2);
    const size_t extra = little_endian(dir, at + 30, 2) + little_endian(dir, at + 32, 2);
    if (at + 46 + name_length > dir.size())
      throw WeightsFileError("its zip directory is truncated");
    std::string name(dir.data() + at + 46, name_length);
    const size_t slash = name.find('/');
    crcs[slash == std::string::npos ? name : name.substr(slash + 1)] = crc;
    at += 46 + name_length + extra;
  }
  return crcs;
}

}  // namespace shardscope
