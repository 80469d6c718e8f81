// Push delivery: each due job of a subscribed topic is POSTed as JSON to the
// subscription's URL. A 2xx answer acks it; anything else, or no answer
// within the timeout, fails it (retried with backoff, dead after its
// attempts). Each subscription is a Worker with an asynchronous handler, so
// its concurrency costs no threads, and its state is the jobs in Redis: a
// restarted server carries on where the last one stopped.
#pragma once

#include <atomic>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "redisched/worker.h"
#include "server/http.h"

namespace boost::asio::ssl {
class context;
}

namespace redisched::server {

class Metrics;

struct Subscription {
  std::string url;  // http[s]://host[:port]/path
  int concurrency = 10;
  std::chrono::milliseconds timeout{10000};
};
// Their bounds (--webhook-concurrency, PUT .../webhook).
inline constexpr int kWebhookConcurrencyMax = 1000;
inline constexpr std::int64_t kWebhookTimeoutMaxMs = 600000;

// "TOPIC=URL" of --webhook; throws std::runtime_error naming the fault.
std::pair<std::string, Subscription> parse_webhook_flag(const std::string& flag);

class Pusher {
 public:
  // Each subscription is a Worker on client (and its runtime), which must
  // outlive the Pusher; the webhook requests run on the worker's shard.
  // https webhooks' certificates are checked against the system's CAs, or
  // those of ca_file (PEM) when given.
  Pusher(Client& client, Metrics& metrics, const std::string& ca_file = "");
  ~Pusher();
  Pusher(const Pusher&) = delete;
  Pusher& operator=(const Pusher&) = delete;

  // The destinations webhooks may have (--webhook-allow), each HOST,
  // HOST:PORT, *.DOMAIN or *.DOMAIN:PORT; none: any. Before subscribe().
  // Throws Error (invalid_argument) for one of another form.
  void allow(const std::vector<std::string>& destinations);
  // Why url may not be a webhook's destination (not in the allowlist), or
  // nullopt when it may. Throws Error (invalid_argument) for a bad URL.
  std::optional<std::string> refusal(const std::string& url) const;
  // Starts (or replaces) the delivery of a topic. Throws Error
  // (invalid_argument) for a bad topic or URL, or a destination refused.
  void subscribe(const std::string& topic, const Subscription& s);
  bool unsubscribe(const std::string& topic);
  // Stops every delivery, letting requests in flight finish within drain.
  // Not on a thread of the runtime (it waits for the workers).
  void stop(std::chrono::milliseconds drain);

  // The topic's subscription, if it has one.
  std::optional<Subscription> subscription(const std::string& topic);

 private:
  struct Retiring {
    std::thread thread;
    std::shared_ptr<std::atomic<bool>> finished;
  };
  void retire(std::unique_ptr<Worker> old, std::chrono::milliseconds drain);

  Client& client_;
  Metrics& metrics_;
  std::mutex mu_;
  std::map<std::string, std::pair<Subscription, std::unique_ptr<Worker>>> subs_;
  std::vector<Retiring> retiring_;  // workers draining after a change
  struct Destination {
    std::string host;  // lower case; "*.example.com" takes its subdomains
    std::string port;  // empty: any
  };
  std::vector<Destination> allowed_;                // set before the first subscribe
  std::shared_ptr<boost::asio::ssl::context> tls_;  // https webhooks' (held by their handlers)
  std::mutex subscribing_;                          // a subscribe() against stop()
  bool stopped_ = false;                            // GUARDED_BY(subscribing_): no new subscription
};

}  // namespace redisched::server
