#include "redisched/client.h"

#include <atomic>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/steady_timer.hpp>
#include <charconv>

#include "core/client_access.h"
#include "core/client_impl.h"
#include "core/client_wrap.h"
#include "core/keys.h"
#include "core/text.h"
#include "redisched/limits.h"

namespace redisched {

// One Client::wait: listens on the topic's finished channel, reads the job
// when it is named (and once the subscription is in place, which covers a
// job that finished before), and answers once it has finished, is gone, or
// the timeout passed. It lives on one runtime shard, the one its link
// answers on: its subscription, timer and reads all run on that thread, so
// it takes no lock. It touches the Client only through the gate.
struct Client::Impl::Waiter : std::enable_shared_from_this<Waiter> {
  Waiter(Client::Impl& owner, std::size_t on_shard, std::string topic_name, std::string shard_topic,
         std::string job_id, Callback<std::optional<Job>> answer)
      : impl(owner),
        state(owner.shard_state),
        shard(on_shard),
        topic(std::move(topic_name)),
        where(std::move(shard_topic)),
        id(std::move(job_id)),
        done(std::move(answer)),
        timer(shard_io(*owner.runtime, on_shard)) {}

  Client::Impl& impl;
  std::shared_ptr<ShardState> state;
  std::size_t shard;
  std::string topic, where, id;  // where: the topic or shard that holds the job
  Callback<std::optional<Job>> done;
  asio::steady_timer timer;
  std::optional<std::uint64_t> subscription;
  bool ended = false;
  bool reading = false, read_again = false, timed_out = false;

  void start(Millis timeout) {
    const Gate::Pass pass(state->gate);
    if (!pass) return end(Error(Errc::closed, "the client is closed"));
    state->waits[shard].insert_or_assign(this, weak_from_this());
    std::weak_ptr<Waiter> weak = shared_from_this();
    subscription = impl.link(where).subscribe(
        core::finished_channel(impl.opts.prefix, where),
        [weak](const std::string& payload) {
          if (auto self = weak.lock()) self->message(payload);
        },
        [weak] {
          if (auto self = weak.lock()) self->check();
        });
    // (end_waits came first: the wait answers at once.)
    timer.expires_after(state->waits_ended.load() ? Millis{0} : timeout);
    timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (!ec) self->expire();
    });
  }

  // A read of the job; one at a time, another one after it when asked for
  // meanwhile.
  void check() {
    if (ended) return;
    if (reading) {
      read_again = true;
      return;
    }
    const Gate::Pass pass(state->gate);
    if (!pass) return end(Error(Errc::closed, "the client is closed"));
    reading = true;
    impl.run<op::Get>(topic, {id}, [self = shared_from_this()](Result<std::optional<Job>> r) {
      self->checked(std::move(r));
    });
  }

  void checked(Result<std::optional<Job>> r) {
    reading = false;
    if (ended) return;
    const bool over = !r.ok() || !r.value() || r.value()->state == JobState::done ||
                      r.value()->state == JobState::dead || timed_out;
    if (over) return end(std::move(r));
    if (std::exchange(read_again, false)) check();
  }

  // The timeout: one last read, whose answer is the job as it is.
  void expire() {
    if (ended) return;
    timed_out = true;
    check();
  }

  void message(const std::string& payload) {
    for (std::size_t at = 0; at <= payload.size();) {
      const std::size_t end = std::min(payload.find('\n', at), payload.size());
      if (std::string_view(payload).substr(at, end - at) == id) return check();
      at = end + 1;
    }
  }

  void end(Result<std::optional<Job>> r) {
    if (ended) return;
    ended = true;
    timer.cancel();
    if (subscription) {
      // (A closed gate: the Client closed its links, and they end with it.)
      const Gate::Pass pass(state->gate);
      if (pass) impl.link(where).unsubscribe(*subscription);
    }
    state->waits[shard].erase(this);
    if (done) std::exchange(done, nullptr)(std::move(r));
  }
};

