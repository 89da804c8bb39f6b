#pragma once

#include <string>
#include <vector>

namespace shardscope {

// Which cores a job's computing rank uses on a CPU "device" (DeviceTurns::pin_compute_cores).
// Two runs at once (two tests under ctest -j2, two windows of the app) used to compute on the
// same first cores and leave the others to their communication threads: each then measured its
// compute at half speed. So the cores are claimed across the processes of this user, each by a
// lock on a file of its own (/tmp/shardscope-cores-UID/cpu-N, flock: the kernel lets go of it
// when the process ends, however it ends).

// The first `count` of `allowed` that no other process has claimed, claimed for this process's
// life. Where fewer are free, the first `count` of `allowed`, unclaimed (as it was before
// claims). Claiming as many again returns the same cores.
std::vector<int> claim_compute_cores(const std::vector<int>& allowed, int count);
// The same with the locks in `folder` (empty: claim nothing), for tests.
std::vector<int> claim_compute_cores_in(const std::string& folder, const std::vector<int>& allowed,
                                        int count);

// A launcher's claim for its rank processes, which take turns and so compute on the same cores:
// it passes them in this variable ("0,3"), and they read it back with
// compute_cores_from_environment (empty where unset or unreadable).
constexpr char kComputeCoresVariable[] = "SHARDSCOPE_COMPUTE_CPUS";
std::vector<int> compute_cores_from_environment();
// The variable's text and back: "0,3" (anything else reads as no cores).
std::string compute_cores_text(const std::vector<int>& cores);
std::vector<int> compute_cores_of(const std::string& text);

// The cores this process may run on, in order.
std::vector<int> allowed_cores();

}  // namespace shardscope
