#include "server/beanstalk.h"

#include <spdlog/spdlog.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <charconv>
#include <map>
#include <mutex>
#include <random>
#include <set>

#include "core/checks.h"
#include "core/client_access.h"
#include "redisched/asio.h"
#include "redisched/limits.h"
#include "redisched/version.h"
#include "server/api.h"
#include "server/async_util.h"
#include "server/beanstalk_protocol.h"
#include "server/listen.h"
#include "server/metrics.h"
#include "server/wake_hub.h"

namespace redisched::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::awaitable;
using asio::use_awaitable;
using asio::ip::tcp;
using beanstalk::Command;
using beanstalk::Verb;
using Clock = std::chrono::steady_clock;
using detail::ClientAccess;

// beanstalkd's priorities are 0..2^32-1, smaller first; redisched's
// kPrioMin..kPrioMax (library version 37), larger first: pri = kPrioMax -
// priority, each of the 2^32 one of ours.
static_assert(limits::kPrioMax - limits::kPrioMin == 4294967295);
std::int64_t priority_of(std::uint32_t pri) { return limits::kPrioMax - pri; }
std::int64_t pri_of(std::int64_t priority) { return limits::kPrioMax - priority; }

// The last second of a reservation, in which a reserve is answered
// DEADLINE_SOON (beanstalkd's safety margin).
constexpr auto kSafetyMargin = std::chrono::seconds(1);
// A reserve on several tubes looks again at least this often: a
// reservation that lapses there sends no signal.
constexpr auto kMultiTubeRecheck = std::chrono::seconds(1);
// Aliases of jobs whose ids are not this face's (put over HTTP, say) held
// by one serve before it forgets the oldest half.
constexpr std::size_t kAliasesMax = 1 << 20;

constexpr std::string_view kNotFound = "NOT_FOUND\r\n";
constexpr std::string_view kInternalError = "INTERNAL_ERROR\r\n";

// Awaits a call of the Client's callback form.
template <class T, class Start>
awaitable<T> await_callback(Start start) {
  return redisched::detail::AsioCompletion<std::decay_t<decltype(use_awaitable)>, T>::initiate(
      use_awaitable, std::move(start));
}

// A delete, release or bury that the primary made but fewer replicas than
// --replicas confirmed is answered as made, as `made`. beanstalkd's clients
// have no answer for "done on the primary only", and a retry would find it
// done (NOT_FOUND); should a failover undo it, the job is only handed out
// again, as after a worker's crash. A put is not answered so: undone, its
// job would be lost (INTERNAL_ERROR, and the client puts it again).
template <class T>
awaitable<T> made_on_primary(awaitable<T> call, T made) {
  try {
    co_return co_await std::move(call);
  } catch (const Error& e) {
    if (!ClientAccess::short_of_replicas(e)) throw;
    spdlog::warn("beanstalk: {}; answered as done", e.what());
  }
  co_return made;
}

std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::optional<std::uint64_t> canonical_number(std::string_view s) {
  std::uint64_t v = 0;
  if (s.empty() || (s.size() > 1 && s.front() == '0')) return std::nullopt;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// A tube's name as a topic's: topics take fewer characters and bytes.
bool topic_can_be(std::string_view tube) {
  return tube.size() <= core::kTopicMax &&
         std::all_of(tube.begin(), tube.end(), core::valid_topic_char);
}

void yaml_line(std::string& out, std::string_view key, std::string_view value) {
  out.append(key).append(": ").append(value).push_back('\n');
}
void yaml_line(std::string& out, std::string_view key, std::int64_t value) {
  yaml_line(out, key, std::to_string(value));
}

// "OK <bytes>\r\n<yaml>\r\n"
void ok_data(std::string& out, const std::string& yaml) {
  out.append("OK ").append(std::to_string(yaml.size())).append("\r\n").append(yaml).append("\r\n");
}

void job_reply(std::string& out, std::string_view word, std::uint64_t id, std::string_view body) {
  out.append(word)
      .append(" ")
      .append(std::to_string(id))
      .append(" ")
      .append(std::to_string(body.size()))
      .append("\r\n")
      .append(body)
      .append("\r\n");
}

// A job this connection reserved: what settling it takes.
struct Held {
  std::string tube;
  std::string job_id;
  std::uint64_t token = 0;
  Clock::time_point deadline;
  Millis ttr{0};
};

struct Conn {
  std::string used = "default";
  std::vector<std::string> watched{"default"};
  std::map<std::uint64_t, Held> held;  // by the beanstalkd id
  bool producer = false;
  bool worker = false;
  bool close = false;  // after this command's answer
  std::string name;    // who reserves (ReserveOptions::worker)
};

// What serve counts per tube for stats-tube (this serve's connections).
struct TubeCounts {
  std::int64_t using_ = 0, watching = 0, waiting = 0;
  std::int64_t cmd_delete = 0, cmd_pause = 0;
  // This serve's last pause-tube (the pause itself, and its end, are
  // Redis's: a timed pause of the topic).
  std::int64_t pause_s = 0;
  Clock::time_point pause_until{};
};

}  // namespace

bool loopback_only(const std::string& address) {
  asio::io_context io;
  tcp::resolver resolver(io);
  boost::system::error_code ec;
  const auto found = resolver.resolve(address, "0", tcp::resolver::passive, ec);
  if (ec || found.empty()) return false;
  for (const auto& e : found) {
    if (!e.endpoint().address().is_loopback()) return false;
  }
  return true;
}

// The coroutines below avoid what GCC 12 miscompiles in a coroutine: arrays
// and initializer lists (std::min({...})) in its frame, and aggregate
// temporaries (Taken{...}) in a co_await's arguments; they crashed serve.
struct BeanstalkServer::State : std::enable_shared_from_this<State> {
  State(Runtime& rt, BeanstalkOptions o, ApiContext& c)
      : runtime(rt), opts(std::move(o)), ctx(c), accepting(shard_io(rt, 0)) {
    std::random_device rd;
    char buf[17];
    std::snprintf(buf, sizeof buf, "%08x%08x", rd(), rd());
    instance_id = buf;
  }