// One Client::watch or watch_reports: one of a topic's channels (its wake
// or its reports channel), or those of its shards while it is spread, and
// its meta channel, where a change of its shards is announced ("~shards"):
// then the list is read again (as on each reconnection of the meta
// channel), the shards' channels taken anew, and on_ready runs once all
// are in place (messages may have been missed: look again). It lives on
// one runtime shard, the one its link answers on; only cancel comes from
// any thread, and hands the unsubscribing to that shard.
struct Client::Impl::TopicWatch : std::enable_shared_from_this<TopicWatch> {
  TopicWatch(Client::Impl& owner, std::size_t on_shard, std::string name, TopicWatchChannel of)
      : impl(owner),
        state(owner.shard_state),
        shard(on_shard),
        topic(std::move(name)),
        channel_of(of) {}

  Client::Impl& impl;
  std::shared_ptr<ShardState> state;
  std::size_t shard;
  std::string topic;
  TopicWatchChannel channel_of;
  std::function<void(const std::string& payload)> on_message;
  std::function<void()> on_ready;

  std::atomic<bool> cancelled{false};  // cancel's: no callback starts after it
  // Touched only on the shard's thread:
  std::optional<std::uint64_t> meta;
  std::vector<std::string> watching;         // the topics whose channels are taken
  std::vector<std::uint64_t> subscriptions;  // theirs, in that order

  void start() {
    const Gate::Pass pass(state->gate);
    if (!pass || cancelled.load()) return;
    std::weak_ptr<TopicWatch> weak = shared_from_this();
    meta = impl.link(topic).subscribe(
        core::schedules_channel(impl.opts.prefix, topic),
        [weak](const std::string& payload) {
          if (auto self = weak.lock(); self && payload == "~shards") self->refresh();
        },
        [weak] {  // (a change announced while the link was down was missed)
          if (auto self = weak.lock(); self) self->refresh();
        });
    // (A layout not read yet is read once the meta channel is taken: no
    // channel is followed on a guess.)
    if (auto known = impl.cached_layout(topic)) follow(known);
  }

  void refresh() {
    const Gate::Pass pass(state->gate);
    if (!pass || cancelled.load()) return;
    impl.read_layout(topic, [weak = weak_from_this()](Result<core::LayoutPtr> l) {
      // (A failed read: the next reconnection's on_ready reads again.)
      if (auto self = weak.lock(); self && l.ok()) self->follow(l.value());
    });
  }

  void follow(const core::LayoutPtr& l) {
    const Gate::Pass pass(state->gate);
    if (!pass || cancelled.load()) return;
    std::vector<std::string> want = l->spread() ? l->shards : std::vector<std::string>{topic};
    if (want == watching) return;
    auto& link = impl.link(topic);
    for (auto id : subscriptions) link.unsubscribe(id);
    subscriptions.clear();
    watching = std::move(want);
    std::weak_ptr<TopicWatch> weak = shared_from_this();
    // on_ready once every channel of this list is taken; after that, on
    // each reconnection of one. (Callbacks run on this shard's thread.)
    auto waiting = std::make_shared<std::size_t>(watching.size());
    for (const auto& t : watching) {
      subscriptions.push_back(link.subscribe(
          channel_of(impl.opts.prefix, t),
          [weak](const std::string& payload) {
            if (auto self = weak.lock(); self && !self->cancelled.load()) self->on_message(payload);
          },
          [weak, waiting, first = std::make_shared<bool>(true)] {
            if (std::exchange(*first, false) && --*waiting > 0) return;
            if (auto self = weak.lock(); self && self->on_ready && !self->cancelled.load()) {
              self->on_ready();
            }
          }));
    }
  }

  void cancel() {
    cancelled.store(true);
    asio::dispatch(shard_io(*impl.runtime, shard), [self = shared_from_this()] {
      // (A closed gate: the Client closed its links, and they end with it.)
      const Gate::Pass pass(self->state->gate);
      if (!pass) return;
      auto& link = self->impl.link(self->topic);
      for (auto id : self->subscriptions) link.unsubscribe(id);
      if (self->meta) link.unsubscribe(*self->meta);
      self->subscriptions.clear();
      self->meta.reset();
    });
  }
};

void Client::Impl::each_wait(const std::function<void(Waiter&)>& f) {
  for (std::size_t i = 0; i < shard_state->waits.size(); ++i) {
    asio::post(shard_io(*runtime, i), [l = shard_state, i, f] {
      std::vector<std::shared_ptr<Waiter>> waiting;
      for (const auto& [_, weak] : l->waits[i]) {
        if (auto w = weak.lock()) waiting.push_back(std::move(w));
      }
      for (const auto& w : waiting) f(*w);
    });
  }
}

