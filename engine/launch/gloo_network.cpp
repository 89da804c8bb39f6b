#include "engine/launch/gloo_network.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "engine/train/config.h"

namespace shardscope {

std::string GlooNetwork::describe() const {
  if (interfaces.empty()) return "address " + address;
  std::string out = "interfaces ";
  for (size_t i = 0; i < interfaces.size(); ++i) out += (i ? "," : "") + interfaces[i];
  return out;
}

std::string local_address_toward(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), "9", &hints, &found); rc != 0) {
    throw std::runtime_error("cannot resolve '" + host + "': " + gai_strerror(rc));
  }
  std::string address, last_error = "no address";
  for (addrinfo* a = found; a != nullptr && address.empty(); a = a->ai_next) {
    const int fd = socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (connect(fd, a->ai_addr, a->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      char text[INET6_ADDRSTRLEN] = {};
      const void* raw =
          local.ss_family == AF_INET
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr)
              : static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr);
      if (inet_ntop(local.ss_family, raw, text, sizeof(text)) != nullptr) address = text;
    } else {
      last_error = std::strerror(errno);
    }
    close(fd);
  }
  freeaddrinfo(found);
  if (address.empty()) throw std::runtime_error("no route to '" + host + "': " + last_error);
  return address;
}

GlooNetwork gloo_network_from_env(const std::string& master_addr) {
  GlooNetwork network;
  if (const char* names = std::getenv("GLOO_SOCKET_IFNAME"); names != nullptr && *names != '\0') {
    std::stringstream parts(names);
    std::string name;
    while (std::getline(parts, name, ',')) {
      if (name.empty()) continue;
      if (if_nametoindex(name.c_str()) == 0) {
        throw ConfigError("GLOO_SOCKET_IFNAME",
                          "this host has no network interface named '" + name + "'");
      }
      network.interfaces.push_back(name);
    }
    if (network.interfaces.empty())
      throw ConfigError("GLOO_SOCKET_IFNAME", "no interface named in '" + std::string(names) + "'");
    return network;
  }
  if (const char* address = std::getenv("SHARDSCOPE_GLOO_ADDRESS");
      address != nullptr && *address != '\0') {
    network.address = address;
    return network;
  }
  try {
    network.address = local_address_toward(master_addr);
  } catch (const std::exception& e) {
    throw ConfigError("MASTER_ADDR", e.what());
  }
  return network;
}

}  // namespace shardscope