  Runtime& runtime;
  BeanstalkOptions opts;
  ApiContext& ctx;
  asio::io_context& accepting;
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  std::atomic<bool> stopping{false};
  std::atomic<int> connections{0};
  std::string instance_id;
  const Clock::time_point started = Clock::now();

  // Counters of stats (this serve's, since it started).
  std::array<std::atomic<std::int64_t>, beanstalk::kVerbs> cmd_counts{};
  std::atomic<std::int64_t> total_connections{0}, producers{0}, workers{0}, waiting{0};
  std::atomic<std::int64_t> total_jobs{0}, reserves_without_timeout{0};

  Sessions sessions;
  std::mutex mu;
  std::map<std::string, std::pair<std::uint64_t, std::uint64_t>>
      ranges;  // GUARDED_BY(mu): tube -> [next, end)
  // Blocks taken by connections that ran out at the same time as another.
  std::map<std::string, std::vector<std::pair<std::uint64_t, std::uint64_t>>>
      spare_ids;                                                         // GUARDED_BY(mu)
  std::map<std::uint64_t, std::string> block_topics;                     // GUARDED_BY(mu): a cache
  std::map<std::uint64_t, std::pair<std::string, std::string>> aliases;  // GUARDED_BY(mu)
  std::map<std::string, std::uint64_t> alias_of;                         // GUARDED_BY(mu)
  std::map<std::string, TubeCounts> tubes;                               // GUARDED_BY(mu)

  Client& client() { return ctx.client; }
  // The drain began: this face's stop(), or the server's (ctx.stop() wakes
  // the reserves waiting on the hub before stop() reaches this face).
  bool draining() const { return stopping || ctx.stopping; }

  // ---- ids

  // A new id in tube: from this serve's block for it, or a new block.
  awaitable<std::uint64_t> take_id(const std::string& tube) {
    {
      std::lock_guard lock(mu);
      auto& r = ranges[tube];
      if (r.first >= r.second) {
        auto spare = spare_ids.find(tube);
        if (spare != spare_ids.end() && !spare->second.empty()) {
          r = spare->second.back();
          spare->second.pop_back();
        }
      }
      if (r.first < r.second) co_return r.first++;
    }
    const auto block = co_await await_callback<std::uint64_t>([&](Callback<std::uint64_t> cb) {
      ClientAccess::take_id_block(client(), tube, std::move(cb));
    });
    const std::uint64_t first = block * ClientAccess::kIdBlock;
    std::lock_guard lock(mu);
    block_topics[block] = tube;
    auto& r = ranges[tube];
    // Connections that ran out at once each took a block: this one's first
    // id is used here, and its rest kept for when the range runs out (none
    // is wasted).
    if (r.first >= r.second) {
      r = {first + 1, first + ClientAccess::kIdBlock};
    } else {
      spare_ids[tube].emplace_back(first + 1, first + ClientAccess::kIdBlock);
    }
    co_return first;
  }

  awaitable<std::string> block_topic(std::uint64_t block) {
    {
      std::lock_guard lock(mu);
      auto it = block_topics.find(block);
      if (it != block_topics.end()) co_return it->second;
    }
    auto topic = co_await await_callback<std::string>([&](Callback<std::string> cb) {
      ClientAccess::id_block_topic(client(), block, std::move(cb));
    });
    if (!topic.empty()) {
      std::lock_guard lock(mu);
      if (block_topics.size() > kAliasesMax) block_topics.clear();
      block_topics[block] = topic;
    }
    co_return topic;
  }

  // The beanstalkd id of a job of tube: its own id when that is one of this
  // face's ids for tube, else an alias this serve gives it.
  awaitable<std::uint64_t> id_of(const std::string& tube, const std::string& job_id) {
    if (auto n = canonical_number(job_id); n && *n / ClientAccess::kIdBlock > 0) {
      if (co_await block_topic(*n / ClientAccess::kIdBlock) == tube) co_return *n;
    }
    const std::string key = tube + '\n' + job_id;
    {
      std::lock_guard lock(mu);
      auto it = alias_of.find(key);
      if (it != alias_of.end()) co_return it->second;
    }
    const auto n = co_await take_id(tube);
    std::lock_guard lock(mu);
    if (aliases.size() >= kAliasesMax) {
      aliases.erase(aliases.begin(), std::next(aliases.begin(), kAliasesMax / 2));
      alias_of.clear();
      for (const auto& entry : aliases) {
        alias_of[entry.second.first + '\n' + entry.second.second] = entry.first;
      }
    }
    aliases[n] = {tube, job_id};
    alias_of[key] = n;
    co_return n;
  }

  // Where the job of a beanstalkd id is: its tube and its id there.
  awaitable<std::optional<std::pair<std::string, std::string>>> locate(std::uint64_t id) {
    {
      std::lock_guard lock(mu);
      auto it = aliases.find(id);
      if (it != aliases.end()) co_return it->second;
    }
    const auto block = id / ClientAccess::kIdBlock;
    if (block == 0) co_return std::nullopt;
    auto tube = co_await block_topic(block);
    if (tube.empty()) co_return std::nullopt;
    co_return std::make_pair(std::move(tube), std::to_string(id));
  }

  // The job of a beanstalkd id, unless it is gone or done.
  struct Found {
    std::string tube;
    std::string job_id;
    Job job;
  };
  awaitable<std::optional<Found>> find(std::uint64_t id, bool with_body) {
    auto where = co_await locate(id);
    if (!where) co_return std::nullopt;
    auto job = co_await client().get_async(where->first, where->second, with_body, use_awaitable);
    if (!job || job->state == JobState::done) co_return std::nullopt;
    Found f;
    f.tube = std::move(where->first);
    f.job_id = std::move(where->second);
    f.job = std::move(*job);
    co_return f;
  }

  // ---- tubes this serve's connections name

  // A tube's entry lives while a connection of this serve uses, watches or
  // waits on it, or it is paused from here: a client naming tube after tube
  // must not grow it for good (its counters go with it, as beanstalkd's go
  // with a tube it drops).
  void count_tube(const std::string& tube, std::int64_t TubeCounts::*field, int delta) {
    std::lock_guard lock(mu);
    auto& t = tubes[tube];
    t.*field += delta;
    if (t.using_ == 0 && t.watching == 0 && t.waiting == 0 && t.pause_until <= Clock::now()) {
      tubes.erase(tube);
    }
  }

