#pragma once

#include <string>
#include <vector>

namespace shardscope {

// Where a rank's Gloo connections live. Gloo advertises the address its device is bound to, and
// every peer connects to that address, so a rank on another host must not bind to loopback.
// Chosen as PyTorch does, with one difference noted below:
//  - interfaces: GLOO_SOCKET_IFNAME, comma-separated (one Gloo device per interface);
//  - else address: what the launcher asked for (rank threads, and the rank processes our own
//    launcher starts on this machine: loopback);
//  - else the address of this host on the route toward MASTER_ADDR. PyTorch resolves the
//    hostname here, which on a multi-homed host or a container often names an interface the
//    peers cannot reach; the route to the master is the one interface known to work.
struct GlooNetwork {
  std::vector<std::string> interfaces;
  std::string address = "127.0.0.1";

  // "interfaces eth0,eth1" or "address 10.77.0.2", for messages.
  std::string describe() const;
};

// Reads GLOO_SOCKET_IFNAME and SHARDSCOPE_GLOO_ADDRESS; else routes toward `master_addr`.
// Throws ConfigError naming the variable for an interface this host does not have, or a master
// address that does not resolve.
GlooNetwork gloo_network_from_env(const std::string& master_addr);

// This host's address on the route toward `host` (no packet is sent: a UDP socket's connect only
// picks the route). Throws std::runtime_error when `host` does not resolve or has no route.
std::string local_address_toward(const std::string& host);

}  // namespace shardscope
