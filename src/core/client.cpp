#include "redisched/client.h"

#include <boost/asio/steady_timer.hpp>
#include <charconv>

#include "core/client_impl.h"
#include "core/keys.h"

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

}  // namespace client_detail

Client::Impl::~Impl() {
  // Waits end with Errc::closed, then calls in flight. A runtime of the
  // Client's own runs their callbacks before it ends; a shared one runs
  // them later.
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
      asio::post(runtime->shard(0), [done = std::exchange(w->done, nullptr)] {
        done(Error(Errc::closed, "the client is closed"));
      });
    }
  }
  for (auto& l : links_) l->close();
  links_.clear();
  runtime.reset();
}

Client::Client(ClientOptions options) : Client(std::move(options), nullptr) {}

Client::Client(ClientOptions options, std::unique_ptr<redis::Link> link)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(link))) {
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

const ClientOptions& Client::options() const noexcept { return impl_->opts; }

Runtime& Client::runtime() noexcept { return *impl_->runtime; }

void Client::validate_topic(std::string_view topic) { core::check_topic(topic); }

// ---------------------------------------------------------------- put

namespace {
// A job's words in a putmany: id body nopts [options...].
void add_putmany_part(core::Command& cmd, std::string_view id, const JobSpec& job) {
  cmd.add(id).add(job.body).add(std::int64_t{core::put_option_words(job)});
  core::add_put_options(cmd, job);
}

core::Command putmany_part(std::string_view id, const JobSpec& job) {
  core::Command part;
  add_putmany_part(part, id, job);
  return part;
}
}  // namespace

void Client::put_async(std::string_view topic, const JobSpec& job, Callback<PutOutcome> done) try {
  core::check_spec(job, impl_->opts.max_body);
  auto cmd = impl_->fcall("put", topic);
  cmd.add(job.id).add(job.body);
  core::add_put_options(cmd, job);
  impl_->add_max_body(cmd);
  impl_->call_coalescable<PutOutcome>(topic, core::put_kind(), core::put_takes(job.id, job), cmd,
                                      putmany_part(job.id, job), impl_->max_body_tail(),
                                      core::parse_put, std::move(done), job.replicas);
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(PutOutcome, put, (std::string_view topic, const JobSpec& job),
               (topic, job, std::move(cb)))

void Client::add_async(std::string_view topic, const JobSpec& job, Callback<std::string> done) try {
  if (!job.id.empty()) {
    throw Error(Errc::invalid_argument, "add generates the id: leave JobSpec::id empty");
  }
  if (job.mode != PutMode::create) {
    throw Error(Errc::invalid_argument, "add creates a job: a generated id cannot be replaced");
  }
  core::check_spec(job, impl_->opts.max_body);
  auto cmd = impl_->fcall("put", topic);
  cmd.add("*").add(job.body);  // "*": the library generates the id
  core::add_put_options(cmd, job);
  impl_->add_max_body(cmd);
  impl_->call_coalescable<std::string>(
      topic, core::put_kind(), core::put_takes("*", job), cmd, putmany_part("*", job),
      impl_->max_body_tail(),
      [](const Reply& r) {
        if (r.type != Reply::Type::string) throw Error(Errc::protocol, "put * gave no id");
        return r.str;
      },
      std::move(done), job.replicas);
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(std::string, add, (std::string_view topic, const JobSpec& job),
               (topic, job, std::move(cb)))

void Client::put_many_async(std::string_view topic, std::span<const JobSpec> jobs,
                            Callback<std::vector<PutOutcome>> done) try {
  core::check_topic(topic);
  for (const auto& job : jobs) core::check_spec(job, impl_->opts.max_body);
  impl_->batched<PutOutcome, JobSpec>(jobs, std::move(done), [&](auto chunk, auto cb) {
    auto cmd = impl_->fcall("putmany", topic);
    cmd.add(static_cast<std::int64_t>(chunk.size()));
    // The most any job asks for, its own or the topic's.
    std::optional<int> replicas;
    const bool own = std::any_of(chunk.begin(), chunk.end(),
                                 [](const JobSpec& j) { return j.replicas.has_value(); });
    for (const auto& job : chunk) {
      if (own) {
        replicas =
            std::max(replicas.value_or(0), job.replicas.value_or(impl_->replicas_for(topic)));
      }
      add_putmany_part(cmd, job.id, job);
    }
    impl_->add_max_body(cmd);
    impl_->call_write<std::vector<PutOutcome>>(topic, cmd, core::parse_put_many, std::move(cb),
                                               replicas);
  });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(std::vector<PutOutcome>, put_many,
               (std::string_view topic, std::span<const JobSpec> jobs),
               (topic, jobs, std::move(cb)))

// ---------------------------------------------------------------- read

void Client::get_async(std::string_view topic, std::string_view id,
                       Callback<std::optional<Job>> done) try {
  auto cmd = impl_->fcall("get", topic);
  cmd.add(id);
  impl_->call<std::optional<Job>>(topic, cmd, core::parse_get, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(std::optional<Job>, get, (std::string_view topic, std::string_view id),
               (topic, id, std::move(cb)))

void Client::stats_async(std::string_view topic, Callback<TopicStats> done) try {
  impl_->call<TopicStats>(topic, impl_->fcall("stats", topic), core::parse_stats, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(TopicStats, stats, (std::string_view topic), (topic, std::move(cb)))

void Client::list_async(std::string_view topic, JobState state, std::int64_t offset, int count,
                        bool with_bodies, Callback<ListPage> done) try {
  auto cmd = impl_->fcall("list", topic);
  cmd.add(to_string(state)).add(offset).add(std::int64_t{count});
  if (!with_bodies) cmd.add("NOBODY");
  impl_->call<ListPage>(topic, cmd, core::parse_list, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(ListPage, list,
               (std::string_view topic, JobState state, std::int64_t offset, int count,
                bool with_bodies),
               (topic, state, offset, count, with_bodies, std::move(cb)))

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
        if (!topic.empty()) self->found.emplace_back(topic);
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
  impl_->link().primaries([scan](std::error_code ec, std::vector<std::size_t> nodes) {
    // No map (closed, or no seed answered in time): no partial listing.
    if (ec) return scan->done(Error(static_cast<Errc>(ec.value()), "no map of the cluster"));
    if (nodes.empty()) return scan->done(std::vector<std::string>{});
    scan->nodes = std::move(nodes);
    scan->next("0");
  });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(std::vector<std::string>, topics, (), (std::move(cb)))

Subscription Client::watch(std::string_view topic,
                           std::function<void(std::int64_t due_ms)> on_signal,
                           std::function<void()> on_ready) {
  core::check_topic(topic);
  auto& link = impl_->link(topic);
  const std::uint64_t id = link.subscribe(
      core::wake_channel(impl_->opts.prefix, topic),
      [on_signal = std::move(on_signal)](const std::string& payload) {
        std::int64_t due = 0;
        auto [end, ec] = std::from_chars(payload.data(), payload.data() + payload.size(), due);
        if (ec == std::errc() && end == payload.data() + payload.size()) on_signal(due);
      },
      std::move(on_ready));
  return Subscription([&link, id] { link.unsubscribe(id); });
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

// ---------------------------------------------------------------- take

void Client::reserve_async(std::string_view topic, int count, Millis ttr,
                           Callback<ReserveResult> done) try {
  auto cmd = impl_->fcall("reserve", topic);
  cmd.add(std::int64_t{count});
  core::Command tail;
  if (ttr.count() > 0) {
    cmd.add("TTR").add(ttr.count());
    tail.add("TTR").add(ttr.count());
  }
  auto parse = [](const Reply& r) { return core::parse_reserve(r, true); };
  if (count != 1) return impl_->call<ReserveResult>(topic, cmd, parse, std::move(done));
  // Reserves of one job each, queued together, go as one reserve of many.
  impl_->call_coalescable<ReserveResult>(topic, core::reserve_kind(), true, cmd, core::Command{},
                                         tail, parse, std::move(done), 0);
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(ReserveResult, reserve, (std::string_view topic, int count, Millis ttr),
               (topic, count, ttr, std::move(cb)))

void Client::pull_async(std::string_view topic, int count, Callback<ReserveResult> done) try {
  auto cmd = impl_->fcall("pull", topic);
  cmd.add(std::int64_t{count});
  impl_->call<ReserveResult>(
      topic, cmd, [](const Reply& r) { return core::parse_reserve(r, false); }, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(ReserveResult, pull, (std::string_view topic, int count),
               (topic, count, std::move(cb)))

// ---------------------------------------------------------------- settle

void Client::ack_async(std::string_view topic, std::string_view id, std::uint64_t token,
                       Millis keep, Callback<Outcome> done) try {
  auto cmd = impl_->held("ack", topic, id, token);
  core::Command part;
  part.add(id).add(static_cast<std::int64_t>(token));
  core::Command tail;
  if (keep.count() > 0) {
    cmd.add("KEEP").add(keep.count());
    tail.add("KEEP").add(keep.count());
  }
  impl_->call_coalescable<Outcome>(topic, core::ack_kind(), core::ack_takes(id, token), cmd, part,
                                   tail, core::parse_outcome, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(Outcome, ack,
               (std::string_view topic, std::string_view id, std::uint64_t token, Millis keep),
               (topic, id, token, keep, std::move(cb)))

// An ack with a result goes alone: ackmany takes no results.
void Client::ack_async(std::string_view topic, std::string_view id, std::uint64_t token,
                       Millis keep, std::string_view result, Callback<Outcome> done) try {
  if (keep.count() <= 0) {
    throw Error(Errc::invalid_argument,
                "a result needs keep > 0: it is kept with the finished job");
  }
  if (result.size() > impl_->opts.max_body) {
    throw Error(Errc::invalid_argument, "result is " + std::to_string(result.size()) +
                                            " bytes, over the limit of " +
                                            std::to_string(impl_->opts.max_body));
  }
  auto cmd = impl_->held("ack", topic, id, token);
  cmd.add("KEEP").add(keep.count()).add("RESULT").add(result);
  impl_->add_max_body(cmd);
  impl_->call_write<Outcome>(topic, cmd, core::parse_outcome, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(Outcome, ack,
               (std::string_view topic, std::string_view id, std::uint64_t token, Millis keep,
                std::string_view result),
               (topic, id, token, keep, result, std::move(cb)))

void Client::ack_many_async(std::string_view topic,
                            std::span<const std::pair<std::string, std::uint64_t>> jobs,
                            Millis keep, Callback<std::vector<Outcome>> done) try {
  core::check_topic(topic);
  using Item = std::pair<std::string, std::uint64_t>;
  impl_->batched<Outcome, Item>(jobs, std::move(done), [&](auto chunk, auto cb) {
    auto cmd = impl_->fcall("ackmany", topic);
    cmd.add(static_cast<std::int64_t>(chunk.size()));
    for (const auto& [id, token] : chunk) cmd.add(id).add(static_cast<std::int64_t>(token));
    if (keep.count() > 0) cmd.add("KEEP").add(keep.count());
    impl_->call_write<std::vector<Outcome>>(topic, cmd, core::parse_outcomes, std::move(cb));
  });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(std::vector<Outcome>, ack_many,
               (std::string_view topic, std::span<const std::pair<std::string, std::uint64_t>> jobs,
                Millis keep),
               (topic, jobs, keep, std::move(cb)))

void Client::release_async(std::string_view topic, std::string_view id, std::uint64_t token,
                           Millis delay, std::optional<int> priority, Callback<Outcome> done) try {
  auto cmd = impl_->held("release", topic, id, token);
  if (delay.count() > 0) cmd.add("DELAY").add(delay.count());
  if (priority) cmd.add("PRIORITY").add(std::int64_t{*priority});
  impl_->call_write<Outcome>(topic, cmd, core::parse_outcome, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(Outcome, release,
               (std::string_view topic, std::string_view id, std::uint64_t token, Millis delay,
                std::optional<int> priority),
               (topic, id, token, delay, priority, std::move(cb)))

void Client::fail_async(std::string_view topic, std::string_view id, std::uint64_t token,
                        std::string_view error, bool bury, std::optional<Millis> retry_delay,
                        std::optional<int> max_attempts, Callback<FailResult> done) try {
  auto cmd = impl_->held("fail", topic, id, token);
  cmd.add(error);
  if (bury) cmd.add("DEAD");
  if (retry_delay) cmd.add("DELAY").add(retry_delay->count());
  if (max_attempts) cmd.add("ATTEMPTS").add(std::int64_t{*max_attempts});
  impl_->call_write<FailResult>(topic, cmd, core::parse_fail, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(FailResult, fail,
               (std::string_view topic, std::string_view id, std::uint64_t token,
                std::string_view error, bool bury, std::optional<Millis> retry_delay,
                std::optional<int> max_attempts),
               (topic, id, token, error, bury, retry_delay, max_attempts, std::move(cb)))

void Client::touch_async(std::string_view topic, std::string_view id, std::uint64_t token,
                         Millis ttr, Callback<TouchResult> done) try {
  auto cmd = impl_->held("touch", topic, id, token);
  if (ttr.count() > 0) cmd.add("TTR").add(ttr.count());
  impl_->call<TouchResult>(topic, cmd, core::parse_touch, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(TouchResult, touch,
               (std::string_view topic, std::string_view id, std::uint64_t token, Millis ttr),
               (topic, id, token, ttr, std::move(cb)))

// ---------------------------------------------------------------- manage

namespace {
int to_count(const Reply& r) { return static_cast<int>(core::parse_integer(r)); }
bool changed(const Reply& r) { return core::parse_integer(r) == 1; }
}  // namespace

void Client::remove_async(std::string_view topic, std::string_view id, Callback<bool> done) try {
  auto cmd = impl_->fcall("delete", topic);
  cmd.add(id);
  impl_->call_write<bool>(topic, cmd, changed, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(bool, remove, (std::string_view topic, std::string_view id),
               (topic, id, std::move(cb)))

void Client::restore_async(std::string_view topic, const Job& job, bool replace,
                           Callback<bool> done) try {
  if (job.state == JobState::done) return done(false);
  auto cmd = impl_->fcall("restore", topic);
  const char* state = job.state == JobState::dead      ? "dead"
                      : job.state == JobState::delayed ? "delayed"
                                                       : "ready";
  cmd.add(job.id).add(job.body).add(state).add(job.created_ms).add(std::int64_t{job.attempts});
  cmd.add("AT").add(job.due_ms).add("PRIORITY").add(std::int64_t{job.priority});
  if (job.own_ttr) cmd.add("TTR").add(job.ttr.count());  // else reserve's or the default
  if (job.max_attempts > 0) cmd.add("ATTEMPTS").add(std::int64_t{job.max_attempts});
  cmd.add("BACKOFF")
      .add(job.backoff.kind == BackoffKind::fixed ? "fixed" : "exponential")
      .add(job.backoff.base.count())
      .add(job.backoff.cap.count());
  if (job.keep.count() > 0) cmd.add("KEEP").add(job.keep.count());
  if (job.error) cmd.add("ERROR").add(*job.error);
  if (job.state == JobState::dead) cmd.add("DIED").add(job.died_ms);
  if (replace) cmd.add("REPLACE");
  impl_->call_write<bool>(topic, cmd, changed, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(bool, restore, (std::string_view topic, const Job& job, bool replace),
               (topic, job, replace, std::move(cb)))

void Client::requeue_async(std::string_view topic, int limit, Callback<RequeueResult> done) try {
  auto cmd = impl_->fcall("requeue", topic);
  cmd.add("LIMIT").add(std::int64_t{limit});
  impl_->call<RequeueResult>(topic, cmd, core::parse_requeue, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(RequeueResult, requeue, (std::string_view topic, int limit),
               (topic, limit, std::move(cb)))

void Client::kick_async(std::string_view topic, std::span<const std::string> ids,
                        Callback<int> done) try {
  core::check_topic(topic);
  impl_->batched<int, std::string>(
      ids,
      [done = std::move(done)](Result<std::vector<int>> r) {
        if (!r.ok()) return done(r.error());
        int kicked = 0;
        for (int n : r.value()) kicked += n;
        done(kicked);
      },
      [&](auto chunk, auto cb) {
        auto cmd = impl_->fcall("kick", topic);
        for (const auto& id : chunk) cmd.add(id);
        impl_->call<std::vector<int>>(
            topic, cmd, [](const Reply& r) { return std::vector<int>{to_count(r)}; },
            std::move(cb));
      });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(int, kick, (std::string_view topic, std::span<const std::string> ids),
               (topic, ids, std::move(cb)))

void Client::kick_all_async(std::string_view topic, int limit, Callback<int> done) try {
  auto cmd = impl_->fcall("kickall", topic);
  cmd.add("LIMIT").add(std::int64_t{limit});
  impl_->call<int>(topic, cmd, to_count, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(int, kick_all, (std::string_view topic, int limit), (topic, limit, std::move(cb)))

void Client::pause_async(std::string_view topic, Callback<bool> done) try {
  impl_->call<bool>(topic, impl_->fcall("pause", topic), changed, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(bool, pause, (std::string_view topic), (topic, std::move(cb)))

void Client::resume_async(std::string_view topic, Callback<bool> done) try {
  impl_->call<bool>(topic, impl_->fcall("resume", topic), changed, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(bool, resume, (std::string_view topic), (topic, std::move(cb)))

void Client::set_limits_async(std::string_view topic, const TopicLimits& limits,
                              Callback<TopicLimits> done) try {
  auto cmd = impl_->fcall("limit", topic);
  // Without a rate its window is not used, but the library checks it.
  const std::int64_t window = limits.rate == 0 ? 1 : limits.window.count();
  cmd.add("RATE").add(std::int64_t{limits.rate}).add(window);
  cmd.add("CONCURRENCY").add(std::int64_t{limits.concurrency});
  cmd.add("AGING").add(limits.aging.count());
  impl_->call<TopicLimits>(topic, cmd, core::parse_limits, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(TopicLimits, set_limits, (std::string_view topic, const TopicLimits& limits),
               (topic, limits, std::move(cb)))

void Client::limits_async(std::string_view topic, Callback<TopicLimits> done) try {
  impl_->call<TopicLimits>(topic, impl_->fcall("limit", topic), core::parse_limits,
                           std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(TopicLimits, limits, (std::string_view topic), (topic, std::move(cb)))

// ---------------------------------------------------------------- wait

void Client::wait_async(std::string_view topic, std::string_view id, Millis timeout,
                        Callback<std::optional<Job>> done) try {
  core::check_topic(topic);
  core::check_id(id);
  if (timeout.count() < 0) throw Error(Errc::invalid_argument, "timeout must not be negative");
  auto& link = impl_->link(topic);
  auto w = std::make_shared<Waiter>(impl_->runtime->shard(impl_->runtime->shard_of(topic)), *this,
                                    topic, id);
  w->done = std::move(done);
  w->link = &link;
  {
    std::lock_guard lock(impl_->waiters_mu);
    impl_->waiters.insert(w);
  }
  w->forget = [impl = impl_.get()](const std::shared_ptr<Waiter>& self) {
    std::lock_guard lock(impl->waiters_mu);
    impl->waiters.erase(self);
  };
  std::weak_ptr<Waiter> weak = w;
  const auto sub = link.subscribe(
      core::finished_channel(impl_->opts.prefix, topic),
      [weak](const std::string& payload) {
        if (auto self = weak.lock()) self->message(payload);
      },
      [weak] {
        if (auto self = weak.lock()) self->check();
      });
  {
    std::lock_guard lock(w->mu);
    w->subscription = sub;
    if (w->ended) {
      link.unsubscribe(sub);
      return;
    }
    w->timer.expires_after(timeout);
    w->timer.async_wait([weak](boost::system::error_code ec) {
      if (ec) return;
      if (auto self = weak.lock()) self->expire();
    });
  }
} catch (const Error& e) {
  impl_->refuse(done, e);
}
void Client::end_waits() {
  std::vector<std::shared_ptr<Waiter>> waiting;
  {
    std::lock_guard lock(impl_->waiters_mu);
    waiting.assign(impl_->waiters.begin(), impl_->waiters.end());
  }
  for (const auto& w : waiting) w->expire();
}

REDISCHED_WRAP(std::optional<Job>, wait,
               (std::string_view topic, std::string_view id, Millis timeout),
               (topic, id, timeout, std::move(cb)))

#undef REDISCHED_WRAP

}  // namespace redisched