  bool known_tube(const std::string& tube) {
    std::lock_guard lock(mu);
    auto it = tubes.find(tube);
    return tube == "default" ||
           (it != tubes.end() && (it->second.using_ > 0 || it->second.watching > 0));
  }

  // ---- connections

  // A connection accepted: its session, unless there are as many as it takes.
  void take(tcp::socket socket) {
    if (connections >= opts.max_connections) {
      boost::system::error_code ignored;
      socket.close(ignored);  // beanstalkd has no answer for "busy"
      return;
    }
    ++connections;
    const auto number = ++total_connections;
    auto stream = std::make_shared<beast::tcp_stream>(std::move(socket));
    asio::co_spawn(stream->get_executor(), session(stream, number), asio::detached);
  }

  awaitable<void> session(std::shared_ptr<beast::tcp_stream> stream, std::int64_t number) {
    auto self = shared_from_this();
    const auto idle = sessions.add(stream);
    Conn c;
    c.name = "beanstalk-" + std::to_string(number);
    count_tube(c.used, &TubeCounts::using_, 1);
    count_tube("default", &TubeCounts::watching, 1);
    beanstalk::Framer framer(opts.max_job_size);
    std::string out;
    // Small: a connection between commands holds it, and there may be
    // thousands of them.
    std::vector<char> in(4096);
    boost::system::error_code ec;
    while (!c.close) {
      // Every command already here runs, in order; their answers go out
      // in one write (64 KiB at a time: full, the rest wait their turn).
      bool full = false;
      while (!c.close) {
        auto ev = framer.next();
        if (!ev) break;
        if (auto* refusal = std::get_if<std::string_view>(&*ev)) {
          out.append(*refusal);
        } else {
          co_await run(c, std::get<Command>(*ev), out, *stream);
        }
        if (out.size() >= (64u << 10)) {
          full = true;
          break;
        }
      }
      if (!out.empty()) {
        // No timer: arming one per answer costs a system call; a client
        // that stops reading holds only its own session, and its answers
        // are bounded (64 KiB and the socket's buffer).
        stream->expires_never();
        co_await asio::async_write(*stream, asio::buffer(out),
                                   asio::redirect_error(use_awaitable, ec));
        out.clear();
        if (ec) break;
      }
      if (c.close) break;
      if (full) continue;
      // Between commands, a connection may wait for good (but not while
      // the server drains: then until it holds no job, its reservations'
      // ends at most); within one, not long.
      const bool between = !framer.mid_command();
      Clock::time_point next_margin;
      deadline_soon(c, next_margin);  // (forgets the lapsed)
      if (between && draining() && c.held.empty()) break;
      if (between && draining()) {
        *idle = true;
        stream->expires_at(next_margin + kSafetyMargin);
      } else if (between) {
        *idle = true;
        stream->expires_never();
      } else {
        stream->expires_after(opts.command_timeout);
      }
      const auto n = co_await stream->async_read_some(asio::buffer(in),
                                                      asio::redirect_error(use_awaitable, ec));
      *idle = false;
      if ((ec == asio::error::operation_aborted || ec == beast::error::timeout) && draining() &&
          between) {
        continue;  // (stop() cut the wait short, or a held job lapsed: look again)
      }
      if (ec) break;
      framer.feed(std::string_view(in.data(), n));
    }
    co_await end_session(c, *stream);
    sessions.remove(stream);
    --connections;
  }

  // The connection's reserved jobs go back at once, as beanstalkd's do when
  // their connection closes.
  awaitable<void> end_session(Conn& c, beast::tcp_stream& stream) {
    boost::system::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.close();
    // All at once: the calls share the pipeline, so a connection that held
    // many jobs gives them back in one round trip, not one each.
    std::vector<Held> held;
    held.reserve(c.held.size());
    for (const auto& entry : c.held) held.push_back(entry.second);
    std::vector<Result<Outcome>> released;
    try {
      released = co_await await_each<Outcome>(held, [&](const Held& h) {
        return client().release_async(h.tube, h.job_id, h.token, Millis{0}, std::nullopt,
                                      asio::deferred);
      });
    } catch (const std::exception& e) {
      // (Not an Error, which each call's result holds: out of memory, say.
      // The jobs come back when their TTRs lapse; the session still ends.)
      spdlog::error("beanstalk: releasing the jobs of a closed connection: {}", e.what());
    }
    for (std::size_t i = 0; i < released.size(); ++i) {
      if (released[i].ok()) continue;
      spdlog::warn("beanstalk: releasing {}/{} of a closed connection: {}", held[i].tube,
                   held[i].job_id, released[i].error().what());
    }
    count_tube(c.used, &TubeCounts::using_, -1);
    for (const auto& t : c.watched) count_tube(t, &TubeCounts::watching, -1);
    if (c.producer) --producers;
    if (c.worker) --workers;
  }

  // ---- commands

  awaitable<void> run(Conn& c, Command& cmd, std::string& out, beast::tcp_stream& stream) {
    ++cmd_counts[static_cast<std::size_t>(cmd.verb)];
    try {
      co_await dispatch(c, cmd, out, stream);
    } catch (const Error& e) {
      spdlog::warn("beanstalk {}: {}", beanstalk::verb_name(cmd.verb), e.what());
      out.append(e.code() == Errc::invalid_argument ? beanstalk::kBadFormat : kInternalError);
    } catch (const std::exception& e) {
      spdlog::error("beanstalk {}: {}", beanstalk::verb_name(cmd.verb), e.what());
      out.append(kInternalError);
    }
  }

