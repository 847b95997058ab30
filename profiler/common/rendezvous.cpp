#include "profiler/common/rendezvous.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan::profiler {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kMagic[8] = {'H', 'E', 'T', 'P', 'L', 'A', 'N', '1'};

Clock::time_point deadline_after(double seconds) {
  return Clock::now() + std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6));
}

int ms_left(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() <= 0 ? 0 : static_cast<int>(std::min<int64_t>(left.count(), 1 << 30));
}

// Waits until `fd` is readable (or writable) or the deadline passes. False on timeout.
bool wait_fd(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int rc = ::poll(&p, 1, ms_left(deadline));
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

void send_all(int fd, const void* data, size_t n, Clock::time_point deadline,
              const std::string& peer) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    if (!wait_fd(fd, POLLOUT, deadline))
      throw RuntimeFailure(fmt::format("rendezvous: timed out sending to {}", peer));
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      throw RuntimeFailure(
          fmt::format("rendezvous: lost the connection to {} ({})", peer, std::strerror(errno)));
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void recv_all(int fd, void* data, size_t n, Clock::time_point deadline, const std::string& peer,
              double timeout_s) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    if (!wait_fd(fd, POLLIN, deadline))
      throw RuntimeFailure(
          fmt::format("rendezvous: {} did not answer within {:.0f} s (it may have "
                      "died or hung; see its output)",
                      peer, timeout_s));
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r == 0)
      throw RuntimeFailure(
          fmt::format("rendezvous: {} closed the connection (it exited or died)", peer));
    if (r < 0)
      throw RuntimeFailure(
          fmt::format("rendezvous: lost the connection to {} ({})", peer, std::strerror(errno)));
    p += r;
    n -= static_cast<size_t>(r);
  }
}

void send_frame(int fd, const std::string& s, Clock::time_point deadline, const std::string& peer) {
  const uint64_t len = s.size();
  send_all(fd, &len, sizeof len, deadline, peer);
  send_all(fd, s.data(), s.size(), deadline, peer);
}

std::string recv_frame(int fd, Clock::time_point deadline, const std::string& peer,
                       double timeout_s) {
  uint64_t len = 0;
  recv_all(fd, &len, sizeof len, deadline, peer, timeout_s);
  if (len > (uint64_t{1} << 32))
    throw RuntimeFailure(fmt::format("rendezvous: malformed message from {}", peer));
  std::string s(len, '\0');
  recv_all(fd, s.data(), len, deadline, peer, timeout_s);
  return s;
}

std::string pack(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) {
    const uint64_t len = s.size();
    out.append(reinterpret_cast<const char*>(&len), sizeof len);
    out += s;
  }
  return out;
}

std::vector<std::string> unpack(const std::string& data, size_t count) {
  std::vector<std::string> items;
  size_t pos = 0;
  for (size_t i = 0; i < count; ++i) {
    uint64_t len = 0;
    if (pos + sizeof len > data.size()) throw RuntimeFailure("rendezvous: malformed gather");
    std::memcpy(&len, data.data() + pos, sizeof len);
    pos += sizeof len;
    if (pos + len > data.size()) throw RuntimeFailure("rendezvous: malformed gather");
    items.emplace_back(data.substr(pos, len));
    pos += len;
  }
  return items;
}

std::string rank_name(int r) { return fmt::format("rank {}", r); }

void set_nodelay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

double env_seconds(const Environment& env, const char* name, double fallback) {
  auto it = env.find(name);
  if (it == env.end() || it->second.empty()) return fallback;
  char* end = nullptr;
  const double v = std::strtod(it->second.c_str(), &end);
  if (!end || *end != '\0' || !(v > 0))
    throw InputError(fmt::format("environment variable {}: expected seconds > 0, found \"{}\"",
                                 name, it->second));
  return v;
}

}  // namespace

RendezvousTimeouts rendezvous_timeouts(const Environment& env) {
  RendezvousTimeouts t;
  t.connect_s = env_seconds(env, "HETPLAN_RENDEZVOUS_CONNECT_S", t.connect_s);
  t.operation_s = env_seconds(env, "HETPLAN_RENDEZVOUS_TIMEOUT_S", t.operation_s);
  return t;
}

