// The Client's mover of flows (library version 35): the calls one topic's
// outbox holds for others, made on them, then the entries deleted.
// docs/redis-api.md, "Flows".
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string_view>

#include "core/client_access.h"
#include "core/client_impl.h"
#include "core/client_wrap.h"
#include "core/shards.h"
#include "redisched/client.h"

namespace redisched {
namespace {

// For the flows fault test (tests/cluster/flows_fault_test.cpp) alone:
// REDISCHED_TEST_KILL_MOVER=<step>:<n> has the process SIGKILL itself the
// n-th time one of its movers reaches step, each between two of a move's
// steps: read (a page read, no call made), call (a call answered, maybe
// not the others), calls (every call answered, no entry deleted), moved
// (entries deleted, the next page not read). Unset, it costs a load.
class KillPoint {
 public:
  static void reached(std::string_view step) {
    static KillPoint* const point = from_env();
    if (point && point->step_ == step && ++point->seen_ == point->n_) ::kill(::getpid(), SIGKILL);
  }

 private:
  static KillPoint* from_env() {
    const char* v = std::getenv("REDISCHED_TEST_KILL_MOVER");
    if (!v) return nullptr;
    const std::string_view text(v);
    const auto colon = text.find(':');
    if (colon == std::string_view::npos) return nullptr;
    auto* p = new KillPoint;  // NOLINT: lives as long as the process
    p->step_ = text.substr(0, colon);
    p->n_ = std::atol(v + colon + 1);
    return p;
  }
  std::string step_;
  long n_ = 0;
  std::atomic<long> seen_{0};
};

// One topic's or shard's outbox carried out, a page at a time, until a
// page comes back empty, or none of its calls answered. Every call an entry names is idempotent, so
// an entry whose call failed stays for the next mover, and one carried out twice (two movers at
// once) changes nothing the second time. The calls' answers come on the thread that made them, any
// of the runtime's: the page's count is under a lock. (Impl: Client::Impl, which only the Client's
// members may name.)
template <class Impl>
class OutboxMove : public std::enable_shared_from_this<OutboxMove<Impl>> {
 public:
  OutboxMove(Impl& impl, std::string where, Callback<MoveResult> done)
      : impl_(impl), where_(std::move(where)), done_(std::move(done)) {}

  void next() {
    impl_.template run<core::op::Outbox>(
        where_, {},
        [self = this->shared_from_this()](Result<std::vector<core::op::OutboxEntry>> r) {
          if (!r.ok()) return self->done_(r.error());
          if (!r.value().empty()) KillPoint::reached("read");
          self->carry(std::move(r).value());
        });
  }

 private:
  void carry(std::vector<core::op::OutboxEntry> page) {
    if (page.empty()) return done_(total_);
    auto calls = merged(std::move(page));
    pending_ = calls.size();
    carried_.clear();
    for (auto& c : calls) {
      auto self = this->shared_from_this();
      call(c.call,
           [self, entries = std::move(c.entries)](bool ok) { self->answered(entries, ok); });
    }
  }

  // A call to make, and the entries it carries out.
  struct Call {
    core::op::OutboxEntry call;
    std::vector<std::string> entries;
  };

  // The page's calls: the resolves of one job (topic, id, gen) merged into
  // one call of up to kBatchMax settlements (a flow's children each add
  // one as they finish: one call per settlement cost more than their acks).
  static std::vector<Call> merged(std::vector<core::op::OutboxEntry> page) {
    std::vector<Call> calls;
    std::map<std::string, std::size_t> open;  // topic, id, gen -> its call
    for (auto& e : page) {
      const bool resolve = e.fn == "resolve" && e.args.size() >= 3;
      std::string key;
      if (resolve) key = e.topic + '\0' + e.args[0] + '\0' + e.args[1];
      if (resolve) {
        if (auto it = open.find(key); it != open.end()) {
          Call& c = calls[it->second];
          const std::size_t n = settlements(c.call) + settlements(e);
          if (n <= static_cast<std::size_t>(limits::kBatchMax)) {
            c.call.args[2] = std::to_string(n);
            c.call.args.insert(c.call.args.end(), e.args.begin() + 3, e.args.end());
            c.entries.push_back(std::move(e.entry));
            continue;
          }
        }
        open[key] = calls.size();
      }
      std::string entry = e.entry;
      calls.push_back({std::move(e), {std::move(entry)}});
    }
    return calls;
  }
  static std::size_t settlements(const core::op::OutboxEntry& e) { return (e.args.size() - 3) / 4; }

