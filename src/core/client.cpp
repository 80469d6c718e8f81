#include "redisched/client.h"

#include <boost/asio/steady_timer.hpp>
#include <charconv>

#include "core/client_access.h"
#include "core/client_impl.h"
#include "core/keys.h"
#include "core/limits.h"

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
  impl_->by_id<PutOutcome>(
      topic, job.id, std::move(done),
      [impl = impl_.get(), job](const std::string& where, Callback<PutOutcome> then) {
        auto cmd = impl->fcall_at("put", where);
        cmd.add(job.id).add(job.body);
        core::add_put_options(cmd, job);
        impl->add_max_body(cmd);
        impl->call_coalescable<PutOutcome>(where, core::put_kind(), core::put_takes(job.id, job),
                                           cmd, putmany_part(job.id, job), impl->max_body_tail(),
                                           core::parse_put, std::move(then), job.replicas);
      });
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
  impl_->with_layout<std::string>(
      topic, std::move(done),
      [impl = impl_.get(), job](const core::LayoutPtr& l, Callback<std::string> then) {
        if (l->spread()) {
          // The library makes ids per topic, and a shard's id must lead to
          // that shard: here the id is made first ("<ms>-<random>") and the
          // job put where it leads.
          auto spec = job;
          spec.id = core::random_job_id();
          auto cmd = impl->fcall_at("put", l->topic_for(spec.id));
          cmd.add(spec.id).add(spec.body);
          core::add_put_options(cmd, spec);
          impl->add_max_body(cmd);
          return impl->call_write<std::string>(
              l->topic_for(spec.id), cmd,
              [id = spec.id](const Reply& r) {
                if (core::parse_put(r) != PutOutcome::created) {
                  throw Error(Errc::server, "the generated id " + id + " was taken");
                }
                return id;
              },
              std::move(then), spec.replicas);
        }
        auto cmd = impl->fcall_at("put", l->topic);
        cmd.add("*").add(job.body);  // "*": the library generates the id
        core::add_put_options(cmd, job);
        impl->add_max_body(cmd);
        impl->call_coalescable<std::string>(
            l->topic, core::put_kind(), core::put_takes("*", job), cmd, putmany_part("*", job),
            impl->max_body_tail(),
            [](const Reply& r) {
              if (r.type != Reply::Type::string) throw Error(Errc::protocol, "put * gave no id");
              return r.str;
            },
            std::move(then), job.replicas);
      });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(std::string, add, (std::string_view topic, const JobSpec& job),
               (topic, job, std::move(cb)))

