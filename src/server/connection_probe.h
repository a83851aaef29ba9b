// Noticing that an HTTP client went away while its request waits on the engine.
//
// cpp-httplib 0.11 gives handlers no access to the connection's socket (newer versions have
// Request::is_connection_closed). So the probe finds the socket itself, once: it is the open
// socket of this process whose local and peer address:port are the request's local_addr:
// local_port and remote_addr:remote_port (a TCP 4-tuple names one live connection). httplib
// keeps that socket open until the handler and its content provider have returned, so the fd
// stays valid for as long as the probe is asked. Then peer_closed() polls it for a hang-up.
// If the socket cannot be found (non-Linux, exotic addresses) the probe answers "not closed"
// and a disconnect is noticed only when a write to the client fails.
// ThreadSanitizer flags the lookup's read-only syscalls on other threads' descriptors as races
// with their close(); they are benign (tests/server/tsan.supp suppresses them).
#pragma once

#include <string>
#include <vector>

namespace llmserve {

/// A connected TCP socket of this process whose local port is `local_port` (i.e. a
/// connection accepted by a server listening there), with its peer's numeric address.
struct AcceptedSocket {
  int fd = -1;
  std::string peer;  // "host:port", as httplib's remote_addr + ":" + remote_port
};

/// Every such socket, found through /proc/self/fd (empty elsewhere). The fds are only
/// borrowed: another thread may close them at any time (see peer_still_is()).
std::vector<AcceptedSocket> list_accepted_sockets(int local_port);

/// True if `fd` is still a socket connected to `peer` ("host:port") -- checked right before
/// acting on a listed fd that its owner may have closed and the kernel reused meanwhile.
bool peer_still_is(int fd, const std::string& peer);

class ConnectionProbe {
 public:
  /// The request's addresses as httplib reports them (numeric host strings, ports).
  ConnectionProbe(std::string local_addr, int local_port, std::string remote_addr,
                  int remote_port);

  /// True once the peer closed (or reset) the connection. The first call looks the socket up
  /// (about a /proc/self/fd listing); later calls are one poll(2). Call from the thread
  /// serving the request.
  bool peer_closed();

 private:
  int find_socket() const;

  std::string local_addr_;
  int local_port_;
  std::string remote_addr_;
  int remote_port_;
  bool looked_up_ = false;
  int fd_ = -1;
};

}  // namespace llmserve