  awaitable<void> dispatch(Conn& c, Command& cmd, std::string& out, beast::tcp_stream& stream) {
    switch (cmd.verb) {
      case Verb::put:
        co_return co_await put(c, cmd, out);
      case Verb::use:
        if (!topic_can_be(cmd.tube)) break;
        count_tube(c.used, &TubeCounts::using_, -1);
        c.used = cmd.tube;
        count_tube(c.used, &TubeCounts::using_, 1);
        out.append("USING ").append(c.used).append("\r\n");
        co_return;
      case Verb::watch:
        if (!topic_can_be(cmd.tube)) break;
        if (std::find(c.watched.begin(), c.watched.end(), cmd.tube) == c.watched.end()) {
          c.watched.push_back(cmd.tube);
          count_tube(cmd.tube, &TubeCounts::watching, 1);
        }
        out.append("WATCHING ").append(std::to_string(c.watched.size())).append("\r\n");
        co_return;
      case Verb::ignore: {
        auto it = std::find(c.watched.begin(), c.watched.end(), cmd.tube);
        if (it != c.watched.end()) {
          if (c.watched.size() == 1) {
            out.append("NOT_IGNORED\r\n");
            co_return;
          }
          c.watched.erase(it);
          count_tube(cmd.tube, &TubeCounts::watching, -1);
        }
        out.append("WATCHING ").append(std::to_string(c.watched.size())).append("\r\n");
        co_return;
      }
      case Verb::reserve:
        co_return co_await reserve(c, std::nullopt, out, stream);
      case Verb::reserve_with_timeout:
        co_return co_await reserve(
            c, cmd.timeout < 0 ? std::nullopt : std::optional<std::int64_t>(cmd.timeout), out,
            stream);
      case Verb::reserve_job:
        co_return co_await reserve_job(c, cmd.id, out);
      case Verb::remove:
        co_return co_await remove(c, cmd.id, out);
      case Verb::release:
        co_return co_await release(c, cmd, out);
      case Verb::bury:
        co_return co_await bury(c, cmd, out);
      case Verb::touch:
        co_return co_await touch(c, cmd.id, out);
      case Verb::peek:
        co_return co_await peek(cmd.id, out);
      case Verb::peek_ready:
        co_return co_await peek_state(c, JobState::ready, out);
      case Verb::peek_delayed:
        co_return co_await peek_state(c, JobState::delayed, out);
      case Verb::peek_buried:
        co_return co_await peek_state(c, JobState::dead, out);
      case Verb::kick:
        co_return co_await kick(c, cmd.bound, out);
      case Verb::kick_job:
        co_return co_await kick_job(cmd.id, out);
      case Verb::stats_job:
        co_return co_await stats_job(cmd.id, out);
      case Verb::stats_tube:
        co_return co_await stats_tube(cmd.tube, out);
      case Verb::stats:
        co_return co_await stats(out);
      case Verb::list_tubes:
        co_return co_await list_tubes(out);
      case Verb::list_tube_used:
        out.append("USING ").append(c.used).append("\r\n");
        co_return;
      case Verb::list_tubes_watched: {
        std::string yaml = "---\n";
        for (const auto& t : c.watched) yaml.append("- ").append(t).push_back('\n');
        ok_data(out, yaml);
        co_return;
      }
      case Verb::pause_tube:
        co_return co_await pause_tube(cmd, out);
      case Verb::quit:
        c.close = true;
        co_return;
    }
    // A tube name the protocol allows but a topic cannot carry.
    out.append(beanstalk::kBadFormat);
  }

  awaitable<void> put(Conn& c, Command& cmd, std::string& out) {
    if (draining()) {
      out.append("DRAINING\r\n");
      co_return;
    }
    const std::int64_t ttr_ms = std::max<std::int64_t>(cmd.ttr, 1) * 1000;
    const std::int64_t delay_ms = static_cast<std::int64_t>(cmd.delay) * 1000;
    if (ttr_ms > limits::kTtrMax || delay_ms > limits::kDelayMax) {
      out.append(beanstalk::kBadFormat);
      co_return;
    }
    if (!c.producer) {
      c.producer = true;
      ++producers;
    }
    const auto id = co_await take_id(c.used);
    JobSpec spec;
    spec.id = std::to_string(id);
    spec.body = std::move(cmd.body);
    if (delay_ms > 0) spec.delay = Millis{delay_ms};
    spec.priority = priority_of(cmd.pri);
    spec.ttr = Millis{ttr_ms};
    // beanstalkd retries a job whose reservation lapses for good; redisched
    // counts lapses as attempts: as many as it allows.
    spec.max_attempts = static_cast<int>(limits::kAttemptsMax);
    const auto outcome = co_await client().put_async(c.used, spec, use_awaitable);
    if (outcome != PutOutcome::created) {
      spdlog::error("beanstalk put: id {} of tube {} was taken", id, c.used);
      out.append(kInternalError);
      co_return;
    }
    ++total_jobs;
    out.append("INSERTED ").append(std::to_string(id)).append("\r\n");
  }

  // Forgets held jobs whose reservations lapsed; whether one is in its
  // last second (beanstalkd's DEADLINE_SOON), and when the next one will be.
  static bool deadline_soon(Conn& c, Clock::time_point& next_margin) {
    const auto now = Clock::now();
    next_margin = Clock::time_point::max();
    bool soon = false;
    for (auto it = c.held.begin(); it != c.held.end();) {
      if (it->second.deadline <= now) {
        it = c.held.erase(it);
        continue;
      }
      const auto margin = it->second.deadline - kSafetyMargin;
      if (margin <= now) soon = true;
      next_margin = std::min(next_margin, margin);
      ++it;
    }
    return soon;
  }

  struct Taken {
    std::string tube;
    Reservation job;
    std::int64_t now_ms = 0;
  };
  struct Attempt {
    std::optional<Taken> taken;
    Clock::time_point wake = Clock::time_point::max();
  };

  static std::optional<Taken> first_of(const std::string& tube, ReserveResult& r) {
    if (r.jobs.empty()) return std::nullopt;
    Taken t;
    t.tube = tube;
    t.job = std::move(r.jobs.front());
    t.now_ms = r.now_ms;
    return t;
  }

  ReserveOptions reserve_options(const Conn& c) const {
    ReserveOptions o;
    o.count = 1;
    o.worker = c.name;
    return o;
  }

