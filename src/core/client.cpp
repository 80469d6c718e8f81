#include "redisched/client.h"

#include <boost/asio/steady_timer.hpp>
#include <charconv>

#include "core/client_access.h"
#include "core/client_impl.h"
#include "core/keys.h"
#include "redisched/limits.h"

namespace redisched {
namespace client_detail {

// One Client::wait: listens on the topic's finished channel, reads the job
// when it is named (and once the subscription is in place, which covers a
// job that finished before), and answers once it has finished, is gone, or
// the timeout passed. Its mutex orders the reads, the timer and the end.
struct Waiter : std::enable_shared_from_this<Waiter> {
  Waiter(asio::io_context& io, Client& owner, std::string_view topic_name, std::string_view job_id)
      : client(owner), topic(topic_name), id(job_id), timer(io) {}

  Client& client;
  std::string topic, id;
  Callback<std::optional<Job>> done;
  asio::steady_timer timer;
  redis::Link* link = nullptr;
  std::optional<std::uint64_t> subscription;
  std::function<void(std::shared_ptr<Waiter>)> forget;  // from the Client's set

  std::mutex mu;
  bool ended = false;
  bool reading = false, read_again = false, timed_out = false;

  // A read of the job; one at a time, another one after it when asked for
  // meanwhile.
  void check() {
    std::lock_guard lock(mu);
    if (ended) return;
    if (reading) {
      read_again = true;
      return;
    }
    reading = true;
    // Issued under the lock: the Client's destructor ends waiters under it.
    client.get_async(topic, id, [self = shared_from_this()](Result<std::optional<Job>> r) {
      self->checked(std::move(r));
    });
  }

  void checked(Result<std::optional<Job>> r) {
    Callback<std::optional<Job>> answer;
    bool again = false;
    {
      std::lock_guard lock(mu);
      reading = false;
      if (ended) return;
      const bool over = !r.ok() || !r.value() || r.value()->state == JobState::done ||
                        r.value()->state == JobState::dead || timed_out;
      if (over) {
        end_locked();
        answer = std::exchange(done, nullptr);
      } else {
        again = std::exchange(read_again, false);
      }
    }
    if (answer) return answer(std::move(r));
    if (again) check();
  }

  // The timeout: one last read, whose answer is the job as it is.
  void expire() {
    {
      std::lock_guard lock(mu);
      if (ended) return;
      timed_out = true;
    }
    check();
  }

  void message(const std::string& payload) {
    for (std::size_t at = 0; at <= payload.size();) {
      const std::size_t end = std::min(payload.find('\n', at), payload.size());
      if (std::string_view(payload).substr(at, end - at) == id) return check();
      at = end + 1;
    }
  }

  void end_locked() {
    ended = true;
    timer.cancel();
    if (subscription && link) link->unsubscribe(*subscription);
    if (forget) std::exchange(forget, nullptr)(shared_from_this());
  }
};

// One Client::watch: the wake-up channel of the topic, or those of its
// shards, and its meta channel, where a change of its shards is announced
// ("~shards"): then the list is read again, the shards' channels taken
// anew, and on_ready runs (signals may have been missed: look again).
struct TopicWatch : std::enable_shared_from_this<TopicWatch> {
  TopicWatch(redis::Link& l, std::string key_prefix, std::string name)
      : link(l), prefix(std::move(key_prefix)), topic(std::move(name)) {}

  redis::Link& link;
  std::string prefix, topic;
  std::function<void(std::int64_t)> on_signal;
  std::function<void()> on_ready;
  std::function<void(Callback<core::LayoutPtr>)> read_layout;

  std::mutex mu;
  bool cancelled = false;
  std::optional<std::uint64_t> meta;
  std::vector<std::string> watching;         // the topics whose channels are taken
  std::vector<std::uint64_t> subscriptions;  // theirs, in that order

