#pragma once

#include <chrono>
#include <string>

#include "engine/launch/gloo_network.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

namespace shardscope {

struct ProcessGroupSpec {
  std::string backend = "gloo";
  int rank = 0;
  int world = 1;
  std::chrono::milliseconds timeout{60000};
  c10::intrusive_ptr<c10d::Store> store;
  std::string name = "world";  // keys of different groups are kept apart in the store
  GlooNetwork network;         // where this rank's Gloo connections bind (loopback by default)
};

// What a process that makes groups sets up once, on one thread, before it starts any rank thread
// (launch_rank_threads, a rank process and perf's rank processes call it): SIGPIPE ignored, and
// c10d's flight recorder off (see the .cpp). setenv must not run beside another thread's getenv:
// glibc's environment is not thread-safe, and a rank thread's getenv crashed in CI while the
// first group of its process, made on the other rank's thread, called setenv.
void prepare_process_for_groups();

// Creates and connects one rank's process group (blocks until every rank of the group joined or
// the timeout expires). Backend headers stay inside this file.
c10::intrusive_ptr<c10d::ProcessGroup> make_process_group(const ProcessGroupSpec& spec);

}  // namespace shardscope