void Client::put_many_async(std::string_view topic, std::span<const JobSpec> jobs,
                            Callback<std::vector<PutOutcome>> done) try {
  core::check_topic(topic);
  for (const auto& job : jobs) {
    core::check_spec(job, impl_->opts.max_body);
    // Refused here, not by one part of the call: the parts of a call answer
    // on one thread (FanIn), a refusal on the runtime's.
    if (job.replicas.value_or(0) > 0 && !impl_->replica_timeout_ok) {
      throw Error(Errc::invalid_argument, kBadReplicaTimeout);
    }
  }
  auto send = [impl = impl_.get(), base = std::string(topic)](
                  const std::string& where, std::span<const JobSpec> part,
                  Callback<std::vector<PutOutcome>> then) {
    impl->batched<PutOutcome, JobSpec>(part, std::move(then), [&](auto chunk, auto cb) {
      auto cmd = impl->fcall_at("putmany", where);
      cmd.add(static_cast<std::int64_t>(chunk.size()));
      // The most any job asks for, its own or the topic's.
      std::optional<int> replicas;
      const bool own = std::any_of(chunk.begin(), chunk.end(),
                                   [](const JobSpec& j) { return j.replicas.has_value(); });
      for (const auto& job : chunk) {
        if (own) {
          replicas =
              std::max(replicas.value_or(0), job.replicas.value_or(impl->replicas_for(base)));
        }
        add_putmany_part(cmd, job.id, job);
      }
      impl->add_max_body(cmd);
      impl->call_write<std::vector<PutOutcome>>(where, cmd, core::parse_put_many, std::move(cb),
                                                replicas);
    });
  };
  impl_->by_shard<PutOutcome, JobSpec>(
      topic, std::vector<JobSpec>(jobs.begin(), jobs.end()),
      [](const JobSpec& j) -> const std::string& { return j.id; }, std::move(done),
      std::move(send));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(std::vector<PutOutcome>, put_many,
               (std::string_view topic, std::span<const JobSpec> jobs),
               (topic, jobs, std::move(cb)))

// ---------------------------------------------------------------- read

void Client::get_async(std::string_view topic, std::string_view id,
                       Callback<std::optional<Job>> done) try {
  impl_->by_id<std::optional<Job>>(
      topic, id, std::move(done),
      [impl = impl_.get(), id = std::string(id)](const std::string& where, auto then) {
        auto cmd = impl->fcall_at("get", where);
        cmd.add(id);
        impl->call<std::optional<Job>>(where, cmd, core::parse_get, std::move(then));
      });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(std::optional<Job>, get, (std::string_view topic, std::string_view id),
               (topic, id, std::move(cb)))

void Client::stats_async(std::string_view topic, Callback<TopicStats> done) try {
  impl_->with_layout<TopicStats>(
      topic, std::move(done), [impl = impl_.get()](const core::LayoutPtr& l, auto then) {
        auto send = [impl](const std::string& where, Callback<TopicStats> next_then) {
          impl->call<TopicStats>(
              where, impl->fcall_at("stats", where),
              [](const Reply& r) {
                auto st = core::parse_stats(r);
                // A former shard: the list changed since (with_layout reads it again).
                if (st.shards < 0) {
                  throw core::error_from_reply("SHARDED *");  // as the library says it
                }
                return st;
              },
              std::move(next_then));
        };
        if (!l->spread()) {
          // A topic spread since this client last looked: read the list again.
          return send(l->topic, [then = std::move(then), topic = l->topic](Result<TopicStats> r) {
            if (r.ok() && r.value().shards > 0) {
              return then(core::error_from_reply("SHARDED " + topic + " has " +
                                                 std::to_string(r.value().shards)));
            }
            then(std::move(r));
          });
        }
        impl->each_shard<TopicStats>(l, std::move(then), send,
                                     [n = l->shards.size()](std::vector<TopicStats> parts) {
                                       return core::merge_stats(parts, n);
                                     });
      });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(TopicStats, stats, (std::string_view topic), (topic, std::move(cb)))

void Client::list_async(std::string_view topic, JobState state, std::int64_t offset, int count,
                        bool with_bodies, Callback<ListPage> done) try {
  impl_->with_layout<ListPage>(
      topic, std::move(done),
      [impl = impl_.get(), state, offset, count, with_bodies](const core::LayoutPtr& l, auto then) {
        auto send = [impl, state, with_bodies](const std::string& where, std::int64_t skip,
                                               int want, Callback<ListPage> next_then) {
          auto cmd = impl->fcall_at("list", where);
          cmd.add(to_string(state)).add(skip).add(std::int64_t{want});
          if (!with_bodies) cmd.add("NOBODY");
          impl->call<ListPage>(where, cmd, core::parse_list, std::move(next_then));
        };
        if (!l->spread()) return send(l->topic, offset, count, std::move(then));
        list_spread(l, offset, count, std::move(send), std::move(then));
      });
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
  impl_->link().primaries(
      impl_->counted([scan](std::error_code ec, std::vector<std::size_t> nodes) {
        // No map (closed, or no seed answered in time): no partial listing.
        if (ec) return scan->done(core::error_from_link(ec, "no map of the cluster"));
        if (nodes.empty()) return scan->done(std::vector<std::string>{});
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

// ---------------------------------------------------------------- take

void Client::reserve_async(std::string_view topic, int count, Millis ttr,
                           Callback<ReserveResult> done) try {
  auto send = [impl = impl_.get(), ttr](const std::string& where, int want,
                                        Callback<ReserveResult> then) {
    auto cmd = impl->fcall_at("reserve", where);
    cmd.add(std::int64_t{want});
    core::Command tail;
    if (ttr.count() > 0) {
      cmd.add("TTR").add(ttr.count());
      tail.add("TTR").add(ttr.count());
    }
    auto parse = [](const Reply& r) { return core::parse_reserve(r, true); };
    if (want != 1) return impl->call<ReserveResult>(where, cmd, parse, std::move(then));
    // Reserves of one job each, queued together, go as one reserve of many.
    impl->call_coalescable<ReserveResult>(where, core::reserve_kind(), true, cmd, core::Command{},
                                          tail, parse, std::move(then), 0);
  };
  impl_->with_layout<ReserveResult>(
      topic, std::move(done),
      [count, send = std::move(send)](const core::LayoutPtr& l, Callback<ReserveResult> then) {
        if (!l->spread()) return send(l->topic, count, std::move(then));
        take_spread(l, count, send, std::move(then));
      });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(ReserveResult, reserve, (std::string_view topic, int count, Millis ttr),
               (topic, count, ttr, std::move(cb)))

void Client::pull_async(std::string_view topic, int count, Callback<ReserveResult> done) try {
  auto send = [impl = impl_.get()](const std::string& where, int want,
                                   Callback<ReserveResult> then) {
    auto cmd = impl->fcall_at("pull", where);
    cmd.add(std::int64_t{want});
    impl->call<ReserveResult>(
        where, cmd, [](const Reply& r) { return core::parse_reserve(r, false); }, std::move(then));
  };
  impl_->with_layout<ReserveResult>(
      topic, std::move(done),
      [count, send = std::move(send)](const core::LayoutPtr& l, Callback<ReserveResult> then) {
        if (!l->spread()) return send(l->topic, count, std::move(then));
        take_spread(l, count, send, std::move(then));
      });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(ReserveResult, pull, (std::string_view topic, int count),
               (topic, count, std::move(cb)))

// ---------------------------------------------------------------- settle

void Client::ack_async(std::string_view topic, std::string_view id, std::uint64_t token,
                       Millis keep, Callback<Outcome> done) try {
  impl_->by_id<Outcome>(topic, id, std::move(done),
                        [impl = impl_.get(), id = std::string(id), token, keep](
                            const std::string& where, Callback<Outcome> then) {
                          auto cmd = impl->held("ack", where, id, token);
                          core::Command part;
                          part.add(id).add(static_cast<std::int64_t>(token));
                          core::Command tail;
                          if (keep.count() > 0) {
                            cmd.add("KEEP").add(keep.count());
                            tail.add("KEEP").add(keep.count());
                          }
                          impl->call_coalescable<Outcome>(
                              where, core::ack_kind(), core::ack_takes(id, token), cmd, part, tail,
                              core::parse_outcome, std::move(then));
                        });
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
  impl_->by_id<Outcome>(topic, id, std::move(done),
                        [impl = impl_.get(), id = std::string(id), token, keep,
                         result = std::string(result)](const std::string& where, auto then) {
                          auto cmd = impl->held("ack", where, id, token);
                          cmd.add("KEEP").add(keep.count()).add("RESULT").add(result);
                          impl->add_max_body(cmd);
                          impl->call_write<Outcome>(where, cmd, core::parse_outcome,
                                                    std::move(then));
                        });
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
  using Item = std::pair<std::string, std::uint64_t>;
  auto send = [impl = impl_.get(), keep](const std::string& where, std::span<const Item> part,
                                         Callback<std::vector<Outcome>> then) {
    impl->batched<Outcome, Item>(part, std::move(then), [&](auto chunk, auto cb) {
      auto cmd = impl->fcall_at("ackmany", where);
      cmd.add(static_cast<std::int64_t>(chunk.size()));
      for (const auto& [id, token] : chunk) cmd.add(id).add(static_cast<std::int64_t>(token));
      if (keep.count() > 0) cmd.add("KEEP").add(keep.count());
      impl->call_write<std::vector<Outcome>>(where, cmd, core::parse_outcomes, std::move(cb));
    });
  };
  impl_->by_shard<Outcome, Item>(
      topic, std::vector<Item>(jobs.begin(), jobs.end()),
      [](const Item& i) -> const std::string& { return i.first; }, std::move(done),
      std::move(send));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(std::vector<Outcome>, ack_many,
               (std::string_view topic, std::span<const std::pair<std::string, std::uint64_t>> jobs,
                Millis keep),
               (topic, jobs, keep, std::move(cb)))

void Client::release_async(std::string_view topic, std::string_view id, std::uint64_t token,
                           Millis delay, std::optional<int> priority, Callback<Outcome> done) try {
  impl_->by_id<Outcome>(topic, id, std::move(done),
                        [impl = impl_.get(), id = std::string(id), token, delay, priority](
                            const std::string& where, auto then) {
                          auto cmd = impl->held("release", where, id, token);
                          if (delay.count() > 0) cmd.add("DELAY").add(delay.count());
                          if (priority) cmd.add("PRIORITY").add(std::int64_t{*priority});
                          impl->call_write<Outcome>(where, cmd, core::parse_outcome,
                                                    std::move(then));
                        });
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
  impl_->by_id<FailResult>(
      topic, id, std::move(done),
      [impl = impl_.get(), id = std::string(id), token, error = std::string(error), bury,
       retry_delay, max_attempts](const std::string& where, auto then) {
        auto cmd = impl->held("fail", where, id, token);
        cmd.add(error);
        if (bury) cmd.add("DEAD");
        if (retry_delay) cmd.add("DELAY").add(retry_delay->count());
        if (max_attempts) cmd.add("ATTEMPTS").add(std::int64_t{*max_attempts});
        impl->call_write<FailResult>(where, cmd, core::parse_fail, std::move(then));
      });
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
  impl_->by_id<TouchResult>(
      topic, id, std::move(done),
      [impl = impl_.get(), id = std::string(id), token, ttr](const std::string& where, auto then) {
        auto cmd = impl->held("touch", where, id, token);
        if (ttr.count() > 0) cmd.add("TTR").add(ttr.count());
        impl->call<TouchResult>(where, cmd, core::parse_touch, std::move(then));
      });
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
int sum_of(const std::vector<int>& parts) {
  int n = 0;
  for (int p : parts) n += p;
  return n;
}

// pause or resume: of the topic, or of each of its shards (changed: any).
template <class Impl>
void on_every_shard(Impl& impl, const core::LayoutPtr& l, std::string_view op,
                    Callback<bool> done) {
  auto send = [&impl, op = std::string(op)](const std::string& where, Callback<bool> then) {
    impl.template call<bool>(where, impl.fcall_at(op, where), changed, std::move(then));
  };
  if (!l->spread()) return send(l->topic, std::move(done));
  impl.template each_shard<bool>(l, std::move(done), send, [](const std::vector<bool>& parts) {
    return std::find(parts.begin(), parts.end(), true) != parts.end();
  });
}
}  // namespace

void Client::remove_async(std::string_view topic, std::string_view id, Callback<bool> done) try {
  impl_->by_id<bool>(
      topic, id, std::move(done),
      [impl = impl_.get(), id = std::string(id)](const std::string& where, auto then) {
        auto cmd = impl->fcall_at("delete", where);
        cmd.add(id);
        impl->call_write<bool>(where, cmd, changed, std::move(then));
      });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(bool, remove, (std::string_view topic, std::string_view id),
               (topic, id, std::move(cb)))

namespace {
template <class Impl>
void restore_on(Impl& impl, const std::string& topic, const Job& job, bool replace,
                Callback<bool> done) {
  auto cmd = impl.fcall_at("restore", topic);
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
  impl.template call_write<bool>(topic, cmd, changed, std::move(done));
}
}  // namespace

void Client::restore_async(std::string_view topic, const Job& job, bool replace,
                           Callback<bool> done) try {
  if (job.state == JobState::done) return impl_->answer_later(done, Result<bool>(false));
  impl_->by_id<bool>(topic, job.id, std::move(done),
                     [impl = impl_.get(), job, replace](const std::string& where, auto then) {
                       restore_on(*impl, where, job, replace, std::move(then));
                     });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(bool, restore, (std::string_view topic, const Job& job, bool replace),
               (topic, job, replace, std::move(cb)))

void Client::requeue_async(std::string_view topic, int limit, Callback<RequeueResult> done) try {
  impl_->with_layout<RequeueResult>(
      topic, std::move(done), [impl = impl_.get(), limit](const core::LayoutPtr& l, auto then) {
        auto send = [impl, limit](const std::string& where, Callback<RequeueResult> next_then) {
          auto cmd = impl->fcall_at("requeue", where);
          cmd.add("LIMIT").add(std::int64_t{limit});
          impl->call<RequeueResult>(where, cmd, core::parse_requeue, std::move(next_then));
        };
        if (!l->spread()) return send(l->topic, std::move(then));
        impl->each_shard<RequeueResult>(
            l, std::move(then), send, [](std::vector<RequeueResult> parts) {
              RequeueResult all;
              for (const auto& p : parts) {
                all.requeued += p.requeued;
                all.buried += p.buried;
                all.next_deadline_ms = core::earlier_time(all.next_deadline_ms, p.next_deadline_ms);
              }
              return all;
            });
      });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(RequeueResult, requeue, (std::string_view topic, int limit),
               (topic, limit, std::move(cb)))

void Client::kick_async(std::string_view topic, std::span<const std::string> ids,
                        Callback<int> done) try {
  // One answer per id (1 kicked, 0 not), so that by_shard can gather them.
  auto send = [impl = impl_.get()](const std::string& where, std::span<const std::string> part,
                                   Callback<std::vector<int>> then) {
    impl->batched<int, std::string>(
        part,
        [then = std::move(then), n = part.size()](Result<std::vector<int>> r) {
          if (!r.ok()) return then(r.error());
          int kicked = 0;
          for (int k : r.value()) kicked += k;
          std::vector<int> each(n, 0);
          for (int i = 0; i < kicked && i < static_cast<int>(n); ++i) each[i] = 1;
          then(std::move(each));
        },
        [&](auto chunk, auto cb) {
          auto cmd = impl->fcall_at("kick", where);
          for (const auto& id : chunk) cmd.add(id);
          impl->call<std::vector<int>>(
              where, cmd, [](const Reply& r) { return std::vector<int>{to_count(r)}; },
              std::move(cb));
        });
  };
  impl_->by_shard<int, std::string>(
      topic, std::vector<std::string>(ids.begin(), ids.end()),
      [](const std::string& id) -> const std::string& { return id; },
      [done = std::move(done)](Result<std::vector<int>> r) {
        if (!r.ok()) return done(r.error());
        int kicked = 0;
        for (int n : r.value()) kicked += n;
        done(kicked);
      },
      std::move(send));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(int, kick, (std::string_view topic, std::span<const std::string> ids),
               (topic, ids, std::move(cb)))

void Client::kick_all_async(std::string_view topic, int limit, Callback<int> done) try {
  impl_->with_layout<int>(
      topic, std::move(done), [impl = impl_.get(), limit](const core::LayoutPtr& l, auto then) {
        auto send = [impl, limit](const std::string& where, Callback<int> next_then) {
          auto cmd = impl->fcall_at("kickall", where);
          cmd.add("LIMIT").add(std::int64_t{limit});
          impl->call<int>(where, cmd, to_count, std::move(next_then));
        };
        if (!l->spread()) return send(l->topic, std::move(then));
        impl->each_shard<int>(l, std::move(then), send, sum_of);
      });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(int, kick_all, (std::string_view topic, int limit), (topic, limit, std::move(cb)))

void Client::pause_async(std::string_view topic, Callback<bool> done) try {
  impl_->with_layout<bool>(topic, std::move(done),
                           [impl = impl_.get()](const core::LayoutPtr& l, auto then) {
                             on_every_shard(*impl, l, "pause", std::move(then));
                           });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(bool, pause, (std::string_view topic), (topic, std::move(cb)))

void Client::resume_async(std::string_view topic, Callback<bool> done) try {
  impl_->with_layout<bool>(topic, std::move(done),
                           [impl = impl_.get()](const core::LayoutPtr& l, auto then) {
                             on_every_shard(*impl, l, "resume", std::move(then));
                           });
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
  // (A spread topic answers SHARDED: limits hold for one topic's keys.)
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

namespace {
// The retry window of the topic, or of each of its shards: the first's
// window, the ids they hold together.
template <class Impl>
void retry_window_on(Impl& impl, const core::LayoutPtr& l, std::optional<Millis> set,
                     Callback<RetryWindow> done) {
  auto send = [&impl, set](const std::string& where, Callback<RetryWindow> then) {
    auto cmd = impl.fcall_at("retrywindow", where);
    if (set) cmd.add(set->count());
    impl.template call<RetryWindow>(where, cmd, core::parse_retry_window, std::move(then));
  };
  if (!l->spread()) return send(l->topic, std::move(done));
  impl.template each_shard<RetryWindow>(l, std::move(done), send,
                                        [](const std::vector<RetryWindow>& parts) {
                                          RetryWindow all = parts.front();
                                          for (std::size_t i = 1; i < parts.size(); ++i) {
                                            all.remembered += parts[i].remembered;
                                          }
                                          return all;
                                        });
}
}  // namespace

void Client::set_retry_window_async(std::string_view topic, Millis window,
                                    Callback<RetryWindow> done) try {
  if (window.count() < 0 || window.count() > limits::kWindowMax) {
    throw Error(Errc::invalid_argument, "the retry window must be 0.." +
                                            std::to_string(limits::kWindowMax) + " ms, got " +
                                            std::to_string(window.count()));
  }
  impl_->with_layout<RetryWindow>(
      topic, std::move(done), [impl = impl_.get(), window](const core::LayoutPtr& l, auto then) {
        retry_window_on(*impl, l, window, std::move(then));
      });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(RetryWindow, set_retry_window, (std::string_view topic, Millis window),
               (topic, window, std::move(cb)))

void Client::retry_window_async(std::string_view topic, Callback<RetryWindow> done) try {
  impl_->with_layout<RetryWindow>(topic, std::move(done),
                                  [impl = impl_.get()](const core::LayoutPtr& l, auto then) {
                                    retry_window_on(*impl, l, std::nullopt, std::move(then));
                                  });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(RetryWindow, retry_window, (std::string_view topic), (topic, std::move(cb)))

void Client::migrate_async(std::string_view topic, int limit, Callback<Migration> done) try {
  if (limit < 1 || limit > limits::kBatchMax) {
    throw Error(Errc::invalid_argument, "the migration's limit must be 1.." +
                                            std::to_string(limits::kBatchMax) + " records, got " +
                                            std::to_string(limit));
  }
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
          auto cmd = impl->fcall_at("shard", where);
          for (const auto& w : words) cmd.add(w);
          impl->template call<int>(where, cmd, to_count, [said = std::move(said)](Result<int> r) {
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
    auto cmd = impl->fcall_at("shard", base);
    for (const auto& s : next->suffixes) cmd.add(s);
    impl->template call<int>(base, cmd, to_count, [self = shared_from_this()](Result<int> r) {
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
