// What concerns a topic as a whole: stats, history, topics, list, kick, promote, purge,
// pause, resume, limit, requeue, migrate, move.
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <boost/json/object.hpp>
#include <chrono>
#include <future>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/output.h"
#include "core/shards.h"
#include "redisched/client.h"
#include "redisched/limits.h"
#include "wire/job_json.h"

namespace redisched::cli {
namespace {

namespace json = boost::json;

struct TopicArgs {
  std::string topic, state;
  std::vector<std::string> names;  // topics (stats) or ids (kick)
  std::int64_t offset = 0;
  int count = limits::kBatchMax, limit = limits::kBatchMax;
  bool all = false, no_body = false;
};

// Every topic's stats call goes out at once on the pipeline.
int stats(Session& s, const TopicArgs& a) {
  auto& client = s.client();
  const auto topics = a.names.empty() ? client.topics() : a.names;
  std::vector<std::future<TopicStats>> calls;
  calls.reserve(topics.size());
  for (const auto& t : topics) calls.push_back(client.stats_async(t));
  if (!s.json()) std::cout << "topic\tdelayed\tready\treserved\tdead\tdone\tpaused\n";
  for (std::size_t i = 0; i < topics.size(); ++i) {
    const TopicStats st = calls[i].get();
    if (s.json()) {
      print_json(wire::stats_json(topics[i], st));
    } else {
      std::cout << topics[i] << "\t" << st.delayed << "\t" << st.ready << "\t" << st.reserved
                << "\t" << st.dead << "\t" << st.done << "\t" << (st.paused ? "yes" : "no") << "\n";
    }
  }
  return 0;
}

// The minutes (1h, 24h) or hours (30d) that counted anything, to now, and
// the totals since the history began.
int history(Session& s, const std::string& topic, const std::string& range) {
  const std::int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  const auto span = wire::history_range(range, now);  // (CLI11 checked the name)
  const bool hours = span->step == HistoryStep::hour;
  const auto rows = s.client().history(topic, span->step, span->from_ms, span->to_ms);
  const auto total = s.client().history(topic, HistoryStep::total);
  if (s.json()) {
    for (const auto& r : rows) print_json(wire::history_row_json(r));
    for (const auto& r : total) print_json(wire::history_row_json(r));
    return 0;
  }
  const auto line = [](const std::string& when, const HistoryRow& r) {
    std::cout << when << "\t" << r.put << "\t" << r.started << "\t" << r.done << "\t" << r.failed
              << "\t" << r.dead << "\t" << r.lapsed << "\t"
              << (r.started > 0 ? r.wait_ms / r.started : 0) << "\n";
  };
  std::cout << (hours ? "hour" : "minute")
            << " (UTC)\tput\tstarted\tdone\tfailed\tdead\tlapsed\tmean wait ms\n";
  for (const auto& r : rows) {
    const std::chrono::sys_time<std::chrono::milliseconds> t{std::chrono::milliseconds{r.at_ms}};
    line(fmt::format("{:%Y-%m-%d %H:%M}", std::chrono::floor<std::chrono::minutes>(t)), r);
  }
  for (const auto& r : total) line("total", r);
  return 0;
}

int list(Session& s, const TopicArgs& a) {
  auto state = parse_job_state(a.state);
  if (!state) throw Error(Errc::invalid_argument, "unknown state '" + a.state + "'");
  auto page = s.client().list(a.topic, *state, a.offset, a.count, !a.no_body);
  for (const auto& j : page.jobs) {
    if (s.json()) {
      print_json(wire::job_json(j));
    } else {
      std::cout << j.id << "\tpriority " << j.priority << "\tdue " << j.due_ms << "\t"
                << printable(j.body) << "\n";
    }
  }
  if (!s.json()) std::cout << page.jobs.size() << " of " << page.total << " " << a.state << "\n";
  return 0;
}

// Calls batch() (promote_all, purge_dead) until it has nothing left;
// returns what it did in all.
template <class Batch>
std::int64_t to_the_end(Batch batch) {
  std::int64_t n = 0;
  for (BatchResult r{1, 1}; r.left > 0 && r.done > 0;) {
    r = batch();
    n += r.done;
  }
  return n;
}

// "<verb> n", or {"<verb>": n} with --json.
int print_count(Session& s, const char* verb, std::int64_t n) {
  if (s.json()) {
    print_json(json::object{{verb, n}});
  } else {
    std::cout << verb << " " << n << "\n";
  }
  return 0;
}

int kick(Session& s, const TopicArgs& a) {
  if (a.all == !a.names.empty()) throw Error(Errc::invalid_argument, "give ids or --all");
  const int n = a.all ? s.client().kick_all(a.topic, a.limit) : s.client().kick(a.topic, a.names);
  return print_count(s, "kicked", n);
}

// promote: the ids given, or with --all every delayed job, --limit a call.
int promote(Session& s, const TopicArgs& a) {
  if (a.all == !a.names.empty()) throw Error(Errc::invalid_argument, "give ids or --all");
  const std::int64_t n = a.all
                             ? to_the_end([&] { return s.client().promote_all(a.topic, a.limit); })
                             : s.client().promote(a.topic, a.names);
  return print_count(s, "promoted", n);
}

// purge: the dead jobs that died more than --older-than ms ago (by Redis's
// clock), --limit a call, until none is left.
int purge(Session& s, const TopicArgs& a, std::int64_t older_than) {
  const std::int64_t before = std::max<std::int64_t>(s.client().now_ms() - older_than, 0);
  return print_count(s, "deleted",
                     to_the_end([&] { return s.client().purge_dead(a.topic, before, a.limit); }));
}

struct LimitArgs {
  std::string topic;
  std::optional<int> rate, concurrency;
  std::optional<std::int64_t> aging;
  std::optional<std::int64_t> window;
  bool clear = false;
};

// Shows a topic's limits, or changes the ones named (the others stay).
int limit(Session& s, const LimitArgs& a) {
  auto& client = s.client();
  TopicLimits l = client.limits(a.topic);
  const bool changing = a.clear || a.rate || a.concurrency || a.window || a.aging;
  if (a.clear && (a.rate || a.concurrency || a.window || a.aging)) {
    throw Error(Errc::invalid_argument, "give --clear or limits, not both");
  }
  if (a.window && !a.rate && l.rate == 0) {
    throw Error(Errc::invalid_argument, "--window goes with a --rate");
  }
  if (a.clear) l = TopicLimits{};
  if (a.rate) l.rate = *a.rate;
  if (a.window) l.window = Millis(*a.window);
  if (a.concurrency) l.concurrency = *a.concurrency;
  if (a.aging) l.aging = Millis(*a.aging);
  if (changing) l = client.set_limits(a.topic, l);
  if (s.json()) {
    print_json(wire::limits_json(l));
  } else {
    std::cout << a.topic << "\trate "
              << (l.rate > 0
                      ? std::to_string(l.rate) + " per " + std::to_string(l.window.count()) + " ms"
                      : std::string("none"))
              << "\tconcurrency "
              << (l.concurrency > 0 ? std::to_string(l.concurrency) : std::string("none"))
              << "\taging "
              << (l.aging.count() > 0 ? std::to_string(l.aging.count()) + " ms a level"
                                      : std::string("none"))
              << "\n";
  }
  return 0;
}

struct ShardArgs {
  std::string topic;
  std::optional<int> count;
};

// Shows the shards a topic is spread over, or spreads it over count.
int shards(Session& s, const ShardArgs& a) {
  const auto list = a.count ? s.client().set_shards(a.topic, *a.count) : s.client().shards(a.topic);
  if (s.json()) {
    json::array names;
    for (const auto& n : list) names.emplace_back(n);
    print_json(json::object{{"topic", a.topic},
                            {"count", std::max<std::size_t>(1, list.size())},
                            {"shards", std::move(names)}});
  } else if (list.empty()) {
    std::cout << a.topic << "\tnot spread (its own keys)\n";
  } else {
    std::cout << a.topic << "\t" << list.size() << " shards:";
    for (const auto& n : list) std::cout << " " << n;
    std::cout << "\n";
  }
  return 0;
}

// Rewrites what the topics hold in an older stored format, one topic after
// another (docs/redis-api.md, "Migrations").
// A topic that fails is reported and the others go on; the exit status
// says whether any failed.
int migrate(Session& s, const TopicArgs& a) {
  auto& client = s.client();
  const auto topics = a.names.empty() ? client.topics() : a.names;
  if (!s.json()) std::cout << "topic\trewritten\tread\tcalls\n";
  int failed = 0;
  for (const auto& t : topics) {
    Migration m;
    try {
      m = client.migrate(t, a.limit);
    } catch (const Error& e) {
      std::cerr << "redisched: migrating " << t << ": " << e.what() << "\n";
      ++failed;
      continue;
    }
    if (s.json()) {
      print_json(json::object{
          {"topic", t}, {"rewritten", m.rewritten}, {"read", m.read}, {"calls", m.calls}});
    } else {
      std::cout << t << "\t" << m.rewritten << "\t" << m.read << "\t" << m.calls << "\n";
    }
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace

void add_topic_commands(CLI::App& app, Action& selected) {
  auto sh = std::make_shared<ShardArgs>();
  auto* shards_cmd = app.add_subcommand(
      "shards",
      "show the shards a topic is spread over, or spread it over COUNT (only while empty)");
  shards_cmd->add_option("topic", sh->topic)->required();
  shards_cmd->add_option("count", sh->count, "1..256 (1: its own keys again)")
      ->check(CLI::Range(1, core::kShardsMax));
  shards_cmd->callback([sh, &selected] { selected = [sh](Session& s) { return shards(s, *sh); }; });

  auto st = std::make_shared<TopicArgs>();
  auto* stats_cmd = app.add_subcommand("stats", "counts per state of topics (all when none named)");
  stats_cmd->add_option("topics", st->names);
  stats_cmd->callback([st, &selected] { selected = [st](Session& s) { return stats(s, *st); }; });

  struct HistoryArgs {
    std::string topic, range = "1h";
  };
  auto h = std::make_shared<HistoryArgs>();
  auto* history_cmd = app.add_subcommand(
      "history", "a topic's jobs put, started, done, failed, dead and lapsed, per minute or hour");
  history_cmd->add_option("topic", h->topic)->required();
  history_cmd->add_option("--range", h->range, "1h or 24h (by the minute), 30d (by the hour)")
      ->check(CLI::IsMember({"1h", "24h", "30d"}))
      ->capture_default_str();
  history_cmd->callback(
      [h, &selected] { selected = [h](Session& s) { return history(s, h->topic, h->range); }; });

  auto* topics = app.add_subcommand("topics", "list topics");
  topics->callback([&selected] {
    selected = [](Session& s) {
      for (const auto& t : s.client().topics()) {
        if (s.json()) {
          print_json(json::object{{"topic", t}});
        } else {
          std::cout << t << "\n";
        }
      }
      return 0;
    };
  });

  auto* workers = app.add_subcommand(
      "workers", "the workers alive (the worker registry): topics, concurrency, running jobs");
  workers->callback([&selected] {
    selected = [](Session& s) {
      const auto all = s.client().workers();
      const auto now = s.client().now_ms();
      if (!s.json()) std::cout << "worker\thost\tpid\tversion\tbeat_age_ms\ttopics\trunning\n";
      for (const auto& w : all) {
        if (s.json()) {
          print_json(wire::worker_json(w));
          continue;
        }
        std::string handles, runs;
        for (const auto& t : w.topics) {
          handles += (handles.empty() ? "" : ",") + t.topic + "*" + std::to_string(t.concurrency);
        }
        for (const auto& r : w.running) {
          runs += (runs.empty() ? "" : ",") + r.topic + "/" + r.id;
        }
        std::cout << w.id << "\t" << w.host << "\t" << w.pid << "\t" << w.version << "\t"
                  << now - w.beat_ms << "\t" << (handles.empty() ? "-" : handles) << "\t"
                  << (runs.empty() ? "-" : runs) << "\n";
      }
      return 0;
    };
  });

  auto l = std::make_shared<TopicArgs>();
  auto* list_cmd = app.add_subcommand("list", "jobs of one state, in the order they leave it");
  list_cmd->add_option("topic", l->topic)->required();
  list_cmd->add_option("state", l->state, "delayed, ready, reserved, dead or done")->required();
  list_cmd->add_option("--offset", l->offset)
      ->check(CLI::Range(std::int64_t{0}, limits::kOffsetMax))
      ->capture_default_str();
  l->count = 1;
  list_cmd->add_option("--count", l->count, "1.." + std::to_string(limits::kBatchMax))
      ->check(CLI::Range(std::int64_t{1}, limits::kBatchMax))
      ->capture_default_str();
  list_cmd->add_flag("--no-body", l->no_body, "leave bodies out");
  list_cmd->callback([l, &selected] { selected = [l](Session& s) { return list(s, *l); }; });

  auto k = std::make_shared<TopicArgs>();
  auto* kick_cmd = app.add_subcommand("kick", "dead jobs back to ready");
  kick_cmd->add_option("topic", k->topic)->required();
  kick_cmd->add_option("ids", k->names);
  kick_cmd->add_flag("--all", k->all, "every dead job (up to --limit)");
  kick_cmd->add_option("--limit", k->limit)
      ->check(CLI::Range(std::int64_t{1}, limits::kLimitMax))
      ->capture_default_str();
  kick_cmd->callback([k, &selected] { selected = [k](Session& s) { return kick(s, *k); }; });

  auto pr = std::make_shared<TopicArgs>();
  auto* promote_cmd =
      app.add_subcommand("promote", "delayed jobs due now, their attempts and history kept");
  promote_cmd->add_option("topic", pr->topic)->required();
  promote_cmd->add_option("ids", pr->names);
  promote_cmd->add_flag("--all", pr->all, "every delayed job (--limit a call)");
  promote_cmd->add_option("--limit", pr->limit)
      ->check(CLI::Range(std::int64_t{1}, limits::kLimitMax))
      ->capture_default_str();
  promote_cmd->callback(
      [pr, &selected] { selected = [pr](Session& s) { return promote(s, *pr); }; });

  auto pu = std::make_shared<TopicArgs>();
  auto older_than = std::make_shared<std::int64_t>(0);
  auto* purge_cmd = app.add_subcommand("purge", "delete the dead jobs older than an age");
  purge_cmd->add_option("topic", pu->topic)->required();
  purge_cmd->add_option("--older-than", *older_than, "ms since they died")
      ->required()
      ->check(CLI::Range(std::int64_t{0}, limits::kDelayMax));
  purge_cmd->add_option("--limit", pu->limit, "jobs a call")
      ->check(CLI::Range(std::int64_t{1}, limits::kLimitMax))
      ->capture_default_str();
  purge_cmd->callback([pu, older_than, &selected] {
    selected = [pu, older_than](Session& s) { return purge(s, *pu, *older_than); };
  });

  for (const bool pausing : {true, false}) {
    const std::string name = pausing ? "pause" : "resume";
    auto t = std::make_shared<TopicArgs>();
    auto pause_for = std::make_shared<std::int64_t>(0);
    auto* sub = app.add_subcommand(name, name + " a topic");
    sub->add_option("topic", t->topic)->required();
    if (pausing) {
      sub->add_option("--for", *pause_for, "ms: the pause ends by itself then (0: no end)")
          ->check(CLI::Range(std::int64_t{0}, limits::kDelayMax));
    }
    sub->callback([t, pausing, pause_for, &selected] {
      selected = [t, pausing, pause_for](Session& s) {
        const bool changed =
            pausing ? s.client().pause(t->topic, Millis(*pause_for)) : s.client().resume(t->topic);
        if (s.json()) {
          print_json(json::object{{"topic", t->topic}, {"changed", changed}});
        } else {
          std::cout << t->topic << (pausing ? " paused" : " resumed") << "\n";
        }
        return 0;
      };
    });
  }

  auto lim = std::make_shared<LimitArgs>();
  auto* limit_cmd = app.add_subcommand(
      "limit", "show a topic's limits, or change the ones named, for all its workers together");
  limit_cmd->add_option("topic", lim->topic)->required();
  limit_cmd
      ->add_option("--rate", lim->rate, "at most this many jobs handed out per window (0: none)")
      ->check(CLI::Range(std::int64_t{0}, limits::kRateMax));
  limit_cmd->add_option("--window", lim->window, "the rate's window, ms (default 1000)")
      ->check(CLI::Range(std::int64_t{1}, limits::kWindowMax));
  limit_cmd
      ->add_option("--concurrency", lim->concurrency,
                   "at most this many reserved at once (0: none)")
      ->check(CLI::Range(std::int64_t{0}, limits::kConcurrencyMax));
  limit_cmd
      ->add_option("--aging", lim->aging,
                   "priority aging: ms of waiting a level of priority is worth (0: none)")
      ->check(CLI::Range(std::int64_t{0}, limits::kAgingMax));
  limit_cmd->add_flag("--clear", lim->clear, "no limits");
  limit_cmd->callback(
      [lim, &selected] { selected = [lim](Session& s) { return limit(s, *lim); }; });

  struct RetryWindowArgs {
    std::string topic;
    std::optional<std::int64_t> ms;
  };
  auto rw = std::make_shared<RetryWindowArgs>();
  auto* rw_cmd = app.add_subcommand(
      "retry-window",
      "show a topic's retry window, or set it to MS: for that long after a job finished, a "
      "put of its id answers exists (0: none)");
  rw_cmd->add_option("topic", rw->topic)->required();
  rw_cmd->add_option("ms", rw->ms)->check(CLI::Range(std::int64_t{0}, limits::kWindowMax));
  rw_cmd->callback([rw, &selected] {
    selected = [rw](Session& s) {
      const auto w = rw->ms ? s.client().set_retry_window(rw->topic, Millis(*rw->ms))
                            : s.client().retry_window(rw->topic);
      if (s.json()) {
        print_json(json::object{{"topic", rw->topic},
                                {"retry_window_ms", w.window.count()},
                                {"remembered", w.remembered}});
      } else {
        std::cout << rw->topic << "\tretry window " << w.window.count() << " ms\t" << w.remembered
                  << " ids held\n";
      }
      return 0;
    };
  });

  auto mg = std::make_shared<TopicArgs>();
  auto* migrate_cmd = app.add_subcommand(
      "migrate",
      "rewrite what topics hold in an older stored format (every topic when none named); safe "
      "while workers run");
  migrate_cmd->add_option("topics", mg->names);
  migrate_cmd->add_option("--limit", mg->limit, "records and members read in one library call")
      ->check(CLI::Range(std::int64_t{1}, limits::kBatchMax))
      ->capture_default_str();
  migrate_cmd->callback(
      [mg, &selected] { selected = [mg](Session& s) { return migrate(s, *mg); }; });

  auto r = std::make_shared<TopicArgs>();
  auto* requeue = app.add_subcommand("requeue", "lapsed reservations back to ready");
  requeue->add_option("topic", r->topic)->required();
  requeue->add_option("--limit", r->limit)
      ->check(CLI::Range(std::int64_t{1}, limits::kLimitMax))
      ->capture_default_str();
  requeue->callback([r, &selected] {
    selected = [r](Session& s) {
      auto out = s.client().requeue(r->topic, r->limit);
      if (s.json()) {
        print_json(json::object{{"requeued", out.requeued}, {"buried", out.buried}});
      } else {
        std::cout << "requeued " << out.requeued << ", buried " << out.buried << "\n";
      }
      return 0;
    };
  });

  auto mv = std::make_shared<TopicArgs>();
  auto* move = app.add_subcommand(
      "move", "carry out the topic's outbox: hand its flows over to other topics (docs/flows.md)");
  move->add_option("topic", mv->topic)->required();
  move->callback([mv, &selected] {
    selected = [mv](Session& s) {
      auto out = s.client().move_outbox(mv->topic);
      if (s.json()) {
        print_json(json::object{{"moved", out.moved}, {"failed", out.failed}});
      } else {
        std::cout << "moved " << out.moved << ", failed " << out.failed << "\n";
      }
      return out.failed > 0 ? 1 : 0;
    };
  });
}

}  // namespace redisched::cli
