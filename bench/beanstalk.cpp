#include "beanstalk.h"

#include <fmt/format.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <boost/asio/buffers_iterator.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <charconv>
#include <chrono>
#include <exception>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench_util.h"

extern char** environ;

namespace redisched::bench {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using asio::use_awaitable;

// beanstalkd from PATH on 127.0.0.1 and a free port, in memory (no -b);
// stopped at the end.
class Beanstalkd {
 public:
  Beanstalkd() {
    {
      asio::io_context io;
      tcp::acceptor probe(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
      port_ = probe.local_endpoint().port();
    }
    std::vector<std::string> args = {"beanstalkd", "-l", "127.0.0.1", "-p", std::to_string(port_)};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    if (posix_spawnp(&pid_, "beanstalkd", nullptr, nullptr, argv.data(), environ) != 0) {
      throw std::runtime_error("cannot start beanstalkd (Debian package beanstalkd)");
    }
    asio::io_context io;
    for (int i = 0; i < 500; ++i) {
      tcp::socket s(io);
      boost::system::error_code ec;
      s.connect(endpoint(), ec);
      if (!ec) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    stop();
    throw std::runtime_error("beanstalkd did not accept connections");
  }
  ~Beanstalkd() { stop(); }
  Beanstalkd(const Beanstalkd&) = delete;
  Beanstalkd& operator=(const Beanstalkd&) = delete;

  pid_t pid() const { return pid_; }

  tcp::endpoint endpoint() const {
    return {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port_)};
  }

 private:
  void stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
  pid_t pid_ = -1;
  int port_ = 0;
};

// One reply line, without its CRLF.
asio::awaitable<std::string> read_line(tcp::socket& s, asio::streambuf& in) {
  const std::size_t n = co_await asio::async_read_until(s, in, "\r\n", use_awaitable);
  auto begin = asio::buffers_begin(in.data());
  std::string line(begin, begin + static_cast<std::ptrdiff_t>(n - 2));
  in.consume(n);
  co_return line;
}

asio::awaitable<void> put_jobs(tcp::socket s, long& next, long total) {
  asio::streambuf in;
  std::string cmd;
  for (long i = next++; i < total; i = next++) {
    const JobSpec spec = job(i);
    cmd = fmt::format("put 0 0 60 {}\r\n", spec.body.size());
    cmd += spec.body;
    cmd += "\r\n";
    co_await asio::async_write(s, asio::buffer(cmd), use_awaitable);
    const std::string reply = co_await read_line(s, in);
    if (!reply.starts_with("INSERTED ")) throw std::runtime_error("beanstalkd put: " + reply);
  }
}

asio::awaitable<void> reserve_delete_jobs(tcp::socket s, long& left) {
  asio::streambuf in;
  static const std::string reserve = "reserve-with-timeout 0\r\n";
  while (left > 0) {
    --left;
    co_await asio::async_write(s, asio::buffer(reserve), use_awaitable);
    const std::string reply = co_await read_line(s, in);  // RESERVED <id> <bytes>
    if (!reply.starts_with("RESERVED ")) throw std::runtime_error("beanstalkd reserve: " + reply);
    const auto space = reply.find(' ', 9);
    std::size_t bytes = 0;
    if (space == std::string::npos ||
        std::from_chars(reply.data() + space + 1, reply.data() + reply.size(), bytes).ec !=
            std::errc{}) {
      throw std::runtime_error("beanstalkd reserve: " + reply);
    }
    const std::size_t need = bytes + 2;  // the body and its CRLF
    if (in.size() < need) {
      co_await asio::async_read(s, in, asio::transfer_exactly(need - in.size()), use_awaitable);
    }
    in.consume(need);
    const std::string del = "delete " + reply.substr(9, space - 9) + "\r\n";
    co_await asio::async_write(s, asio::buffer(del), use_awaitable);
    const std::string deleted = co_await read_line(s, in);
    if (deleted != "DELETED") throw std::runtime_error("beanstalkd delete: " + deleted);
  }
}

// Runs one coroutine per connection to the end; returns the seconds taken.
template <class Make>
double run_connections(const tcp::endpoint& server, int connections, Make make) {
  asio::io_context io;
  std::exception_ptr failure;
  for (int c = 0; c < connections; ++c) {
    tcp::socket s(io);
    s.connect(server);
    s.set_option(tcp::no_delay(true));
    asio::co_spawn(io, make(std::move(s)), [&failure](const std::exception_ptr& e) {
      if (e && !failure) failure = e;
    });
  }
  const auto t0 = std::chrono::steady_clock::now();
  io.run();
  if (failure) std::rethrow_exception(failure);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

PeerFigures beanstalkd_figures(long jobs, int connections) {
  Beanstalkd server;
  const auto at = server.endpoint();
  const double cpu0 = cpu_seconds(server.pid());
  auto out = beanstalk_figures_at(at.address().to_string(), at.port(), jobs, connections);
  out.cpu_seconds = cpu_seconds(server.pid()) - cpu0;
  return out;
}

PeerFigures beanstalk_figures_at(const std::string& host, unsigned short port, long jobs,
                                 int connections) {
  const tcp::endpoint server(asio::ip::make_address(host), port);
  PeerFigures out;
  long next = 0;
  out.put = static_cast<double>(jobs) / run_connections(server, connections, [&](tcp::socket s) {
              return put_jobs(std::move(s), next, jobs);
            });
  long left = jobs;
  out.reserve_delete =
      static_cast<double>(jobs) / run_connections(server, connections, [&](tcp::socket s) {
        return reserve_delete_jobs(std::move(s), left);
      });
  return out;
}

}  // namespace redisched::bench