void Client::Impl::close_shard_state() {
  shard_state->gate.close();
  each_wait([](Waiter& w) { w.end(Error(Errc::closed, "the client is closed")); });
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
  close_shard_state();
  for (auto& l : links_) l->close();
  wait_for_calls(opts.command_timeout);
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

void Client::get_async(std::string_view topic, std::string_view id, bool with_body,
                       Callback<std::optional<Job>> done) {
  impl_->run<op::Get>(topic, {std::string(id), with_body}, std::move(done));
}
REDISCHED_WRAP(std::optional<Job>, get,
               (std::string_view topic, std::string_view id, bool with_body),
               (topic, id, with_body, std::move(cb)))

void Client::get_with_dependencies_async(std::string_view topic, std::string_view id,
                                         Callback<std::optional<Job>> done) {
  impl_->run<op::Get>(topic, {std::string(id), true, true}, std::move(done));
}
REDISCHED_WRAP(std::optional<Job>, get_with_dependencies,
               (std::string_view topic, std::string_view id), (topic, id, std::move(cb)))

void Client::batch_async(std::string_view topic, std::string_view id, const BatchChange& change,
                         Callback<Job> done) {
  impl_->run<op::Batch>(topic, {std::string(id), change}, std::move(done));
}
REDISCHED_WRAP(Job, batch, (std::string_view topic, std::string_view id, const BatchChange& change),
               (topic, id, change, std::move(cb)))

void Client::reschedule_async(std::string_view topic, std::string_view id,
                              const RescheduleOptions& change, Callback<Outcome> done) {
  impl_->run<op::Reschedule>(topic, {std::string(id), change}, std::move(done));
}
REDISCHED_WRAP(Outcome, reschedule,
               (std::string_view topic, std::string_view id, const RescheduleOptions& change),
               (topic, id, change, std::move(cb)))

void Client::history_async(std::string_view topic, HistoryStep step, std::int64_t from_ms,
                           std::int64_t to_ms, Callback<std::vector<HistoryRow>> done) {
  impl_->run<op::History>(topic, {step, from_ms, to_ms}, std::move(done));
}
REDISCHED_WRAP(std::vector<HistoryRow>, history,
               (std::string_view topic, HistoryStep step, std::int64_t from_ms, std::int64_t to_ms),
               (topic, step, from_ms, to_ms, std::move(cb)))

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
  impl_->run<op::Reserve>(topic, {count, ttr, {}}, std::move(done));
}
REDISCHED_WRAP(ReserveResult, reserve, (std::string_view topic, int count, Millis ttr),
               (topic, count, ttr, std::move(cb)))

void Client::reserve_async(std::string_view topic, const ReserveOptions& options,
                           Callback<ReserveResult> done) {
  impl_->run<op::Reserve>(topic, ReserveOptions(options), std::move(done));
}
REDISCHED_WRAP(ReserveResult, reserve, (std::string_view topic, const ReserveOptions& options),
               (topic, options, std::move(cb)))

void Client::reserve_job_async(std::string_view topic, std::string_view id, Millis ttr,
                               std::string_view worker, Callback<ReserveJobResult> done) {
  impl_->run<op::ReserveJob>(topic, {std::string(id), ttr, std::string(worker)}, std::move(done));
}
REDISCHED_WRAP(ReserveJobResult, reserve_job,
               (std::string_view topic, std::string_view id, Millis ttr, std::string_view worker),
               (topic, id, ttr, worker, std::move(cb)))

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

void detail::ClientAccess::ack_forwarding(Client& client, std::string_view topic,
                                          std::string_view id, std::uint64_t token, Millis keep,
                                          std::string result, Callback<Outcome> done) {
  op::Ack::Args a{{std::string(id), token}, keep, std::move(result)};
  a.forward = true;
  client.impl_->run<op::Ack>(topic, a, std::move(done));
}