  void start(const core::LayoutPtr& known) {
    std::weak_ptr<TopicWatch> weak = shared_from_this();
    const auto id = link.subscribe(
        core::schedules_channel(prefix, topic),
        [weak](const std::string& payload) {
          if (auto self = weak.lock(); self && payload == "~shards") self->refresh();
        },
        [weak] {  // (a change announced while the link was down was missed)
          if (auto self = weak.lock(); self) self->refresh();
        });
    {
      std::lock_guard lock(mu);
      meta = id;
    }
    follow(known ? known : std::make_shared<const core::Layout>(topic, std::vector<std::string>{}));
  }

  void refresh() {
    read_layout([weak = weak_from_this()](Result<core::LayoutPtr> l) {
      // (A failed read: the next reconnection's on_ready reads again.)
      if (auto self = weak.lock(); self && l.ok()) self->follow(l.value());
    });
  }

  void follow(const core::LayoutPtr& l) {
    std::vector<std::string> want = l->spread() ? l->shards : std::vector<std::string>{topic};
    std::vector<std::uint64_t> old;
    {
      std::lock_guard lock(mu);
      if (cancelled || want == watching) return;
      old.swap(subscriptions);
      watching = want;
    }
    for (auto id : old) link.unsubscribe(id);
    std::weak_ptr<TopicWatch> weak = shared_from_this();
    std::vector<std::uint64_t> taken;
    for (const auto& t : want) {
      taken.push_back(link.subscribe(
          core::wake_channel(prefix, t),
          [weak](const std::string& payload) {
            std::int64_t due = 0;
            auto [end, ec] = std::from_chars(payload.data(), payload.data() + payload.size(), due);
            if (ec != std::errc() || end != payload.data() + payload.size()) return;
            if (auto self = weak.lock(); self) self->on_signal(due);
          },
          [weak] {
            if (auto self = weak.lock(); self && self->on_ready) self->on_ready();
          }));
    }
    std::unique_lock lock(mu);
    if (cancelled || watching != want) {  // cancelled, or a newer list followed meanwhile
      lock.unlock();
      for (auto id : taken) link.unsubscribe(id);
      return;
    }
    subscriptions = std::move(taken);
  }

