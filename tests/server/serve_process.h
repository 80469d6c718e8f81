// Test helpers for redisched serve: the real binary started as a process
// (with its embedded Redis, on a free port), a small HTTP client, and an
// HTTP receiver for webhooks, all over real sockets.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <csignal>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace redisched::test {

struct HttpAnswer {
  int status = 0;
  std::string body;
  std::map<std::string, std::string> headers;
};

// One keep-alive connection to 127.0.0.1:port.
class HttpClient {
 public:
  explicit HttpClient(int port);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;
  HttpAnswer request(const std::string& method, const std::string& target,
                     const std::string& body = "",
                     const std::map<std::string, std::string>& headers = {});

 private:
  struct Impl;
  Impl* impl_;
};

// redisched serve with its own data dir; stopped (SIGTERM) at destruction.
class ServeProcess {
 public:
  // args after "serve"; the data dir and --listen 127.0.0.1:0 are added.
  explicit ServeProcess(std::vector<std::string> args = {}, std::string data_dir = "",
                        std::vector<std::string> global_args = {});
  ~ServeProcess();
  ServeProcess(const ServeProcess&) = delete;
  ServeProcess& operator=(const ServeProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  pid_t redis_pid() const { return redis_pid_; }
  const std::string& data_dir() const { return dir_; }
  // SIGTERM (or signal), and the exit status (128 + the signal when killed).
  int stop(int signal = SIGTERM);
  // The exit status, once the process ends of itself (or of a signal the
  // test sent): a second SIGTERM would race serve's last steps.
  int wait();

 private:
  std::string dir_;
  bool own_dir_ = false;
  pid_t pid_ = -1;
  pid_t redis_pid_ = -1;
  int port_ = 0;
};

// Runs redisched with args; returns {exit status, stdout + stderr}.
std::pair<int, std::string> run_redisched(const std::vector<std::string>& args);

// An HTTP server for webhooks: answers each POST with status_for(body).
class Receiver {
 public:
  explicit Receiver(std::function<int(const std::string& body)> status_for);
  ~Receiver();
  int port() const { return port_; }
  std::vector<std::string> bodies() const;

 private:
  std::function<int(const std::string&)> status_for_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::vector<std::string> bodies_;
  std::thread thread_;
};

// Running (a zombie, exited but not yet reaped, is not).
bool process_alive(pid_t pid);

}  // namespace redisched::test
