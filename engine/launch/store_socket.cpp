#include "engine/launch/store_socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace shardscope {
namespace {

bool is_wildcard(const addrinfo& a) {
  if (a.ai_family == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(a.ai_addr)->sin_addr.s_addr == htonl(INADDR_ANY);
  if (a.ai_family == AF_INET6) {
    const in6_addr& address = reinterpret_cast<const sockaddr_in6*>(a.ai_addr)->sin6_addr;
    return IN6_IS_ADDR_UNSPECIFIED(&address);
  }
  return false;
}

}  // namespace

int listen_on(const std::string& address, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string where = address + ":" + std::to_string(port);
  if (int rc = getaddrinfo(address.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    throw ListenError("cannot resolve " + where + ": " + gai_strerror(rc), /*address=*/true);
  std::string error = "no address";
  bool address_at_fault = true;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    if (is_wildcard(*a)) {
      error =
          "the wildcard address listens on every interface of this host, and other ranks "
          "cannot connect to it: give the address they reach (127.0.0.1 on one host)";
      continue;
    }
    fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) != 0 || listen(fd, SOMAXCONN) != 0) {
      address_at_fault = errno != EADDRINUSE;
      error = std::strerror(errno);
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) throw ListenError("cannot listen on " + where + ": " + error, address_at_fault);
  return fd;
}

uint16_t port_of(int fd) {
  sockaddr_storage bound{};
  socklen_t length = sizeof(bound);
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) != 0)
    throw std::runtime_error(std::string("getsockname: ") + std::strerror(errno));
  return ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                          : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
}

}  // namespace shardscope
