// Every topic's counts, read once for the whole server: the dashboard's event
// streams, /metrics, GET /v1/topics and the sweeper share one reading instead
// of each doing its own SCAN and one stats call per topic. A reading only
// reads (stats is a read-only function), and its per-topic calls go out
// together on the pipeline.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "redisched/client.h"

namespace redisched::server {

class OneShot;

class Census {
 public:
  struct Reading {
    std::chrono::steady_clock::time_point started;
    std::vector<std::pair<std::string, TopicStats>> topics;  // sorted by name
  };

  explicit Census(Client& client) : client_(client) {}
  Census(const Census&) = delete;
  Census& operator=(const Census&) = delete;

  // A reading started at or after since: the last one if it is recent
  // enough, else the one being taken (or a new one). Callers that arrive
  // together share it. Throws Error when Redis cannot be read. Any thread.
  boost::asio::awaitable<std::shared_ptr<const Reading>> after(
      std::chrono::steady_clock::time_point since);

  // Readings taken so far (for tests of their sharing).
  std::uint64_t readings() const;

 private:
  void start_reading();  // REQUIRES: mu_ not held; reading_ just set
  void finish(std::shared_ptr<const Reading> r, std::optional<Error> failure);

  Client& client_;
  mutable std::mutex mu_;
  std::shared_ptr<const Reading> last_;              // GUARDED_BY(mu_)
  std::optional<Error> failure_;                     // of the last reading, GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point failed_at_;  // GUARDED_BY(mu_)
  bool reading_ = false;                             // GUARDED_BY(mu_)
  std::chrono::steady_clock::time_point reading_started_;
  std::vector<std::shared_ptr<OneShot>> waiting_;  // GUARDED_BY(mu_)
  std::uint64_t count_ = 0;                        // GUARDED_BY(mu_)
};

}  // namespace redisched::server