// Two calls, in this order: a block is named before any of its ids is
// given out, so a block without a name was never used (a crash between
// the two loses its ids, no more).
void detail::ClientAccess::take_id_block(Client& client, std::string_view topic,
                                         Callback<std::uint64_t> done) try {
  core::check_topic(topic);
  auto& impl = *client.impl_;
  const auto keys = core::id_block_keys(impl.opts.prefix);
  core::Command incr;
  incr.add("INCR").add(keys[0]);
  impl.call<std::int64_t>(
      keys[0], incr, [](const Reply& r) { return core::parse_integer(r); },
      [&impl, keys, topic = std::string(topic),
       done = std::move(done)](Result<std::int64_t> block) mutable {
        if (!block.ok()) return done(block.error());
        const auto b = block.value();
        core::Command name;
        name.add("HSET").add(keys[1]).add(b).add(topic);
        impl.call<std::uint64_t>(
            keys[1], name, [b](const Reply&) { return static_cast<std::uint64_t>(b); },
            std::move(done));
      });
} catch (const Error& e) {
  client.impl_->refuse(done, e);
}

void detail::ClientAccess::id_block_topic(Client& client, std::uint64_t block,
                                          Callback<std::string> done) {
  auto& impl = *client.impl_;
  const auto keys = core::id_block_keys(impl.opts.prefix);
  core::Command get;
  get.add("HGET").add(keys[1]).add(static_cast<std::int64_t>(block));
  impl.call<std::string>(
      keys[1], get, [](const Reply& r) { return r.is_nil() ? std::string() : r.str; },
      std::move(done));
}

bool detail::ClientAccess::short_of_replicas(const Error& e) {
  return core::word_of(e) == core::Word::short_of_replicas;
}

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
                           Millis delay, std::optional<std::int64_t> priority,
                           Callback<Outcome> done) {
  impl_->run<op::Release>(topic, {{std::string(id), token}, delay, priority}, std::move(done));
}
REDISCHED_WRAP(Outcome, release,
               (std::string_view topic, std::string_view id, std::uint64_t token, Millis delay,
                std::optional<std::int64_t> priority),
               (topic, id, token, delay, priority, std::move(cb)))