  // Makes the call entry e names; then(whether it answered).
  void call(const core::op::OutboxEntry& e, std::function<void(bool)> then) {
    const auto& a = e.args;
    if (e.fn == "resolve" && a.size() >= 2) {
      return impl_.template run<core::op::Resolve>(e.topic, {a[0], {a.begin() + 1, a.end()}},
                                                   [then](Result<int> r) { then(r.ok()); });
    }
    if (e.fn == "depend" && a.size() >= 5) {
      return impl_.template run<core::op::Depend>(e.topic,
                                                  {a[0], a[1], a[2], {a.begin() + 4, a.end()}},
                                                  [then](Result<int> r) { then(r.ok()); });
    }
    if (e.fn == "forget" && a.size() >= 5) {
      return impl_.template run<core::op::Forget>(e.topic,
                                                  {a[0], a[1], a[2], {a.begin() + 4, a.end()}},
                                                  [then](Result<int> r) { then(r.ok()); });
    }
    then(false);  // a later version's call, or a malformed one: left for its mover
  }

  void answered(const std::vector<std::string>& entries, bool ok) {
    if (ok) KillPoint::reached("call");
    {
      const std::lock_guard lock(mutex_);
      if (ok) {
        carried_.insert(carried_.end(), entries.begin(), entries.end());
      } else {
        total_.failed += static_cast<int>(entries.size());
      }
      if (--pending_ > 0) return;
    }
    // Only entries whose call answered go; a page of failures ends the pass.
    if (carried_.empty()) return done_(total_);
    KillPoint::reached("calls");
    impl_.template run<core::op::Moved>(
        where_, {carried_}, [self = this->shared_from_this()](Result<int> r) {
          if (!r.ok()) return self->done_(r.error());
          KillPoint::reached("moved");
          self->total_.moved += static_cast<int>(self->carried_.size());
          // Again until a page comes back empty: an entry added while
          // this page was carried out published no signal (the outbox was
          // not empty then), so no other mover may be coming for it.
          self->next();
        });
  }

  Impl& impl_;
  const std::string where_;
  Callback<MoveResult> done_;
  MoveResult total_;
  std::mutex mutex_;
  std::size_t pending_ = 0;
  std::vector<std::string> carried_;
};

template <class Impl>
void move_one(Impl& impl, std::string where, Callback<MoveResult> done) {
  std::make_shared<OutboxMove<Impl>>(impl, std::move(where), std::move(done))->next();
}

}  // namespace

void Client::move_outbox_async(std::string_view topic, Callback<MoveResult> done) {
  try {
    core::check_topic(topic);
  } catch (const Error& e) {
    return done(e);
  }
  impl_->with_layout<MoveResult>(
      topic, std::move(done),
      [impl = impl_.get()](const core::LayoutPtr& l, Callback<MoveResult> then) {
        if (!l->spread()) return move_one(*impl, l->topic, std::move(then));
        // Each shard's, and the topic's own (entries made before it was spread).
        struct Sum {
          std::mutex mutex;
          std::size_t left;
          MoveResult total;
          std::optional<Error> error;
          Callback<MoveResult> then;
        };
        auto sum = std::make_shared<Sum>();
        sum->left = l->shards.size() + 1;
        sum->then = std::move(then);
        auto part = [sum](Result<MoveResult> r) {
          {
            const std::lock_guard lock(sum->mutex);
            if (r.ok()) {
              sum->total.moved += r.value().moved;
              sum->total.failed += r.value().failed;
            } else if (!sum->error) {
              sum->error = r.error();
            }
            if (--sum->left > 0) return;
          }
          if (sum->error) return sum->then(*sum->error);
          sum->then(sum->total);
        };
        for (const auto& shard : l->shards) move_one(*impl, shard, part);
        move_one(*impl, l->topic, part);
      });
}
REDISCHED_WRAP(MoveResult, move_outbox, (std::string_view topic), (topic, std::move(cb)))

}  // namespace redisched

#undef REDISCHED_WRAP