Rendezvous::Rendezvous(const LaunchInfo& launch, const RendezvousAddress& address,
                       RendezvousTimeouts timeouts)
    : rank_(launch.rank), size_(launch.size), timeouts_(timeouts) {
  if (size_ <= 1) return;
  const auto deadline = deadline_after(timeouts_.connect_s);
  const std::string where = fmt::format("{}:{}", address.host, address.port);
  if (rank_ == 0) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) throw RuntimeFailure("rendezvous: cannot create a socket");
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_ANY);
    addr.sin_port = htons(static_cast<uint16_t>(address.port));
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(listen_fd_, size_) != 0)
      throw RuntimeFailure(
          fmt::format("rendezvous: rank 0 cannot listen on port {} ({}); set "
                      "HETPLAN_MASTER_PORT to a free port",
                      address.port, std::strerror(errno)));
    peers_.assign(size_, -1);
    for (int joined = 1; joined < size_;) {
      if (!wait_fd(listen_fd_, POLLIN, deadline))
        throw RuntimeFailure(fmt::format(
            "rendezvous: only {} of {} ranks reached rank 0 on port {} within {:.0f} s; other "
            "hosts need HETPLAN_MASTER_ADDR set to rank 0's host",
            joined, size_, address.port, timeouts_.connect_s));
      const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      set_nodelay(fd);
      char hello[16];
      try {
        recv_all(fd, hello, sizeof hello, deadline, "a connecting rank", timeouts_.connect_s);
      } catch (const RuntimeFailure&) {
        ::close(fd);  // a stray connection (port scanner, another job): ignore it
        continue;
      }
      uint32_t r = 0, n = 0;
      std::memcpy(&r, hello + 8, 4);
      std::memcpy(&n, hello + 12, 4);
      if (std::memcmp(hello, kMagic, 8) != 0 || static_cast<int>(n) != size_ || r == 0 ||
          static_cast<int>(r) >= size_ || peers_[r] >= 0) {
        ::close(fd);
        if (std::memcmp(hello, kMagic, 8) == 0)
          throw RuntimeFailure(
              fmt::format("rendezvous: a rank announced itself as {} of {}, but "
                          "this job has {} ranks (two jobs on one port?)",
                          r, n, size_));
        continue;
      }
      peers_[r] = fd;
      ++joined;
    }
  } else {
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(address.host.c_str(), std::to_string(address.port).c_str(), &hints, &res) !=
            0 ||
        !res)
      throw RuntimeFailure(
          fmt::format("rendezvous: cannot resolve HETPLAN_MASTER_ADDR \"{}\"", address.host));
    int fd = -1;
    std::string last_error;
    while (fd < 0) {
      fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd >= 0 && ::connect(fd, res->ai_addr, res->ai_addrlen) == 0) break;
      last_error = std::strerror(errno);
      if (fd >= 0) ::close(fd);
      fd = -1;
      if (Clock::now() >= deadline) {
        ::freeaddrinfo(res);
        throw RuntimeFailure(
            fmt::format("rendezvous: rank {} could not reach rank 0 at {} within "
                        "{:.0f} s ({}); set HETPLAN_MASTER_ADDR to rank 0's host",
                        rank_, where, timeouts_.connect_s, last_error));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ::freeaddrinfo(res);
    set_nodelay(fd);
    peers_.assign(1, fd);
    char hello[16];
    std::memcpy(hello, kMagic, 8);
    const uint32_t r = static_cast<uint32_t>(rank_), n = static_cast<uint32_t>(size_);
    std::memcpy(hello + 8, &r, 4);
    std::memcpy(hello + 12, &n, 4);
    send_all(fd, hello, sizeof hello, deadline, rank_name(0));
  }
}

Rendezvous::~Rendezvous() {
  for (int fd : peers_)
    if (fd >= 0) ::close(fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::vector<std::string> Rendezvous::all_gather(const std::string& mine) {
  if (size_ <= 1) return {mine};
  const auto deadline = deadline_after(timeouts_.operation_s);
  if (rank_ == 0) {
    std::vector<std::string> all(size_);
    all[0] = mine;
    for (int r = 1; r < size_; ++r)
      all[r] = recv_frame(peers_[r], deadline, rank_name(r), timeouts_.operation_s);
    const std::string packed = pack(all);
    for (int r = 1; r < size_; ++r) send_frame(peers_[r], packed, deadline, rank_name(r));
    return all;
  }
  send_frame(peers_[0], mine, deadline, rank_name(0));
  return unpack(recv_frame(peers_[0], deadline, rank_name(0), timeouts_.operation_s), size_);
}

std::string Rendezvous::broadcast(const std::string& value) {
  if (size_ <= 1) return value;
  const auto deadline = deadline_after(timeouts_.operation_s);
  if (rank_ == 0) {
    for (int r = 1; r < size_; ++r) send_frame(peers_[r], value, deadline, rank_name(r));
    return value;
  }
  return recv_frame(peers_[0], deadline, rank_name(0), timeouts_.operation_s);
}

}  // namespace hetplan::profiler