  // One look for a job in the watch list: the tube alone, or, on several,
  // the one whose next ready job goes first.
  awaitable<Attempt> try_reserve(const Conn& c) {
    Attempt a;
    const auto now = Clock::now();
    if (c.watched.size() == 1) {
      const auto& tube = c.watched.front();
      auto r = co_await client().reserve_async(tube, reserve_options(c), use_awaitable);
      a.taken = first_of(tube, r);
      if (!a.taken && r.next_ms > 0) {
        a.wake = now + Millis{std::max<std::int64_t>(r.next_ms - r.now_ms, 0)};
      }
      co_return a;
    }
    auto fronts = co_await await_each<ListPage>(c.watched, [&](const std::string& t) {
      return client().list_async(t, JobState::ready, 0, 1, false, asio::deferred);
    });
    std::vector<std::pair<const Job*, std::size_t>> order;
    for (std::size_t i = 0; i < fronts.size(); ++i) {
      if (fronts[i].ok() && !fronts[i].value().jobs.empty())
        order.emplace_back(&fronts[i].value().jobs.front(), i);
    }
    std::sort(order.begin(), order.end(), [](const auto& x, const auto& y) {
      const Job& a1 = *x.first;
      const Job& b1 = *y.first;
      if (a1.priority != b1.priority) return a1.priority > b1.priority;
      if (a1.due_ms != b1.due_ms) return a1.due_ms < b1.due_ms;
      return a1.created_ms < b1.created_ms;
    });
    for (std::size_t k = 0; k < order.size(); ++k) {
      const auto& tube = c.watched[order[k].second];
      auto r = co_await client().reserve_async(tube, reserve_options(c), use_awaitable);
      a.taken = first_of(tube, r);
      if (a.taken) co_return a;
    }
    auto delayed = co_await await_each<ListPage>(c.watched, [&](const std::string& t) {
      return client().list_async(t, JobState::delayed, 0, 1, false, asio::deferred);
    });
    a.wake = now + kMultiTubeRecheck;
    const auto wall = unix_ms();
    for (auto& d : delayed) {
      if (d.ok() && !d.value().jobs.empty()) {
        const auto due = d.value().jobs.front().due_ms;
        a.wake = std::min(a.wake, now + Millis{std::max<std::int64_t>(due - wall, 0)});
      }
    }
    co_return a;
  }

  awaitable<void> reserve(Conn& c, std::optional<std::int64_t> timeout_s, std::string& out,
                          beast::tcp_stream& stream) {
    if (!c.worker) {
      c.worker = true;
      ++workers;
    }
    ++waiting;
    for (const auto& t : c.watched) count_tube(t, &TubeCounts::waiting, 1);
    std::vector<std::shared_ptr<WakeHub::Ticket>> tickets;
    // Whatever ends the wait (an answer, a close, a call that throws), the
    // counts and the hub's tickets are given back.
    const auto done_waiting = [&] {
      for (const auto& t : tickets) ctx.hub.forget(t);
      tickets.clear();
      --waiting;
      for (const auto& t : c.watched) count_tube(t, &TubeCounts::waiting, -1);
    };
    try {
      co_await reserve_waiting(c, timeout_s, out, stream, tickets);
    } catch (...) {
      done_waiting();
      throw;
    }
    done_waiting();
  }

  // reserve's loop: looks, then waits until a signal, a job due, the
  // deadline, the safety margin of a job held, or the peer's close.
  awaitable<void> reserve_waiting(Conn& c, std::optional<std::int64_t> timeout_s, std::string& out,
                                  beast::tcp_stream& stream,
                                  std::vector<std::shared_ptr<WakeHub::Ticket>>& tickets) {
    const auto until =
        timeout_s ? Clock::now() + std::chrono::seconds(*timeout_s) : Clock::time_point::max();
    const auto ex = co_await asio::this_coro::executor;
    // reserve-with-timeout 0 never waits: no signal to watch for (a watch
    // would subscribe the tube, and every put would then signal serve).
    const bool may_wait = !timeout_s || *timeout_s > 0;
    bool watch_socket = true;
    for (;;) {
      Clock::time_point margin;
      const bool soon = deadline_soon(c, margin);
      auto woken = OneShot::make(ex);
      for (const auto& t : tickets) ctx.hub.forget(t);
      tickets.clear();
      if (may_wait && !soon) {
        for (const auto& t : c.watched) tickets.push_back(ctx.hub.watch(t, woken));
      }
      // Read after the watch: a drain that woke the hub before it is seen.
      if (draining()) {
        if (timeout_s) {
          out.append("TIMED_OUT\r\n");
        } else {
          c.close = true;
        }
        co_return;
      }
      auto a = co_await try_reserve(c);
      if (a.taken) {
        co_await hand_out(c, std::move(*a.taken), "RESERVED", out);
        co_return;
      }
      // In the last second of a job held, and nothing ready: beanstalkd's
      // DEADLINE_SOON (a ready job is handed out all the same).
      if (soon) {
        out.append("DEADLINE_SOON\r\n");
        co_return;
      }
      if (Clock::now() >= until) {
        out.append("TIMED_OUT\r\n");
        co_return;
      }
      auto readable = std::make_shared<bool>(false);
      if (watch_socket) {
        stream.socket().async_wait(tcp::socket::wait_read,
                                   [woken, readable](boost::system::error_code e) {
                                     if (e) return;
                                     *readable = true;
                                     woken->fire();
                                   });
      }
      const auto wake = std::min(std::min(a.wake, until), margin);
      co_await woken->wait(wake);
      if (watch_socket) {
        boost::system::error_code ignored;
        stream.socket().cancel(ignored);
      }
      if (*readable) {
        boost::system::error_code e;
        const auto n = stream.socket().available(e);
        if (e || n == 0) {  // the peer closed (or reset): nobody to hand a job to
          c.close = true;
          co_return;
        }
        watch_socket = false;  // bytes of its next command: they wait their turn
      }
    }
  }

  // A reserved job: held by the connection, and its answer.
  awaitable<void> hand_out(Conn& c, Taken t, std::string_view word, std::string& out) {
    const auto id = co_await id_of(t.tube, t.job.id);
    Held h;
    h.tube = t.tube;
    h.job_id = t.job.id;
    h.token = t.job.token;
    h.ttr = Millis{std::max<std::int64_t>(t.job.deadline_ms - t.now_ms, 0)};
    h.deadline = Clock::now() + h.ttr;
    c.held[id] = std::move(h);
    ctx.metrics.job_event("reserved", t.tube, t.job.id);
    job_reply(out, word, id, t.job.body);
  }

