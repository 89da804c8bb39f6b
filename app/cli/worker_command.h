#pragma once

#include <iosfwd>
#include <string>

namespace shardscope::cli {

// `shardscope worker`: one rank process. Its config comes from the launcher's file (or
// torchrun's), who it is from the environment (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
// MASTER_PORT); it writes its outcome into `out_dir` for `collect`.
int worker_command(const std::string& config_file, const std::string& out_dir, std::ostream& err);

}  // namespace shardscope::cli