void Client::fail_async(std::string_view topic, std::string_view id, std::uint64_t token,
                        std::string_view error, bool bury, std::optional<Millis> retry_delay,
                        std::optional<int> max_attempts, Callback<FailResult> done) {
  impl_->run<op::Fail>(
      topic, {{std::string(id), token}, std::string(error), bury, retry_delay, max_attempts},
      std::move(done));
}
void detail::ClientAccess::bury(Client& client, std::string_view topic, std::string_view id,
                                std::uint64_t token, std::string_view error, std::int64_t priority,
                                Callback<FailResult> done) {
  op::Fail::Args a{{std::string(id), token}, std::string(error), true, std::nullopt, std::nullopt};
  a.priority = priority;
  client.impl_->run<op::Fail>(topic, a, std::move(done));
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

void Client::report_async(std::string_view topic, std::string_view id, std::uint64_t token,
                          const JobReport& report, Callback<Outcome> done) {
  impl_->run<op::Report>(topic, {{std::string(id), token}, report}, std::move(done));
}
REDISCHED_WRAP(Outcome, report,
               (std::string_view topic, std::string_view id, std::uint64_t token,
                const JobReport& report),
               (topic, id, token, report, std::move(cb)))

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

void Client::remove_many_async(std::string_view topic, std::span<const std::string> ids,
                               Callback<int> done) {
  impl_->run<op::DeleteMany>(topic, {{ids.begin(), ids.end()}}, std::move(done));
}
REDISCHED_WRAP(int, remove_many, (std::string_view topic, std::span<const std::string> ids),
               (topic, ids, std::move(cb)))

void Client::kick_all_async(std::string_view topic, int limit, Callback<int> done) {
  impl_->run<op::KickAll>(topic, {limit}, std::move(done));
}
REDISCHED_WRAP(int, kick_all, (std::string_view topic, int limit), (topic, limit, std::move(cb)))

void Client::promote_async(std::string_view topic, std::span<const std::string> ids,
                           Callback<int> done) {
  impl_->run<op::Promote>(topic, {{ids.begin(), ids.end()}}, std::move(done));
}
REDISCHED_WRAP(int, promote, (std::string_view topic, std::span<const std::string> ids),
               (topic, ids, std::move(cb)))

void Client::promote_all_async(std::string_view topic, int limit, Callback<BatchResult> done) {
  impl_->run<op::PromoteAll>(topic, {limit}, std::move(done));
}
REDISCHED_WRAP(BatchResult, promote_all, (std::string_view topic, int limit),
               (topic, limit, std::move(cb)))

void Client::purge_dead_async(std::string_view topic, std::int64_t before_ms, int limit,
                              Callback<BatchResult> done) {
  impl_->run<op::Purge>(topic, {before_ms, limit}, std::move(done));
}
REDISCHED_WRAP(BatchResult, purge_dead, (std::string_view topic, std::int64_t before_ms, int limit),
               (topic, before_ms, limit, std::move(cb)))

void Client::pause_async(std::string_view topic, Callback<bool> done) {
  impl_->run<op::Pause>(topic, {}, std::move(done));
}
REDISCHED_WRAP(bool, pause, (std::string_view topic), (topic, std::move(cb)))

void Client::pause_async(std::string_view topic, Millis duration, Callback<bool> done) {
  impl_->run<op::Pause>(topic, {duration}, std::move(done));
}
REDISCHED_WRAP(bool, pause, (std::string_view topic, Millis duration),
               (topic, duration, std::move(cb)))

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
// A SCAN over every topic's key of one name on every node of the link, one
// page at a time; done gets the sorted topics.
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

namespace {
// The topics that hold a key of that name and type (a shard's: the topic
// it is part of), by a SCAN on every primary. (Impl: Client::Impl.)
template <class Impl>
void scan_topics(Impl& impl, std::string_view name, std::string_view type,
                 Callback<std::vector<std::string>> done) try {
  auto scan = std::make_shared<TopicScan>();
  scan->prefix = impl.opts.prefix;
  scan->done = std::move(done);
  const std::string pattern = impl.opts.prefix + ":{*}:" + std::string(name);
  scan->scan_page = [&impl, pattern, type = std::string(type)](
                        std::size_t node, std::string_view cursor, Callback<Reply> cb) {
    core::Command cmd;
    cmd.add("SCAN").add(cursor).add("MATCH").add(pattern).add("COUNT").add("1000").add("TYPE").add(
        type);
    impl.template call_node<Reply>(
        node, cmd, [](const Reply& r) { return r; }, std::move(cb));
  };
  [[maybe_unused]] const Sending sending;
  impl.link().primaries(impl.counted([scan](std::error_code ec, std::vector<std::size_t> nodes) {
    // No map (closed, or no seed answered in time): no partial listing.
    if (ec) return scan->done(core::error_from_link(ec, "no map of the cluster"));
    if (nodes.empty()) return scan->done(std::vector<std::string>{});
    scan->nodes = std::move(nodes);
    scan->next("0");
  }));
} catch (const Error& e) {
  impl.refuse(done, e);
}
}  // namespace

void Client::topics_async(Callback<std::vector<std::string>> done) {
  scan_topics(*impl_, "meta", "hash", std::move(done));
}
REDISCHED_WRAP(std::vector<std::string>, topics, (), (std::move(cb)))

void Client::outbox_topics_async(Callback<std::vector<std::string>> done) {
  // (redisched_moved deletes an outbox it empties: one there holds entries)
  scan_topics(*impl_, "outbox", "stream", std::move(done));
}
REDISCHED_WRAP(std::vector<std::string>, outbox_topics, (), (std::move(cb)))

namespace {
// HSCAN over a topic's jobs hash (each shard's in turn, for a spread topic)
// for the ids that match a pattern, until a page holds count of them or
// its scan took 10 steps (of COUNT count, at least 100).
struct IdScan : std::enable_shared_from_this<IdScan> {
  std::function<void(std::size_t, std::string_view, Callback<redis::Reply>)> scan_page;
  std::size_t shards = 1;
  std::size_t shard = 0;
  std::string cursor = "0";
  std::size_t count = 0;
  int steps = 10;
  IdPage out;
  Callback<IdPage> done;

  void next() {
    scan_page(shard, cursor, [self = shared_from_this()](Result<redis::Reply> r) {
      if (!r.ok()) return self->done(r.error());
      const Reply& page = r.value();
      if (page.type != Reply::Type::array || page.elements.size() != 2) {
        return self->done(Error(Errc::protocol, "unexpected HSCAN reply"));
      }
      const auto& pairs = page.elements[1].elements;  // id, record, id, record, ...
      for (std::size_t i = 0; i < pairs.size(); i += 2) self->out.ids.push_back(pairs[i].str);
      self->cursor = page.elements[0].str;
      if (self->cursor == "0" && ++self->shard < self->shards) self->cursor = "0";
      if (self->shard == self->shards) return self->done(std::move(self->out));
      if (self->out.ids.size() < self->count && --self->steps > 0) return self->next();
      self->out.cursor = std::to_string(self->shard) + ':' + self->cursor;
      self->done(std::move(self->out));
    });
  }
};

// "<shard>:<HSCAN cursor>", as IdScan gives it; "" is the start.
std::pair<std::size_t, std::string> parse_id_cursor(std::string_view cursor) {
  if (cursor.empty()) return {0, "0"};
  const auto colon = cursor.find(':');
  const auto digits = [](std::string_view d) {  // (a number that fits 64 bits)
    std::uint64_t n = 0;
    const auto [end, ec] = std::from_chars(d.data(), d.data() + d.size(), n);
    return !d.empty() && ec == std::errc() && end == d.data() + d.size();
  };
  if (colon == std::string_view::npos || colon > 3 || !digits(cursor.substr(0, colon)) ||
      !digits(cursor.substr(colon + 1))) {
    throw Error(Errc::invalid_argument,
                "not a cursor of find_ids: '" + core::printable(cursor.substr(0, 40)) + "'");
  }
  return {std::stoul(std::string(cursor.substr(0, colon))), std::string(cursor.substr(colon + 1))};
}

// prefix as a MATCH pattern: itself, its glob characters escaped, then '*'.
std::string prefix_pattern(std::string_view prefix) {
  std::string pattern;
  for (char c : prefix) {
    if (c == '*' || c == '?' || c == '[' || c == ']' || c == '\\') pattern += '\\';
    pattern += c;
  }
  return pattern + '*';
}
}  // namespace

void Client::find_ids_async(std::string_view topic, std::string_view prefix,
                            std::string_view cursor, int count, Callback<IdPage> done) try {
  core::check_topic(topic);
  if (prefix.size() > static_cast<std::size_t>(limits::kIdMax)) {
    throw Error(Errc::invalid_argument,
                "a prefix is an id's start: at most " + std::to_string(limits::kIdMax) + " bytes");
  }
  if (count < 1 || count > limits::kBatchMax) {
    throw Error(Errc::invalid_argument, "count must be 1.." + std::to_string(limits::kBatchMax) +
                                            ", got " + std::to_string(count));
  }
  const auto [shard, at] = parse_id_cursor(cursor);
  // (The scan is made in the body: held by it, the scan would hold its own
  // callback, which holds the body.)
  auto scan_in = [impl = impl_.get(), shard = shard, at = at,
                  count = static_cast<std::size_t>(count), pattern = prefix_pattern(prefix)](
                     const core::LayoutPtr& l, Callback<IdPage> then) {
    const std::vector<std::string> where =
        l->spread() ? l->shards : std::vector<std::string>{l->topic};
    if (shard >= where.size()) {
      return then(Error(Errc::invalid_argument, "the cursor names a shard the topic lacks"));
    }
    auto scan = std::make_shared<IdScan>();
    scan->shard = shard;
    scan->cursor = at;
    scan->count = count;
    scan->shards = where.size();
    scan->done = std::move(then);
    scan->scan_page = [impl, where, pattern, count](std::size_t i, std::string_view from,
                                                    Callback<Reply> cb) {
      core::Command cmd;
      std::string key;
      core::append_topic_key(key, impl->opts.prefix, where[i], core::kKeyNames[0]);
      cmd.add("HSCAN").add_owned(std::move(key)).add(from).add("MATCH").add(pattern);
      cmd.add("COUNT").add_owned(std::to_string(std::max<std::size_t>(count, 100)));
      impl->call<Reply>(
          where[i], cmd, [](const Reply& r) { return r; }, std::move(cb));
    };
    scan->next();
  };
  if (!cursor.empty()) return impl_->with_layout<IdPage>(topic, std::move(done), scan_in);
  // The first page reads the topic's shards afresh: HSCAN, unlike the
  // library's calls, cannot say SHARDED when the topic was spread (or
  // spread again) since this client cached its layout.
  impl_->read_layout(std::string(topic),
                     [scan_in, done = std::move(done)](Result<core::LayoutPtr> l) mutable {
                       if (!l.ok()) return done(l.error());
                       scan_in(l.value(), std::move(done));
                     });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(IdPage, find_ids,
               (std::string_view topic, std::string_view prefix, std::string_view cursor,
                int count),
               (topic, prefix, cursor, count, std::move(cb)))

namespace {
// INFO, then CLIENT INFO (for the node's address), of each node in turn.
struct NodeWalk : std::enable_shared_from_this<NodeWalk> {
  std::function<void(std::size_t, std::string_view, Callback<redis::Reply>)> ask;
  std::vector<std::size_t> nodes;
  std::vector<RedisNode> found;
  Callback<std::vector<RedisNode>> done;

  void next() {
    if (found.size() == nodes.size()) return done(std::move(found));
    const std::size_t node = nodes[found.size()];
    ask(node, "INFO", [self = shared_from_this(), node](Result<redis::Reply> info) {
      if (!info.ok()) return self->done(info.error());
      self->ask(node, "CLIENT INFO",
                [self, text = std::move(info.value().str)](Result<redis::Reply> me) {
                  if (!me.ok()) return self->done(me.error());
                  // "id=7 addr=127.0.0.1:50000 laddr=127.0.0.1:6379 ..."
                  std::string address;
                  const std::string& line = me.value().str;
                  if (auto at = line.find(" laddr="); at != std::string::npos) {
                    address = line.substr(at + 7, line.find(' ', at + 7) - at - 7);
                  }
                  // A unix socket's is its path and ":0".
                  if (address.starts_with('/') && address.ends_with(":0"))
                    address.resize(address.size() - 2);
                  self->found.push_back({std::move(address), text});
                  self->next();
                });
    });
  }
};
}  // namespace

void Client::redis_nodes_async(Callback<std::vector<RedisNode>> done) try {
  auto walk = std::make_shared<NodeWalk>();
  walk->done = std::move(done);
  walk->ask = [this](std::size_t node, std::string_view words, Callback<Reply> cb) {
    core::Command cmd;
    for (auto w = words; !w.empty();) {
      const auto space = w.find(' ');
      cmd.add(w.substr(0, space));
      w = space == std::string_view::npos ? std::string_view{} : w.substr(space + 1);
    }
    impl_->call_node<Reply>(
        node, cmd, [](const Reply& r) { return r; }, std::move(cb));
  };
  [[maybe_unused]] const Sending sending;
  impl_->link().primaries(
      impl_->counted([walk](std::error_code ec, std::vector<std::size_t> nodes) {
        if (ec) return walk->done(core::error_from_link(ec, "no map of the cluster"));
        walk->nodes = std::move(nodes);
        walk->next();
      }));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(std::vector<RedisNode>, redis_nodes, (), (std::move(cb)))

Subscription Client::watch(std::string_view topic,
                           std::function<void(std::int64_t due_ms)> on_signal,
                           std::function<void()> on_ready) {
  return impl_->watch_topic(
      topic, &core::wake_channel,
      [on_signal = std::move(on_signal)](const std::string& payload) {
        std::int64_t due = 0;
        auto [end, ec] = std::from_chars(payload.data(), payload.data() + payload.size(), due);
        if (ec == std::errc() && end == payload.data() + payload.size()) on_signal(due);
      },
      std::move(on_ready));
}

Subscription Client::Impl::watch_topic(std::string_view topic, TopicWatchChannel channel_of,
                                       std::function<void(const std::string&)> on_message,
                                       std::function<void()> on_ready) {
  core::check_topic(topic);
  auto w = std::make_shared<TopicWatch>(*this, shard_for(topic), std::string(topic), channel_of);
  w->on_message = std::move(on_message);
  w->on_ready = std::move(on_ready);
  asio::dispatch(shard_io(*runtime, w->shard), [w] { w->start(); });
  return Subscription([w] { w->cancel(); });
}

Subscription Client::watch_sweep(std::function<void(const SweepSignal&)> on_signal,
                                 std::function<void()> on_ready) {
  auto& link = impl_->link("");
  const std::uint64_t id = link.subscribe(
      core::sweep_channel(impl_->opts.prefix),
      [on_signal = std::move(on_signal)](const std::string& message) {
        // "lapse <T> <deadline ms>", "schedules <T>" or "outbox <T>"; anything else is a
        // later version's, for others.
        const auto first = message.find(' ');
        if (first == std::string::npos) return;
        const std::string_view kind(message.data(), first);
        std::string_view rest = std::string_view(message).substr(first + 1);
        SweepSignal s;
        if (kind == "lapse") {
          const auto space = rest.find(' ');
          if (space == std::string_view::npos) return;
          const std::string_view at = rest.substr(space + 1);
          const auto [end, ec] = std::from_chars(at.data(), at.data() + at.size(), s.at_ms);
          if (ec != std::errc() || end != at.data() + at.size()) return;
          if (s.at_ms < 0 || s.at_ms > limits::kMsMax) return;  // no time the library writes
          rest = rest.substr(0, space);
        } else if (kind == "schedules") {
          s.kind = SweepSignal::Kind::schedules;
        } else if (kind == "outbox") {
          s.kind = SweepSignal::Kind::outbox;
        } else {
          return;
        }
        // A shard T~x of a spread topic stands for T. A name this Client
        // could not call (put by another client, or by hand) is dropped.
        s.topic = std::string(rest.substr(0, rest.find('~')));
        try {
          core::check_topic(s.topic);
        } catch (const Error&) {
          return;
        }
        on_signal(s);
      },
      std::move(on_ready));
  return Subscription([&link, id] { link.unsubscribe(id); });
}

Subscription Client::watch_outbox(std::string_view topic, std::function<void()> on_signal,
                                  std::function<void()> on_ready) {
  return impl_->watch_topic(
      topic, &core::outbox_channel,
      [on_signal = std::move(on_signal)](const std::string& /*"outbox"*/) { on_signal(); },
      std::move(on_ready));
}

Subscription Client::watch_reports(std::string_view topic,
                                   std::function<void(const std::string& id)> on_report,
                                   std::function<void()> on_ready) {
  return impl_->watch_topic(topic, &core::reports_channel, std::move(on_report),
                            std::move(on_ready));
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

// ---------------------------------------------------------------- workers

void Client::beat_async(const WorkerEntry& entry, Millis ttl, Callback<bool> done) {
  impl_->run<op::Beat>("", {entry, ttl}, std::move(done));
}
REDISCHED_WRAP(bool, beat, (const WorkerEntry& entry, Millis ttl), (entry, ttl, std::move(cb)))

void Client::leave_async(std::string_view worker_id, Callback<bool> done) {
  impl_->run<op::Leave>("", {std::string(worker_id)}, std::move(done));
}
REDISCHED_WRAP(bool, leave, (std::string_view worker_id), (worker_id, std::move(cb)))

void Client::workers_async(Callback<std::vector<WorkerEntry>> done) {
  impl_->run<op::Workers>("", {}, std::move(done));
}
REDISCHED_WRAP(std::vector<WorkerEntry>, workers, (), (std::move(cb)))

void Client::now_ms_async(Callback<std::int64_t> done) try {
  core::Command cmd;
  cmd.add("TIME");
  impl_->call<std::int64_t>(
      "", cmd,
      [](const Reply& r) {
        if (r.type != Reply::Type::array || r.elements.size() != 2) {
          throw Error(Errc::protocol, "unexpected TIME reply");
        }
        return std::stoll(r.elements[0].str) * 1000 + std::stoll(r.elements[1].str) / 1000;
      },
      std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(std::int64_t, now_ms, (), (std::move(cb)))

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
      std::string(topic), [impl = impl_.get(), topic = std::string(topic), id = std::string(id),
                           timeout, done = std::move(done)](Result<core::LayoutPtr> l) mutable {
        if (!l.ok()) return done(l.error());
        impl->start_wait(topic, l.value()->topic_for(id), id, timeout, std::move(done));
      });
} catch (const Error& e) {
  impl_->refuse(done, e);
}

// The wait itself, listening where the job is (its topic, or its shard),
// on the shard whose link answers there.
void Client::Impl::start_wait(const std::string& topic, const std::string& where,
                              const std::string& id, Millis timeout,
                              Callback<std::optional<Job>> done) {
  const std::size_t shard = shard_for(where);
  auto w = std::make_shared<Waiter>(*this, shard, topic, where, id, std::move(done));
  asio::dispatch(shard_io(*runtime, shard), [w, timeout] { w->start(timeout); });
}

void Client::end_waits() {
  impl_->shard_state->waits_ended.store(true);
  impl_->each_wait([](Impl::Waiter& w) { w.expire(); });
}

REDISCHED_WRAP(std::optional<Job>, wait,
               (std::string_view topic, std::string_view id, Millis timeout),
               (topic, id, timeout, std::move(cb)))

#undef REDISCHED_WRAP

}  // namespace redisched