  void cancel() {
    std::vector<std::uint64_t> ids;
    {
      std::lock_guard lock(mu);
      cancelled = true;
      ids.swap(subscriptions);
      if (meta) ids.push_back(*meta);
      meta.reset();
    }
    for (auto id : ids) link.unsubscribe(id);
  }
};

}  // namespace client_detail

void Client::Impl::end_waiters() {
  std::unordered_set<std::shared_ptr<Waiter>> waiting;
  {
    std::lock_guard lock(waiters_mu);
    waiting.swap(waiters);
  }
  for (const auto& w : waiting) {
    std::lock_guard lock(w->mu);
    if (w->ended) continue;
    w->forget = nullptr;
    w->end_locked();
    if (w->done) {
      asio::post(shard_io(*runtime, 0), [done = std::exchange(w->done, nullptr)] {
        done(Error(Errc::closed, "the client is closed"));
      });
    }
  }
}

void Client::Impl::wait_for_calls(std::chrono::milliseconds timeout) {
  if (!runtime->owns_threads() || runtime->current_shard() >= 0) return;
  for (std::size_t i = 0; i < runtime->shards(); ++i) {
    if (shard_io(*runtime, i).stopped()) return;
  }
  flight_->waited.store(true);
  std::unique_lock lock(flight_->mu);
  // (command_timeout 0, no timeout: the links are closed, so what is still
  // in flight ends with Errc::closed at once; a minute for its callbacks.)
  flight_->idle.wait_for(lock, timeout.count() > 0 ? timeout : std::chrono::minutes(1),
                         [this] { return flight_->calls.load() == 0; });
}

Client::Impl::~Impl() {
  // Waits end with Errc::closed, then calls in flight: their answers (and
  // what they start) run now, while every member still lives. A runtime of
  // the Client's own runs their callbacks before it ends; a shared one runs
  // them later.
  end_waiters();
  for (auto& l : links_) l->close();
  wait_for_calls(opts.command_timeout);
  end_waiters();  // a wait a continuation started meanwhile
  links_.clear();
  runtime.reset();
}

Client::Client(ClientOptions options)
    : Client(std::make_unique<Impl>(std::move(options), nullptr)) {}

Client::Client(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {
  // The first command waits for the first connection attempt (and the
  // library check): an unreachable Redis fails here, at once. (Not on a
  // runtime the caller runs: nothing answers before it runs it.)
  if (!impl_->runtime->owns_threads()) return;
  core::Command ping;
  ping.add("PING");
  wait_for<std::int64_t>(*impl_->runtime, [&](Callback<std::int64_t> cb) {
    impl_->call<std::int64_t>(
        "", ping, [](const Reply&) { return std::int64_t{0}; }, std::move(cb));
  });
}

Client::~Client() = default;

std::unique_ptr<Client> detail::ClientAccess::over_link(ClientOptions options,
                                                        std::unique_ptr<redis::Link> link) {
  return std::unique_ptr<Client>(
      new Client(std::make_unique<Client::Impl>(std::move(options), std::move(link))));
}

const ClientOptions& Client::options() const noexcept { return impl_->opts; }

Runtime& Client::runtime() noexcept { return *impl_->runtime; }

void Client::validate_topic(std::string_view topic) { core::check_topic(topic); }

// ---------------------------------------------------------------- put
// Each call hands its arguments to the dispatcher (Impl::run) with its
// entry in core/operations.h, which says the rest.

void Client::put_async(std::string_view topic, const JobSpec& job, Callback<PutOutcome> done) {
  impl_->run<op::Put>(topic, job, std::move(done));
}
REDISCHED_WRAP(PutOutcome, put, (std::string_view topic, const JobSpec& job),
               (topic, job, std::move(cb)))

void Client::add_async(std::string_view topic, const JobSpec& job, Callback<std::string> done) {
  impl_->run<op::Add>(topic, job, std::move(done));
}
REDISCHED_WRAP(std::string, add, (std::string_view topic, const JobSpec& job),
               (topic, job, std::move(cb)))

void Client::put_many_async(std::string_view topic, std::span<const JobSpec> jobs,
                            Callback<std::vector<PutOutcome>> done) {
  impl_->run<op::PutMany>(topic, {{jobs.begin(), jobs.end()}}, std::move(done));
}
REDISCHED_WRAP(std::vector<PutOutcome>, put_many,
               (std::string_view topic, std::span<const JobSpec> jobs),
               (topic, jobs, std::move(cb)))

// ---------------------------------------------------------------- read

void Client::get_async(std::string_view topic, std::string_view id,
                       Callback<std::optional<Job>> done) {
  impl_->run<op::Get>(topic, {std::string(id)}, std::move(done));
}
REDISCHED_WRAP(std::optional<Job>, get, (std::string_view topic, std::string_view id),
               (topic, id, std::move(cb)))

void Client::stats_async(std::string_view topic, Callback<TopicStats> done) {
  impl_->run<op::Stats>(topic, {}, std::move(done));
}
REDISCHED_WRAP(TopicStats, stats, (std::string_view topic), (topic, std::move(cb)))

void Client::list_async(std::string_view topic, JobState state, std::int64_t offset, int count,
                        bool with_bodies, Callback<ListPage> done) {
  impl_->run<op::List>(topic, {state, offset, count, with_bodies}, std::move(done));
}
REDISCHED_WRAP(ListPage, list,
               (std::string_view topic, JobState state, std::int64_t offset, int count,
                bool with_bodies),
               (topic, state, offset, count, with_bodies, std::move(cb)))

// ---------------------------------------------------------------- take

void Client::reserve_async(std::string_view topic, int count, Millis ttr,
                           Callback<ReserveResult> done) {
  impl_->run<op::Reserve>(topic, {count, ttr}, std::move(done));
}
REDISCHED_WRAP(ReserveResult, reserve, (std::string_view topic, int count, Millis ttr),
               (topic, count, ttr, std::move(cb)))

void Client::pull_async(std::string_view topic, int count, Callback<ReserveResult> done) {
  impl_->run<op::Pull>(topic, {count}, std::move(done));
}
REDISCHED_WRAP(ReserveResult, pull, (std::string_view topic, int count),
               (topic, count, std::move(cb)))

// ---------------------------------------------------------------- settle

void Client::ack_async(std::string_view topic, std::string_view id, std::uint64_t token,
                       Millis keep, Callback<Outcome> done) {
  impl_->run<op::Ack>(topic, {{std::string(id), token}, keep, std::nullopt}, std::move(done));
}
REDISCHED_WRAP(Outcome, ack,
               (std::string_view topic, std::string_view id, std::uint64_t token, Millis keep),
               (topic, id, token, keep, std::move(cb)))

void Client::ack_async(std::string_view topic, std::string_view id, std::uint64_t token,
                       Millis keep, std::string_view result, Callback<Outcome> done) {
  impl_->run<op::Ack>(topic, {{std::string(id), token}, keep, std::string(result)},
                      std::move(done));
}
REDISCHED_WRAP(Outcome, ack,
               (std::string_view topic, std::string_view id, std::uint64_t token, Millis keep,
                std::string_view result),
               (topic, id, token, keep, result, std::move(cb)))

void Client::ack_many_async(std::string_view topic,
                            std::span<const std::pair<std::string, std::uint64_t>> jobs,
                            Millis keep, Callback<std::vector<Outcome>> done) {
  impl_->run<op::AckMany>(topic, {{jobs.begin(), jobs.end()}, keep}, std::move(done));
}
REDISCHED_WRAP(std::vector<Outcome>, ack_many,
               (std::string_view topic, std::span<const std::pair<std::string, std::uint64_t>> jobs,
                Millis keep),
               (topic, jobs, keep, std::move(cb)))

void Client::release_async(std::string_view topic, std::string_view id, std::uint64_t token,
                           Millis delay, std::optional<int> priority, Callback<Outcome> done) {
  impl_->run<op::Release>(topic, {{std::string(id), token}, delay, priority}, std::move(done));
}
REDISCHED_WRAP(Outcome, release,
               (std::string_view topic, std::string_view id, std::uint64_t token, Millis delay,
                std::optional<int> priority),
               (topic, id, token, delay, priority, std::move(cb)))

void Client::fail_async(std::string_view topic, std::string_view id, std::uint64_t token,
                        std::string_view error, bool bury, std::optional<Millis> retry_delay,
                        std::optional<int> max_attempts, Callback<FailResult> done) {
  impl_->run<op::Fail>(
      topic, {{std::string(id), token}, std::string(error), bury, retry_delay, max_attempts},
      std::move(done));
}
REDISCHED_WRAP(FailResult, fail,
               (std::string_view topic, std::string_view id, std::uint64_t token,
                std::string_view error, bool bury, std::optional<Millis> retry_delay,
                std::optional<int> max_attempts),
               (topic, id, token, error, bury, retry_delay, max_attempts, std::move(cb)))

void Client::touch_async(std::string_view topic, std::string_view id, std::uint64_t token,
                         Millis ttr, Callback<TouchResult> done) {
  impl_->run<op::Touch>(topic, {{std::string(id), token}, ttr}, std::move(done));
}
REDISCHED_WRAP(TouchResult, touch,
               (std::string_view topic, std::string_view id, std::uint64_t token, Millis ttr),
               (topic, id, token, ttr, std::move(cb)))

// ---------------------------------------------------------------- manage

void Client::remove_async(std::string_view topic, std::string_view id, Callback<bool> done) {
  impl_->run<op::Delete>(topic, {std::string(id)}, std::move(done));
}
REDISCHED_WRAP(bool, remove, (std::string_view topic, std::string_view id),
               (topic, id, std::move(cb)))

void Client::restore_async(std::string_view topic, const Job& job, bool replace,
                           Callback<bool> done) {
  impl_->run<op::Restore>(topic, {job, replace}, std::move(done));
}
REDISCHED_WRAP(bool, restore, (std::string_view topic, const Job& job, bool replace),
               (topic, job, replace, std::move(cb)))

void Client::requeue_async(std::string_view topic, int limit, Callback<RequeueResult> done) {
  impl_->run<op::Requeue>(topic, {limit}, std::move(done));
}
REDISCHED_WRAP(RequeueResult, requeue, (std::string_view topic, int limit),
               (topic, limit, std::move(cb)))

void Client::kick_async(std::string_view topic, std::span<const std::string> ids,
                        Callback<int> done) {
  impl_->run<op::Kick>(topic, {{ids.begin(), ids.end()}}, std::move(done));
}
REDISCHED_WRAP(int, kick, (std::string_view topic, std::span<const std::string> ids),
               (topic, ids, std::move(cb)))

void Client::kick_all_async(std::string_view topic, int limit, Callback<int> done) {
  impl_->run<op::KickAll>(topic, {limit}, std::move(done));
}
REDISCHED_WRAP(int, kick_all, (std::string_view topic, int limit), (topic, limit, std::move(cb)))

void Client::pause_async(std::string_view topic, Callback<bool> done) {
  impl_->run<op::Pause>(topic, {}, std::move(done));
}
REDISCHED_WRAP(bool, pause, (std::string_view topic), (topic, std::move(cb)))

void Client::resume_async(std::string_view topic, Callback<bool> done) {
  impl_->run<op::Resume>(topic, {}, std::move(done));
}
REDISCHED_WRAP(bool, resume, (std::string_view topic), (topic, std::move(cb)))

void Client::set_limits_async(std::string_view topic, const TopicLimits& limits,
                              Callback<TopicLimits> done) {
  impl_->run<op::Limit>(topic, {limits}, std::move(done));
}
REDISCHED_WRAP(TopicLimits, set_limits, (std::string_view topic, const TopicLimits& limits),
               (topic, limits, std::move(cb)))

void Client::limits_async(std::string_view topic, Callback<TopicLimits> done) {
  impl_->run<op::Limit>(topic, {}, std::move(done));
}
REDISCHED_WRAP(TopicLimits, limits, (std::string_view topic), (topic, std::move(cb)))

void Client::set_retry_window_async(std::string_view topic, Millis window,
                                    Callback<RetryWindow> done) {
  impl_->run<op::RetryWindow>(topic, {window}, std::move(done));
}
REDISCHED_WRAP(RetryWindow, set_retry_window, (std::string_view topic, Millis window),
               (topic, window, std::move(cb)))

void Client::retry_window_async(std::string_view topic, Callback<RetryWindow> done) {
  impl_->run<op::RetryWindow>(topic, {}, std::move(done));
}
REDISCHED_WRAP(RetryWindow, retry_window, (std::string_view topic), (topic, std::move(cb)))

// ---------------------------------------------------------------- composed
// Calls made of several of the library's.

namespace {
// A SCAN over every topic's meta hash on every node of the link, one page at
// a time; done gets the sorted topics.
struct TopicScan : std::enable_shared_from_this<TopicScan> {
  std::function<void(std::size_t, std::string_view, Callback<redis::Reply>)> scan_page;
  std::vector<std::size_t> nodes;  // the primaries when the scan began
  std::size_t node = 0;
  std::string prefix;
  std::vector<std::string> found;
  Callback<std::vector<std::string>> done;

  void next(std::string_view cursor) {
    scan_page(nodes[node], cursor, [self = shared_from_this()](Result<redis::Reply> r) {
      if (!r.ok()) return self->done(r.error());
      const Reply& page = r.value();
      if (page.type != Reply::Type::array || page.elements.size() != 2) {
        return self->done(Error(Errc::protocol, "unexpected SCAN reply"));
      }
      for (const auto& key : page.elements[1].elements) {
        auto topic = core::topic_of_key(self->prefix, key.str);
        // A shard is listed as the topic it is part of (whose meta is there).
        if (!topic.empty() && topic.find('~') == std::string_view::npos) {
          self->found.emplace_back(topic);
        }
      }
      if (page.elements[0].str != "0") return self->next(page.elements[0].str);
      if (++self->node < self->nodes.size()) return self->next("0");
      std::sort(self->found.begin(), self->found.end());
      self->found.erase(std::unique(self->found.begin(), self->found.end()), self->found.end());
      self->done(std::move(self->found));
    });
  }
};
}  // namespace

void Client::topics_async(Callback<std::vector<std::string>> done) try {
  auto scan = std::make_shared<TopicScan>();
  scan->prefix = impl_->opts.prefix;
  scan->done = std::move(done);
  const std::string pattern = impl_->opts.prefix + ":{*}:meta";
  scan->scan_page = [this, pattern](std::size_t node, std::string_view cursor, Callback<Reply> cb) {
    core::Command cmd;
    cmd.add("SCAN").add(cursor).add("MATCH").add(pattern).add("COUNT").add("1000").add("TYPE").add(
        "hash");
    impl_->call_node<Reply>(
        node, cmd, [](const Reply& r) { return r; }, std::move(cb));
  };
  // (primaries may answer inline: an answer without SCAN is posted.)
  impl_->link().primaries(impl_->counted([impl = impl_.get(), scan](
                                             std::error_code ec, std::vector<std::size_t> nodes) {
    // No map (closed, or no seed answered in time): no partial listing.
    if (ec) {
      return impl->answer_later(scan->done, Result<std::vector<std::string>>(core::error_from_link(
                                                ec, "no map of the cluster")));
    }
    if (nodes.empty()) {
      return impl->answer_later(scan->done,
                                Result<std::vector<std::string>>(std::vector<std::string>{}));
    }
    scan->nodes = std::move(nodes);
    scan->next("0");
  }));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(std::vector<std::string>, topics, (), (std::move(cb)))

Subscription Client::watch(std::string_view topic,
                           std::function<void(std::int64_t due_ms)> on_signal,
                           std::function<void()> on_ready) {
  core::check_topic(topic);
  auto w = std::make_shared<TopicWatch>(impl_->link(topic), impl_->opts.prefix, std::string(topic));
  w->on_signal = std::move(on_signal);
  w->on_ready = std::move(on_ready);
  w->read_layout = [impl = impl_.get(), t = std::string(topic)](Callback<core::LayoutPtr> done) {
    impl->read_layout(t, std::move(done));
  };
  w->start(impl_->cached_layout(topic));
  return Subscription([w] { w->cancel(); });
}

void Client::library_version_async(Callback<int> done) try {
  core::Command cmd;
  cmd.add("FCALL_RO").add("redisched_version").add("0");
  impl_->call<int>(
      "", cmd, [](const Reply& r) { return static_cast<int>(core::parse_integer(r)); },
      std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(int, library_version, (), (std::move(cb)))

std::int64_t Client::now_ms() {
  core::Command cmd;
  cmd.add("TIME");
  return wait_for<std::int64_t>(*impl_->runtime, [&](auto cb) {
    impl_->call<std::int64_t>(
        "", cmd,
        [](const Reply& r) {
          if (r.type != Reply::Type::array || r.elements.size() != 2) {
            throw Error(Errc::protocol, "unexpected TIME reply");
          }
          return std::stoll(r.elements[0].str) * 1000 + std::stoll(r.elements[1].str) / 1000;
        },
        std::move(cb));
  });
}

void Client::migrate_async(std::string_view topic, int limit, Callback<Migration> done) try {
  if (limit < 1 || limit > limits::kBatchMax) {
    throw Error(Errc::invalid_argument, "the migration's limit must be 1.." +
                                            std::to_string(limits::kBatchMax) + " records, got " +
                                            std::to_string(limit));
  }
  core::check_topic(topic);
  impl_->with_layout<Migration>(topic, std::move(done),
                                [impl = impl_.get(), limit](const core::LayoutPtr& l, auto then) {
                                  impl->migrate_layout(l, limit, std::move(then));
                                });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(Migration, migrate, (std::string_view topic, int limit),
               (topic, limit, std::move(cb)))

// ---------------------------------------------------------------- shards

namespace {
std::vector<std::string> shard_topics(const core::LayoutPtr& l) { return l->shards; }
}  // namespace

void Client::shards_async(std::string_view topic, Callback<std::vector<std::string>> done) try {
  core::check_topic(topic);
  impl_->read_layout(std::string(topic), [done = std::move(done)](Result<core::LayoutPtr> l) {
    if (!l.ok()) return done(l.error());
    done(shard_topics(l.value()));
  });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(std::vector<std::string>, shards, (std::string_view topic), (topic, std::move(cb)))

// Changing the shards, in steps that each leave the topic usable: the old
// shards are closed ("*": each refuses if it holds a job), the new ones
// opened (names may come back after the topic was unspread), and then the
// topic names them. A client still putting by the old list meets SHARDED
// and reads the new one, so no job is left where no one looks. A step that
// fails opens the old shards again (opening is idempotent) and says why.
namespace {
template <class Impl>
struct Reshard : std::enable_shared_from_this<Reshard<Impl>> {
  using std::enable_shared_from_this<Reshard<Impl>>::shared_from_this;
  Impl* impl = nullptr;
  std::string base;
  core::LayoutPtr old, next;
  Callback<std::vector<std::string>> done;

  // What one topic said: its refusal (Errc::ok: none).
  struct Said {
    Errc code = Errc::ok;
    std::string what;
  };

  // redisched_shard with words on each topic of l; then(what each said).
  template <class Then>
  void on_each(const core::LayoutPtr& l, std::vector<std::string> words, Then then) {
    impl->template each_shard<Said>(
        l, Callback<std::vector<Said>>([then](Result<std::vector<Said>> r) { then(r.value()); }),
        [impl = impl, words](const std::string& where, Callback<Said> said) {
          impl->template send<op::Shard>(where, {words}, [said = std::move(said)](Result<int> r) {
            said(r.ok() ? Said{} : Said{r.error().code(), r.error().what()});
          });
        },
        [](std::vector<Said> all) { return all; });
  }

  static std::string refused(const core::LayoutPtr& l, const std::vector<Said>& said) {
    std::string out;
    for (std::size_t i = 0; i < said.size(); ++i) {
      if (said[i].code != Errc::ok) out += "; " + l->shards[i] + ": " + said[i].what;
    }
    return out;
  }

  // The first refusal's code (a shard that holds jobs: conflict).
  static Errc first_code(const std::vector<Said>& said) {
    for (const auto& s : said) {
      if (s.code != Errc::ok) return s.code;
    }
    return Errc::ok;
  }

  void fail(Errc code, const std::string& why) {
    if (!old->spread()) return done(Error(code, why));
    on_each(old, {}, [self = shared_from_this(), code, why](const std::vector<Said>& said) {
      self->done(Error(code, why + (self->refused(self->old, said).empty()
                                        ? ""
                                        : " (and the old shards could not all be opened again" +
                                              self->refused(self->old, said) + ")")));
    });
  }

  void start() {
    if (!old->spread()) return open_new();
    on_each(old, {"*"}, [self = shared_from_this()](const std::vector<Said>& said) {
      const auto why = self->refused(self->old, said);
      if (!why.empty()) {
        return self->fail(first_code(said), "the topic's shards must hold no jobs to change" + why);
      }
      self->open_new();
    });
  }

  void open_new() {
    if (!next->spread()) return name();
    on_each(next, {}, [self = shared_from_this()](const std::vector<Said>& said) {
      const auto why = self->refused(self->next, said);
      if (!why.empty())
        return self->fail(first_code(said), "the new shards could not be opened" + why);
      self->name();
    });
  }

  void name() {
    impl->template send<op::Shard>(
        base, {next->suffixes}, [self = shared_from_this()](Result<int> r) {
          if (!r.ok()) return self->fail(r.error().code(), r.error().what());
          self->impl->read_layout(self->base, [self](Result<core::LayoutPtr> l) {
            if (!l.ok()) return self->done(l.error());
            self->done(shard_topics(l.value()));
          });
        });
  }
};
}  // namespace

void Client::set_shards_async(std::string_view topic, int n,
                              Callback<std::vector<std::string>> done) try {
  core::check_topic(topic);
  if (n < 1 || n > core::kShardsMax) {
    throw Error(Errc::invalid_argument,
                "shards must be from 1 to " + std::to_string(core::kShardsMax));
  }
  auto job = std::make_shared<Reshard<Impl>>();
  job->impl = impl_.get();
  job->base = std::string(topic);
  job->done = std::move(done);
  impl_->read_layout(job->base, [job, n](Result<core::LayoutPtr> r) {
    if (!r.ok()) return job->done(r.error());
    job->old = r.value();
    if (static_cast<int>(job->old->shards.size()) == n || (n == 1 && !job->old->spread())) {
      return job->done(shard_topics(job->old));
    }
    job->next = std::make_shared<const core::Layout>(
        job->base,
        n > 1 ? core::place_shards(job->base, core::shard_generation(job->old->suffixes) + 1, n)
              : std::vector<std::string>{});
    job->start();
  });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(std::vector<std::string>, set_shards, (std::string_view topic, int n),
               (topic, n, std::move(cb)))

// ---------------------------------------------------------------- wait

void Client::wait_async(std::string_view topic, std::string_view id, Millis timeout,
                        Callback<std::optional<Job>> done) try {
  core::check_topic(topic);
  core::check_id(id);
  if (timeout.count() < 0) throw Error(Errc::invalid_argument, "timeout must not be negative");
  // The layout read afresh (a wait is long; one read more is nothing): its
  // subscription must be on the channel of the shard that holds the job now.
  impl_->read_layout(
      std::string(topic), [this, topic = std::string(topic), id = std::string(id), timeout,
                           done = std::move(done)](Result<core::LayoutPtr> l) mutable {
        if (!l.ok()) return done(l.error());
        impl_->start_wait(*this, topic, l.value()->topic_for(id), id, timeout, std::move(done));
      });
} catch (const Error& e) {
  impl_->refuse(done, e);
}

// The wait itself, listening where the job is (its topic, or its shard).
void Client::Impl::start_wait(Client& client, const std::string& topic, const std::string& where,
                              const std::string& id, Millis timeout,
                              Callback<std::optional<Job>> done) {
  auto& link = this->link(where);
  auto w =
      std::make_shared<Waiter>(shard_io(*runtime, runtime->shard_of(where)), client, topic, id);
  w->done = std::move(done);
  w->link = &link;
  bool ended = false;  // end_waits came first: the wait answers at once
  {
    std::lock_guard lock(waiters_mu);
    waiters.insert(w);
    ended = waits_ended;
  }
  w->forget = [impl = this](const std::shared_ptr<Waiter>& self) {
    std::lock_guard lock(impl->waiters_mu);
    impl->waiters.erase(self);
  };
  std::weak_ptr<Waiter> weak = w;
  const auto sub = link.subscribe(
      core::finished_channel(opts.prefix, where),
      [weak](const std::string& payload) {
        if (auto self = weak.lock()) self->message(payload);
      },
      [weak] {
        if (auto self = weak.lock()) self->check();
      });
  std::lock_guard lock(w->mu);
  w->subscription = sub;
  if (w->ended) {
    link.unsubscribe(sub);
    return;
  }
  w->timer.expires_after(ended ? Millis{0} : timeout);
  w->timer.async_wait([weak](boost::system::error_code ec) {
    if (ec) return;
    if (auto self = weak.lock()) self->expire();
  });
}

void Client::end_waits() {
  std::vector<std::shared_ptr<Waiter>> waiting;
  {
    std::lock_guard lock(impl_->waiters_mu);
    impl_->waits_ended = true;
    waiting.assign(impl_->waiters.begin(), impl_->waiters.end());
  }
  for (const auto& w : waiting) w->expire();
}

REDISCHED_WRAP(std::optional<Job>, wait,
               (std::string_view topic, std::string_view id, Millis timeout),
               (topic, id, timeout, std::move(cb)))

#undef REDISCHED_WRAP

}  // namespace redisched