  // reserve-job: a job of any tube, ready, delayed or buried, by its id,
  // ahead of every other (the library's reservejob, one atomic call).
  awaitable<void> reserve_job(Conn& c, std::uint64_t id, std::string& out) {
    std::optional<std::pair<std::string, std::string>> where;
    if (!c.held.contains(id)) where = co_await locate(id);
    if (!where) {
      out.append(kNotFound);
      co_return;
    }
    auto r = co_await client().reserve_job_async(where->first, where->second, Millis{0}, c.name,
                                                 use_awaitable);
    if (r.outcome != Outcome::ok) {
      out.append(kNotFound);
      co_return;
    }
    Taken mine;
    mine.tube = std::move(where->first);
    mine.job = std::move(r.job);
    mine.now_ms = r.now_ms;
    co_await hand_out(c, std::move(mine), "RESERVED", out);
  }

  // The job held by this connection under id, or nullptr (a lapsed
  // reservation is no longer held).
  static Held* held(Conn& c, std::uint64_t id) {
    auto it = c.held.find(id);
    if (it == c.held.end()) return nullptr;
    if (it->second.deadline <= Clock::now()) {
      c.held.erase(it);
      return nullptr;
    }
    return &it->second;
  }

  awaitable<void> remove(Conn& c, std::uint64_t id, std::string& out) {
    if (Held* h = held(c, id)) {
      const Held mine = *h;
      c.held.erase(id);
      count_tube(mine.tube, &TubeCounts::cmd_delete, 1);
      const auto o = co_await made_on_primary(
          client().ack_async(mine.tube, mine.job_id, mine.token, Millis{0}, use_awaitable),
          Outcome::ok);
      out.append(o == Outcome::ok ? "DELETED\r\n" : kNotFound);
      co_return;
    }
    auto found = co_await find(id, false);
    if (found) count_tube(found->tube, &TubeCounts::cmd_delete, 1);
    // Another connection's reservation is not this one's to delete.
    if (!found || found->job.state == JobState::reserved) {
      out.append(kNotFound);
      co_return;
    }
    const bool gone = co_await made_on_primary(
        client().remove_async(found->tube, found->job_id, use_awaitable), true);
    out.append(gone ? "DELETED\r\n" : kNotFound);
  }

  awaitable<void> release(Conn& c, const Command& cmd, std::string& out) {
    Held* h = held(c, cmd.id);
    if (!h) {
      out.append(kNotFound);
      co_return;
    }
    const std::int64_t delay_ms = static_cast<std::int64_t>(cmd.delay) * 1000;
    if (delay_ms > limits::kDelayMax) {
      out.append(beanstalk::kBadFormat);
      co_return;
    }
    const Held mine = *h;
    c.held.erase(cmd.id);
    const auto o = co_await made_on_primary(
        client().release_async(mine.tube, mine.job_id, mine.token, Millis{delay_ms},
                               priority_of(cmd.pri), use_awaitable),
        Outcome::ok);
    out.append(o == Outcome::ok ? "RELEASED\r\n" : kNotFound);
  }

  awaitable<void> bury(Conn& c, const Command& cmd, std::string& out) {
    Held* h = held(c, cmd.id);
    if (!h) {
      out.append(kNotFound);
      co_return;
    }
    const Held mine = *h;
    c.held.erase(cmd.id);
    FailResult buried;  // not a temporary in co_await's arguments (GCC 12)
    buried.state = JobState::dead;
    const auto r = co_await made_on_primary(
        await_callback<FailResult>([&](Callback<FailResult> cb) {
          ClientAccess::bury(client(), mine.tube, mine.job_id, mine.token, "buried",
                             priority_of(cmd.pri), std::move(cb));
        }),
        buried);
    out.append(r.outcome == Outcome::ok ? "BURIED\r\n" : kNotFound);
  }

  awaitable<void> touch(Conn& c, std::uint64_t id, std::string& out) {
    Held* h = held(c, id);
    if (!h) {
      out.append(kNotFound);
      co_return;
    }
    const auto r =
        co_await client().touch_async(h->tube, h->job_id, h->token, Millis{0}, use_awaitable);
    if (r.outcome != Outcome::ok) {
      c.held.erase(id);
      out.append(kNotFound);
      co_return;
    }
    h->deadline = Clock::now() + h->ttr;
    out.append("TOUCHED\r\n");
  }

  awaitable<void> peek(std::uint64_t id, std::string& out) {
    auto found = co_await find(id, true);
    if (!found) {
      out.append(kNotFound);
      co_return;
    }
    job_reply(out, "FOUND", id, found->job.body);
  }

  awaitable<void> peek_state(const Conn& c, JobState state, std::string& out) {
    auto page = co_await client().list_async(c.used, state, 0, 1, true, use_awaitable);
    if (page.jobs.empty()) {
      out.append(kNotFound);
      co_return;
    }
    const auto& job = page.jobs.front();
    job_reply(out, "FOUND", co_await id_of(c.used, job.id), job.body);
  }

  // Buried jobs first; when there are none, delayed ones.
  awaitable<void> kick(const Conn& c, std::uint64_t bound, std::string& out) {
    const auto st = co_await client().stats_async(c.used, use_awaitable);
    std::uint64_t kicked = 0;
    while (kicked < bound) {
      const int limit = static_cast<int>(
          std::min<std::uint64_t>(bound - kicked, static_cast<std::uint64_t>(limits::kBatchMax)));
      std::uint64_t n = 0;
      if (st.dead > 0) {
        n = static_cast<std::uint64_t>(
            co_await client().kick_all_async(c.used, limit, use_awaitable));
      } else {
        n = static_cast<std::uint64_t>(
            (co_await client().promote_all_async(c.used, limit, use_awaitable)).done);
      }
      kicked += n;
      if (n < static_cast<std::uint64_t>(limit)) break;
    }
    out.append("KICKED ").append(std::to_string(kicked)).append("\r\n");
  }

