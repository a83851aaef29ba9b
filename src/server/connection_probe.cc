#include "server/connection_probe.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <utility>

namespace llmserve {

namespace {

/// Numeric host and port of a socket address (getnameinfo, as httplib does).
bool address_matches(const sockaddr_storage& addr, socklen_t len, const std::string& host,
                     int port) {
  char host_buf[NI_MAXHOST];
  char port_buf[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host_buf, sizeof(host_buf),
                  port_buf, sizeof(port_buf), NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return false;
  return port == std::atoi(port_buf) && host == host_buf;
}

/// "host:port" of a socket address; empty on failure.
std::string address_string(const sockaddr_storage& addr, socklen_t len, int* port_out) {
  char host_buf[NI_MAXHOST];
  char port_buf[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, host_buf, sizeof(host_buf),
                  port_buf, sizeof(port_buf), NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return {};
  if (port_out) *port_out = std::atoi(port_buf);
  return std::string(host_buf) + ":" + port_buf;
}

std::string peer_of(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return {};
  return address_string(addr, len, nullptr);
}

}  // namespace

std::vector<AcceptedSocket> list_accepted_sockets(int local_port) {
  std::vector<AcceptedSocket> out;
  if (local_port <= 0) return out;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return out;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    int port = -1;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        address_string(addr, len, &port).empty() || port != local_port)
      continue;
    std::string peer = peer_of(static_cast<int>(fd));  // empty for the listening socket
    if (!peer.empty()) out.push_back({static_cast<int>(fd), std::move(peer)});
  }
  closedir(dir);
  return out;
}

bool peer_still_is(int fd, const std::string& peer) { return peer_of(fd) == peer; }

ConnectionProbe::ConnectionProbe(std::string local_addr, int local_port,
                                 std::string remote_addr, int remote_port)
    : local_addr_(std::move(local_addr)),
      local_port_(local_port),
      remote_addr_(std::move(remote_addr)),
      remote_port_(remote_port) {}

int ConnectionProbe::find_socket() const {
  if (local_port_ <= 0 || remote_port_ <= 0) return -1;
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  int found = -1;
  while (dirent* entry = readdir(dir)) {
    char* end = nullptr;
    const long fd = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;  // "." and ".."
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage addr{};
    socklen_t len = sizeof(addr);
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        !address_matches(addr, len, local_addr_, local_port_))
      continue;
    len = sizeof(addr);
    if (getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        !address_matches(addr, len, remote_addr_, remote_port_))
      continue;
    found = static_cast<int>(fd);
    break;
  }
  closedir(dir);
  return found;
}

bool ConnectionProbe::peer_closed() {
  if (!looked_up_) {
    fd_ = find_socket();
    looked_up_ = true;
  }
  if (fd_ < 0) return false;
  pollfd p{fd_, static_cast<short>(POLLIN | POLLRDHUP), 0};
  if (poll(&p, 1, 0) <= 0) return false;
  if (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) return true;
  if (p.revents & POLLIN) {  // readable: either more request bytes or EOF
    char c;
    return recv(fd_, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }
  return false;
}

}  // namespace llmserve
