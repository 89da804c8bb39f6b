#pragma once

#include <cstdint>
#include <string>

namespace shardscope {

// A TCP socket listening on one address only, for a TCPStore to take over (its masterListenFd):
// a store left to itself listens on every interface, and nothing beyond the hosts a run names
// may reach it. Port 0 picks a free port. Throws std::runtime_error naming the address and port
// (EADDRINUSE: another program holds the port).
int listen_on(const std::string& address, uint16_t port);

// The port a socket is bound to.
uint16_t port_of(int fd);

}  // namespace shardscope