  awaitable<void> kick_job(std::uint64_t id, std::string& out) {
    auto found = co_await find(id, false);
    int n = 0;
    if (found) {
      const std::vector<std::string> ids{found->job_id};
      if (found->job.state == JobState::dead) {
        n = co_await client().kick_async(found->tube, ids, use_awaitable);
      } else if (found->job.state == JobState::delayed) {
        n = co_await client().promote_async(found->tube, ids, use_awaitable);
      }
    }
    out.append(n > 0 ? "KICKED\r\n" : kNotFound);
  }

  static std::string_view state_name(JobState s) {
    switch (s) {
      case JobState::ready:
        return "ready";
      case JobState::reserved:
        return "reserved";
      case JobState::dead:
        return "buried";
      default:  // delayed, and blocked: waiting for its time
        return "delayed";
    }
  }

  awaitable<void> stats_job(std::uint64_t id, std::string& out) {
    auto found = co_await find(id, false);
    if (!found) {
      out.append(kNotFound);
      co_return;
    }
    const std::string& tube = found->tube;
    const Job* job = &found->job;
    const auto now = unix_ms();
    std::int64_t left = 0;
    if (job->state == JobState::reserved) left = job->deadline_ms - now;
    if (job->state == JobState::delayed) left = job->due_ms - now;
    std::int64_t timeouts = 0;
    for (const auto& a : job->history) {
      if (a.outcome == AttemptOutcome::lapsed) ++timeouts;
    }
    std::string y = "---\n";
    yaml_line(y, "id", static_cast<std::int64_t>(id));
    yaml_line(y, "tube", tube);
    yaml_line(y, "state", state_name(job->state));
    yaml_line(y, "pri", pri_of(job->priority));
    yaml_line(y, "age", std::max<std::int64_t>(now - job->created_ms, 0) / 1000);
    yaml_line(y, "delay", std::max<std::int64_t>(job->due_ms - job->created_ms, 0) / 1000);
    yaml_line(y, "ttr", job->ttr.count() / 1000);
    yaml_line(y, "time-left", std::max<std::int64_t>(left, 0) / 1000);
    yaml_line(y, "file", 0);
    yaml_line(y, "reserves", job->attempts + (job->state == JobState::reserved ? 1 : 0));
    yaml_line(y, "timeouts", timeouts);
    yaml_line(y, "releases", 0);
    yaml_line(y, "buries", job->state == JobState::dead ? 1 : 0);
    yaml_line(y, "kicks", 0);
    ok_data(out, y);
  }

  awaitable<void> stats_tube(const std::string& tube, std::string& out) {
    if (!topic_can_be(tube)) {
      out.append(kNotFound);
      co_return;
    }
    const auto st = co_await client().stats_async(tube, use_awaitable);
    const bool exists =
        known_tube(tube) || st.delayed + st.ready + st.reserved + st.dead + st.blocked > 0;
    if (!exists) {
      out.append(kNotFound);
      co_return;
    }
    TubeCounts counts;
    {
      std::lock_guard lock(mu);
      auto it = tubes.find(tube);
      if (it != tubes.end()) counts = it->second;
    }
    // The pause is the topic's, whoever paused it; its length is known
    // where it was asked for.
    const auto left = st.paused && st.pause_end_ms > 0
                          ? std::max<std::int64_t>((st.pause_end_ms - unix_ms()) / 1000, 0)
                          : 0;
    std::string y = "---\n";
    yaml_line(y, "name", tube);
    // Not counted apart: every ready job (docs/beanstalkd.md).
    yaml_line(y, "current-jobs-urgent", st.ready);
    yaml_line(y, "current-jobs-ready", st.ready);
    yaml_line(y, "current-jobs-reserved", st.reserved);
    yaml_line(y, "current-jobs-delayed", st.delayed + st.blocked);
    yaml_line(y, "current-jobs-buried", st.dead);
    yaml_line(y, "total-jobs", st.put_total);
    yaml_line(y, "current-using", counts.using_);
    yaml_line(y, "current-watching", counts.watching);
    yaml_line(y, "current-waiting", counts.waiting);
    yaml_line(y, "cmd-delete", counts.cmd_delete);
    yaml_line(y, "cmd-pause-tube", counts.cmd_pause);
    yaml_line(y, "pause", st.paused && counts.pause_until > Clock::now() ? counts.pause_s : 0);
    yaml_line(y, "pause-time-left", left);
    ok_data(out, y);
  }

  awaitable<std::vector<std::string>> all_tubes() {
    auto topics = co_await client().topics_async(use_awaitable);
    std::set<std::string> names(topics.begin(), topics.end());
    names.insert("default");
    {
      std::lock_guard lock(mu);
      for (const auto& entry : tubes) {
        if (entry.second.using_ > 0 || entry.second.watching > 0) names.insert(entry.first);
      }
    }
    co_return std::vector<std::string>(names.begin(), names.end());
  }

  awaitable<void> list_tubes(std::string& out) {
    std::string yaml = "---\n";
    for (const auto& t : co_await all_tubes()) yaml.append("- ").append(t).push_back('\n');
    ok_data(out, yaml);
  }

