// Two runs at once compute on different cores: each claims its own across processes, and lets
// go when it ends. The locks here are in a folder of the test's own, so that it never meets a
// real run's claims (nor another copy of itself).
#include "engine/launch/compute_cores.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "tests/support/temp_dir.h"

namespace shardscope {
namespace {

const std::vector<int> kCores = {900, 901};

const std::string& folder() {
  static const std::string dir = test::test_temp_dir().string();
  return dir;
}

// What a claim in a process of its own gets: the first core as the exit status (+1), 0 none,
// 99 two cores 900 and 901.
int claim_in_a_child(int count) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const std::vector<int> got = claim_compute_cores_in(folder(), kCores, count);
    if (got == kCores) ::_exit(99);
    ::_exit(got.size() == 1 ? got[0] - 899 : 0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ComputeCores, TwoRunsAtOnceComputeOnDifferentCores) {
  EXPECT_EQ(claim_compute_cores_in(folder(), kCores, 1), std::vector<int>{900});
  EXPECT_EQ(claim_compute_cores_in(folder(), kCores, 1), std::vector<int>{900})
      << "claimed again: the same";
  EXPECT_EQ(claim_in_a_child(1), 2) << "another process, beside this one: the other core";
  EXPECT_EQ(claim_in_a_child(1), 2) << "the first child's claim ended with it";
  // Wanting both while this process holds one: fewer free than wanted, so the first two,
  // unclaimed, as a run alone would take.
  EXPECT_EQ(claim_in_a_child(2), 99);
  // This process wants both: it lets go of its one and claims the two.
  EXPECT_EQ(claim_compute_cores_in(folder(), kCores, 2), kCores);
  EXPECT_EQ(claim_in_a_child(1), 1) << "both taken: the first, unclaimed";
}

TEST(ComputeCores, NoFolderToLockInClaimsNothing) {
  EXPECT_EQ(claim_compute_cores_in("", kCores, 1), std::vector<int>{900});
  EXPECT_EQ(claim_in_a_child(1), 1) << "nothing claimed: the first again";
}

TEST(ComputeCores, ALauncherPassesItsClaimAsText) {
  EXPECT_EQ(compute_cores_text({0, 3}), "0,3");
  EXPECT_EQ(compute_cores_of("0,3"), (std::vector<int>{0, 3}));
  for (const char* bad : {"", "x", "1,", "-1", "1,,2", "99999999999"})
    EXPECT_TRUE(compute_cores_of(bad).empty()) << "'" << bad << "'";
}

}  // namespace
}  // namespace shardscope
