#include "serve_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <stdexcept>

#include "testutil/redis_server.h"

extern char** environ;

namespace redisched::test {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

bool process_alive(pid_t pid) {
  if (pid <= 0 || ::kill(pid, 0) != 0) return false;
  // A zombie has exited: only its parent (or init, which may take its
  // time) has not reaped it yet.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'Z';
}

struct HttpClient::Impl {
  asio::io_context io;
  tcp::socket socket{io};
  beast::flat_buffer buffer;
  int port;
  bool closed = false;
  void connect() {
    socket = tcp::socket(io);
    socket.connect(
        tcp::endpoint(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)));
  }
};

HttpClient::HttpClient(int port) : impl_(new Impl) {
  impl_->port = port;
  try {
    impl_->connect();
  } catch (...) {
    delete impl_;  // a refused connection: no destructor runs for us
    throw;
  }
}

HttpClient::~HttpClient() { delete impl_; }

HttpAnswer HttpClient::request(const std::string& method, const std::string& target,
                               const std::string& body,
                               const std::map<std::string, std::string>& headers) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    try {
      if (impl_->closed) {
        impl_->buffer.clear();
        impl_->connect();
        impl_->closed = false;
      }
      http::request<http::string_body> req{http::string_to_verb(method), target, 11};
      req.set(http::field::host, "127.0.0.1");
      for (const auto& [k, v] : headers) req.set(k, v);
      req.body() = body;
      req.prepare_payload();
      // A server that refuses a large body answers and closes before the
      // body is all sent: the write fails, the answer is still there to read.
      boost::system::error_code write_error;
      http::write(impl_->socket, req, write_error);
      http::response_parser<http::string_body> parser;
      parser.body_limit(64 << 20);
      http::read(impl_->socket, impl_->buffer, parser);
      auto res = parser.release();
      HttpAnswer a;
      a.status = res.result_int();
      a.body = res.body();
      for (const auto& f : res) a.headers[std::string(f.name_string())] = std::string(f.value());
      impl_->closed = !res.keep_alive();  // reconnect on the next request
      return a;
    } catch (const boost::system::system_error&) {
      if (attempt == 1) throw;
      impl_->buffer.clear();
      impl_->connect();  // the server closed the idle connection
    }
  }
  throw std::logic_error("unreachable");
}

namespace {

std::string binary() { return REDISCHED_BINARY; }

pid_t spawn(const std::vector<std::string>& args, int out_fd) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  posix_spawn_file_actions_adddup2(&fa, out_fd, 2);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) throw std::runtime_error("cannot start " + args[0]);
  return pid;
}

}  // namespace

ServeProcess::ServeProcess(std::vector<std::string> args, std::string data_dir,
                           std::vector<std::string> global_args) {
  if (data_dir.empty()) {
    char tmpl[] = "/tmp/redisched-serve-XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    own_dir_ = true;
  } else {
    dir_ = data_dir;
  }
  std::vector<std::string> full = {binary(), "--data-dir", dir_ + "/data"};
  full.insert(full.end(), global_args.begin(), global_args.end());
  // The suites' second target: serve on the shared cluster, not on a Redis
  // of its own.
  if (on_cluster() &&
      std::find(global_args.begin(), global_args.end(), "--redis") == global_args.end()) {
    full.emplace_back("--redis");
    full.emplace_back(target_url());
  }
  full.emplace_back("serve");
  if (std::find(args.begin(), args.end(), "--listen") == args.end()) {
    full.emplace_back("--listen");
    full.emplace_back("127.0.0.1:0");
  }
  full.insert(full.end(), args.begin(), args.end());
  const std::string log = dir_ + "/serve.log";
  const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  pid_ = spawn(full, fd);
  ::close(fd);
  const std::regex listening(R"(listening on http://[^ ]+:(\d+) )");
  const std::regex redis(R"(started redis-server \(pid (\d+)\))");
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (std::chrono::steady_clock::now() < deadline) {
    std::ifstream in(log);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::smatch m;
    if (std::regex_search(text, m, redis)) redis_pid_ = std::stoi(m[1]);
    if (std::regex_search(text, m, listening)) {
      port_ = std::stoi(m[1]);
      return;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      throw std::runtime_error("redisched serve exited at start:\n" + text);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  throw std::runtime_error("redisched serve did not start");
}

int ServeProcess::stop(int signal) {
  if (pid_ <= 0) return -1;
  ::kill(pid_, signal);
  return wait();
}

int ServeProcess::wait() {
  if (pid_ <= 0) return -1;
  int status = 0;
  ::waitpid(pid_, &status, 0);
  pid_ = -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

ServeProcess::~ServeProcess() {
  stop();
  if (own_dir_) std::filesystem::remove_all(dir_);
}

std::pair<int, std::string> run_redisched(const std::vector<std::string>& args) {
  char tmpl[] = "/tmp/redisched-out-XXXXXX";
  const int fd = ::mkstemp(tmpl);
  std::vector<std::string> full = {binary()};
  full.insert(full.end(), args.begin(), args.end());
  const pid_t pid = spawn(full, fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(fd);
  std::ifstream in(tmpl);
  std::string out((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ::unlink(tmpl);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

Receiver::Receiver(std::function<int(const std::string&)> status_for)
    : status_for_(std::move(status_for)) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::listen(listen_fd_, 64);
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] {
    asio::io_context io;
    while (!stop_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) continue;
      try {
        tcp::socket s(io, tcp::v4(), fd);
        beast::flat_buffer buf;
        http::request<http::string_body> req;
        http::read(s, buf, req);
        {
          std::lock_guard lock(mu_);
          bodies_.push_back(req.body());
        }
        http::response<http::string_body> res{static_cast<http::status>(status_for_(req.body())),
                                              11};
        res.body() = "{}";
        res.keep_alive(false);
        res.prepare_payload();
        http::write(s, res);
        boost::system::error_code ignored;
        s.shutdown(tcp::socket::shutdown_both, ignored);
      } catch (const std::exception&) {
      }
    }
  });
}

Receiver::~Receiver() {
  stop_ = true;
  thread_.join();
  ::close(listen_fd_);
}

std::vector<std::string> Receiver::bodies() const {
  std::lock_guard lock(mu_);
  return bodies_;
}

}  // namespace redisched::test
