#include "engine/atomic_file.h"

#include <cstdio>
#include <fstream>
#include <stdexcept>

namespace shardscope {

void write_file_atomically(const std::string& path, const char* data, size_t size) {
  const std::string tmp = path + ".partial";
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw std::runtime_error("cannot write " + tmp);
    out.write(data, static_cast<std::streamsize>(size));
    if (!out) throw std::runtime_error("failed writing " + tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("cannot rename " + tmp + " to " + path);
  }
}

}  // namespace shardscope
