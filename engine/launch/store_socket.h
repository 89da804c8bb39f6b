#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace shardscope {

// A TCP socket listening on one address only, for a TCPStore to take over (its masterListenFd):
// a store left to itself listens on every interface, and nothing beyond the hosts a run names
// may reach it. Port 0 picks a free port. Throws ListenError naming the address and port.
int listen_on(const std::string& address, uint16_t port);

// Why listen_on could not listen, and whose fault: the address (it does not resolve, is not this
// host's, or is the wildcard of every interface, which peers cannot reach and which would open
// the store to every network the host is on) or the port (another program holds it).
struct ListenError : std::runtime_error {
  ListenError(const std::string& what, bool address) : std::runtime_error(what), address(address) {}
  bool address;  // false: the port
};

// The port a socket is bound to.
uint16_t port_of(int fd);

}  // namespace shardscope
