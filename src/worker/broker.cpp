#include "worker/broker.h"

#include "core/client_access.h"

namespace redisched::worker {
namespace {

class ClientBroker final : public Broker {
 public:
  ClientBroker(Client& c, std::string worker) : c_(c), worker_(std::move(worker)) {}

  void reserve(const std::string& topic, int count, Millis ttr,
               Callback<ReserveResult> done) override {
    c_.reserve_async(topic, ReserveOptions{count, ttr, worker_}, std::move(done));
  }
  void ack_many(const std::string& topic,
                std::span<const std::pair<std::string, std::uint64_t>> jobs, Millis keep,
                Callback<std::vector<Outcome>> done) override {
    c_.ack_many_async(topic, jobs, keep, std::move(done));
  }
  void ack(const std::string& topic, const std::string& id, std::uint64_t token, Millis keep,
           const std::optional<std::string>& result, Callback<Outcome> done) override {
    // (set_result's value goes to the jobs waiting for this one, if any,
    // and is kept with it for keep, and at least the retry window)
    if (result) {
      return detail::ClientAccess::ack_forwarding(c_, topic, id, token, keep, *result,
                                                  std::move(done));
    }
    c_.ack_async(topic, id, token, keep, std::move(done));
  }
  void release(const std::string& topic, const std::string& id, std::uint64_t token, Millis delay,
               Callback<Outcome> done) override {
    c_.release_async(topic, id, token, delay, std::nullopt, std::move(done));
  }
  void fail(const std::string& topic, const std::string& id, std::uint64_t token,
            const std::string& error, bool bury, std::optional<Millis> retry_delay,
            std::optional<int> max_attempts, Callback<FailResult> done) override {
    c_.fail_async(topic, id, token, error, bury, retry_delay, max_attempts, std::move(done));
  }
  void touch(const std::string& topic, const std::string& id, std::uint64_t token, Millis ttr,
             Callback<TouchResult> done) override {
    c_.touch_async(topic, id, token, ttr, std::move(done));
  }
  TouchResult touch_now(const std::string& topic, const std::string& id, std::uint64_t token,
                        Millis ttr) override {
    return c_.touch(topic, id, token, ttr);
  }
  void requeue(const std::string& topic, int limit, Callback<RequeueResult> done) override {
    c_.requeue_async(topic, limit, std::move(done));
  }
  std::vector<DependencyState> dependencies_now(const std::string& topic,
                                                const std::string& id) override {
    auto j = c_.get_with_dependencies(topic, id);
    return j ? std::move(j->deps) : std::vector<DependencyState>{};
  }
  void report(const std::string& topic, const std::string& id, std::uint64_t token,
              const JobReport& report, Callback<Outcome> done) override {
    c_.report_async(topic, id, token, report, std::move(done));
  }

 private:
  Client& c_;
  std::string worker_;
};

}  // namespace

std::unique_ptr<Broker> client_broker(Client& client, std::string worker) {
  return std::make_unique<ClientBroker>(client, std::move(worker));
}

}  // namespace redisched::worker
