// A TCP port on 127.0.0.1 where connecting hangs: a listener with a backlog
// of one that never accepts, and that one taken. For the paths of a
// connection that is still connecting (close, deadlines, seeds).
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace redisched::test {

class BlackHole {
 public:
  BlackHole() {
    listener_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    auto* addr = reinterpret_cast<sockaddr*>(&a);
    if (::bind(listener_, addr, len) != 0 || ::listen(listener_, 0) != 0 ||
        ::getsockname(listener_, addr, &len) != 0) {
      throw std::runtime_error("BlackHole: cannot listen");
    }
    port_ = ntohs(a.sin_port);
    filler_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (::connect(filler_, addr, len) != 0) throw std::runtime_error("BlackHole: cannot fill");
  }
  ~BlackHole() {
    ::close(filler_);
    ::close(listener_);
  }
  BlackHole(const BlackHole&) = delete;
  BlackHole& operator=(const BlackHole&) = delete;

  int port() const { return port_; }
  std::string url() const { return "redis://127.0.0.1:" + std::to_string(port_); }

 private:
  int listener_ = -1;
  int filler_ = -1;
  int port_ = 0;
};

}  // namespace redisched::test
