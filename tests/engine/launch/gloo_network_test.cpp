// Where a rank's Gloo connections bind: the interfaces GLOO_SOCKET_IFNAME names, the address the
// launcher asks for, else this host's address on the route toward the master. (Two real hosts:
// tests/scripts/two_hosts_test.sh.)
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "engine/launch/gloo_network.h"
#include "engine/train/config.h"

namespace shardscope {
namespace {

// Sets (or, with nullptr, unsets) a variable for one test and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? setenv(name, value, 1) : unsetenv(name);
  }
  ~ScopedEnv() { old_.empty() ? unsetenv(name_.c_str()) : setenv(name_.c_str(), old_.c_str(), 1); }

 private:
  std::string name_, old_;
};

TEST(GlooNetwork, RoutesTowardTheMasterFromThisHost) {
  ScopedEnv no_ifname("GLOO_SOCKET_IFNAME", nullptr);
  ScopedEnv no_address("SHARDSCOPE_GLOO_ADDRESS", nullptr);
  // A master on loopback is reached from loopback; the kernel picks it, not a hard-coded rule.
  const GlooNetwork network = gloo_network_from_env("127.0.0.1");
  EXPECT_TRUE(network.interfaces.empty());
  EXPECT_EQ(network.address, "127.0.0.1");
  EXPECT_EQ(local_address_toward("localhost").rfind("127.", 0) == 0 ||
                local_address_toward("localhost") == "::1",
            true);
}

TEST(GlooNetwork, TheLaunchersAddressWinsOverTheRoute) {
  ScopedEnv no_ifname("GLOO_SOCKET_IFNAME", nullptr);
  ScopedEnv address("SHARDSCOPE_GLOO_ADDRESS", "127.0.0.1");
  EXPECT_EQ(gloo_network_from_env("192.0.2.1").address, "127.0.0.1");
}

TEST(GlooNetwork, SocketIfnameNamesInterfacesCommaSeparated) {
  ScopedEnv ifname("GLOO_SOCKET_IFNAME", "lo,lo");
  const GlooNetwork network = gloo_network_from_env("127.0.0.1");
  ASSERT_EQ(network.interfaces.size(), 2u);
  EXPECT_EQ(network.interfaces[0], "lo");
  EXPECT_EQ(network.describe(), "interfaces lo,lo");
}

TEST(GlooNetwork, AnInterfaceThisHostLacksIsRefusedNamingTheVariable) {
  ScopedEnv ifname("GLOO_SOCKET_IFNAME", "lo,nosuch0");
  try {
    gloo_network_from_env("127.0.0.1");
    FAIL() << "accepted an interface that does not exist";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "GLOO_SOCKET_IFNAME");
    EXPECT_NE(std::string(e.what()).find("nosuch0"), std::string::npos) << e.what();
  }
}

TEST(GlooNetwork, AMasterThatDoesNotResolveIsRefusedNamingTheVariable) {
  ScopedEnv no_ifname("GLOO_SOCKET_IFNAME", nullptr);
  ScopedEnv no_address("SHARDSCOPE_GLOO_ADDRESS", nullptr);
  try {
    gloo_network_from_env("no-such-host.invalid");
    FAIL() << "accepted a master that does not resolve";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.field(), "MASTER_ADDR");
  }
}

}  // namespace
}  // namespace shardscope