  awaitable<void> stats(std::string& out) {
    const auto tubes_now = co_await all_tubes();
    auto all = co_await await_each<TopicStats>(
        tubes_now, [&](const std::string& t) { return client().stats_async(t, asio::deferred); });
    TopicStats sum;
    for (auto& r : all) {
      if (!r.ok()) continue;
      const auto& s = r.value();
      sum.ready += s.ready;
      sum.reserved += s.reserved;
      sum.delayed += s.delayed + s.blocked;
      sum.dead += s.dead;
      sum.lapsed_total += s.lapsed_total;
    }
    const auto count = [&](Verb v) { return cmd_counts[static_cast<std::size_t>(v)].load(); };
    rusage ru{};
    ::getrusage(RUSAGE_SELF, &ru);
    utsname un{};
    ::uname(&un);
    const auto secs = [](const timeval& tv) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%ld.%06ld", static_cast<long>(tv.tv_sec),
                    static_cast<long>(tv.tv_usec));
      return std::string(buf);
    };
    std::string y = "---\n";
    yaml_line(y, "current-jobs-urgent", sum.ready);
    yaml_line(y, "current-jobs-ready", sum.ready);
    yaml_line(y, "current-jobs-reserved", sum.reserved);
    yaml_line(y, "current-jobs-delayed", sum.delayed);
    yaml_line(y, "current-jobs-buried", sum.dead);
    yaml_line(y, "cmd-put", count(Verb::put));
    yaml_line(y, "cmd-peek", count(Verb::peek));
    yaml_line(y, "cmd-peek-ready", count(Verb::peek_ready));
    yaml_line(y, "cmd-peek-delayed", count(Verb::peek_delayed));
    yaml_line(y, "cmd-peek-buried", count(Verb::peek_buried));
    yaml_line(y, "cmd-reserve", count(Verb::reserve));
    yaml_line(y, "cmd-reserve-with-timeout", count(Verb::reserve_with_timeout));
    yaml_line(y, "cmd-delete", count(Verb::remove));
    yaml_line(y, "cmd-release", count(Verb::release));
    yaml_line(y, "cmd-use", count(Verb::use));
    yaml_line(y, "cmd-watch", count(Verb::watch));
    yaml_line(y, "cmd-ignore", count(Verb::ignore));
    yaml_line(y, "cmd-bury", count(Verb::bury));
    yaml_line(y, "cmd-kick", count(Verb::kick));
    yaml_line(y, "cmd-touch", count(Verb::touch));
    yaml_line(y, "cmd-stats", count(Verb::stats));
    yaml_line(y, "cmd-stats-job", count(Verb::stats_job));
    yaml_line(y, "cmd-stats-tube", count(Verb::stats_tube));
    yaml_line(y, "cmd-list-tubes", count(Verb::list_tubes));
    yaml_line(y, "cmd-list-tube-used", count(Verb::list_tube_used));
    yaml_line(y, "cmd-list-tubes-watched", count(Verb::list_tubes_watched));
    yaml_line(y, "cmd-pause-tube", count(Verb::pause_tube));
    yaml_line(y, "job-timeouts", sum.lapsed_total);
    yaml_line(y, "total-jobs", total_jobs.load());
    yaml_line(y, "max-job-size", static_cast<std::int64_t>(opts.max_job_size));
    yaml_line(y, "current-tubes", static_cast<std::int64_t>(tubes_now.size()));
    yaml_line(y, "current-connections", connections.load());
    yaml_line(y, "current-producers", producers.load());
    yaml_line(y, "current-workers", workers.load());
    yaml_line(y, "current-waiting", waiting.load());
    yaml_line(y, "total-connections", total_connections.load());
    yaml_line(y, "pid", static_cast<std::int64_t>(::getpid()));
    yaml_line(y, "version", "\"" + std::string(version()) + " (redisched)\"");
    yaml_line(y, "rusage-utime", secs(ru.ru_utime));
    yaml_line(y, "rusage-stime", secs(ru.ru_stime));
    yaml_line(y, "uptime",
              std::chrono::duration_cast<std::chrono::seconds>(Clock::now() - started).count());
    yaml_line(y, "binlog-oldest-index", 0);
    yaml_line(y, "binlog-current-index", 0);
    yaml_line(y, "binlog-records-migrated", 0);
    yaml_line(y, "binlog-records-written", 0);
    yaml_line(y, "binlog-max-size", 0);
    yaml_line(y, "draining", draining() ? "true" : "false");
    yaml_line(y, "id", instance_id);
    yaml_line(y, "hostname", un.nodename);
    yaml_line(y, "os", un.version);
    yaml_line(y, "platform", un.machine);
    ok_data(out, y);
  }

  // Pauses the tube for delay seconds (0: resumes it): a timed pause of the
  // topic, which ends by itself whatever becomes of this serve.
  awaitable<void> pause_tube(const Command& cmd, std::string& out) {
    if (!topic_can_be(cmd.tube)) {
      out.append(kNotFound);
      co_return;
    }
    const auto& tube = cmd.tube;
    const std::int64_t ms = static_cast<std::int64_t>(cmd.delay) * 1000;
    if (ms > limits::kDelayMax) {
      out.append(beanstalk::kBadFormat);
      co_return;
    }
    if (!known_tube(tube)) {
      const auto st = co_await client().stats_async(tube, use_awaitable);
      if (st.delayed + st.ready + st.reserved + st.dead + st.blocked == 0) {
        out.append(kNotFound);
        co_return;
      }
    }
    if (ms > 0) {
      co_await client().pause_async(tube, Millis{ms}, use_awaitable);
    } else {
      co_await client().resume_async(tube, use_awaitable);
    }
    {
      std::lock_guard lock(mu);
      auto& t = tubes[tube];
      ++t.cmd_pause;
      t.pause_s = cmd.delay;
      t.pause_until = Clock::now() + std::chrono::seconds(cmd.delay);
    }
    out.append("PAUSED\r\n");
  }
};

BeanstalkServer::BeanstalkServer(Runtime& runtime, BeanstalkOptions options, ApiContext& ctx)
    : state_(std::make_shared<State>(runtime, std::move(options), ctx)) {}

BeanstalkServer::~BeanstalkServer() { stop(); }

void BeanstalkServer::start() {
  auto& s = *state_;
  s.acceptors = listen_on(s.accepting, s.opts.address, s.opts.port, "--beanstalk");
  accept_on(s.runtime, s.accepting, s.acceptors, s.stopping, "beanstalk",
            [state = state_](tcp::socket socket) { state->take(std::move(socket)); });
}

std::uint16_t BeanstalkServer::port() const {
  return state_->acceptors.front()->local_endpoint().port();
}

void BeanstalkServer::stop() {
  auto s = state_;
  if (s->stopping.exchange(true)) return;
  s->ctx.hub.wake_all();  // waiting reserves look again, and see the drain
  asio::post(s->accepting, [s] {
    boost::system::error_code ignored;
    for (auto& a : s->acceptors) a->close(ignored);
  });
  s->sessions.cancel_idle();
}

void BeanstalkServer::abort() {
  stop();
  state_->sessions.close_all();
}

int BeanstalkServer::connections() const { return state_->connections; }

}  // namespace redisched::server
