#include "cli/commands.h"

#include <unistd.h>

#include <algorithm>
#include <boost/json.hpp>
#include <chrono>
#include <deque>
#include <filesystem>
#include <fstream>
#include <future>
#include <iomanip>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <vector>

#include "core/limits.h"
#include "embedded/redis_process.h"
#include "redisched/client.h"
#include "server/serve.h"
#include "wire/job_json.h"

namespace redisched::cli {
namespace {

namespace json = boost::json;

// What the parsed subcommand will do.
std::function<int(const GlobalOptions&)> g_selected;

void print_json(const json::value& v) { std::cout << json::serialize(v) << "\n"; }

std::string printable(std::string_view body) {
  if (wire::valid_utf8(body)) return std::string(body);
  return "base64:" + wire::base64_encode(body);
}

void print_job_text(const Job& j) {
  std::cout << "id:           " << j.id << "\n"
            << "state:        " << to_string(j.state) << "\n"
            << "priority:     " << j.priority << "\n"
            << "created:      " << j.created_ms << "\n"
            << "due:          " << j.due_ms << "\n"
            << "attempts:     " << j.attempts << " of " << j.max_attempts << "\n"
            << "ttr:          " << j.ttr.count() << " ms\n";
  if (j.error) std::cout << "error:        " << *j.error << "\n";
  if (j.state == JobState::reserved) {
    std::cout << "token:        " << j.token << "\n"
              << "deadline:     " << j.deadline_ms << "\n";
  }
  std::cout << "body:         " << printable(j.body) << "\n";
}

void print_taken(const ReserveResult& r, const GlobalOptions& g, bool reserved) {
  if (g.json) {
    for (const auto& j : r.jobs) {
      print_json(wire::reservation_json(j, reserved));
    }
    return;
  }
  if (r.jobs.empty()) {
    std::cout << (r.paused ? "topic is paused\n" : "no job is ready\n");
    return;
  }
  for (const auto& j : r.jobs) {
    std::cout << j.id;
    if (reserved) std::cout << "\ttoken " << j.token;
    std::cout << "\tattempt " << j.attempt << "/" << j.max_attempts << "\t" << printable(j.body)
              << "\n";
  }
}

// 0 when the outcome is ok; else prints why and returns 1.
int report(Outcome o, std::string_view what, std::string_view id, const GlobalOptions& g) {
  if (g.json) {
    print_json(json::object{{"id", id}, {"outcome", to_string(o)}});
  } else if (o == Outcome::ok) {
    std::cout << what << " " << id << "\n";
  }
  if (o == Outcome::ok) return 0;
  std::cerr << "redisched: " << id << ": " << to_string(o) << "\n";
  return 1;
}

Backoff parse_backoff(const std::string& text) {
  // kind:base:cap, e.g. exponential:1000:60000 or fixed:5000
  Backoff b;
  const auto first = text.find(':');
  const std::string kind = text.substr(0, first);
  if (kind == "fixed") {
    b.kind = BackoffKind::fixed;
  } else if (kind == "exponential") {
    b.kind = BackoffKind::exponential;
  } else {
    throw Error(Errc::invalid_argument, "--backoff must be fixed:BASE or exponential:BASE:CAP");
  }
  if (first == std::string::npos) throw Error(Errc::invalid_argument, "--backoff needs a base");
  const auto second = text.find(':', first + 1);
  try {
    b.base = Millis(std::stoll(text.substr(first + 1, second - first - 1)));
    b.cap = second == std::string::npos ? b.base : Millis(std::stoll(text.substr(second + 1)));
  } catch (const std::logic_error&) {
    throw Error(Errc::invalid_argument, "--backoff numbers must be milliseconds");
  }
  return b;
}

server::RedisChoice redis_choice(const GlobalOptions& g) {
  server::RedisChoice r;
  r.url = g.redis_url;
  r.data_dir = g.data_dir;
  r.prefix = g.prefix;
  return r;
}

// A progress bar on stderr when it is a terminal; quiet when piped.
class Progress {
 public:
  Progress(std::string what, std::int64_t total)
      : what_(std::move(what)), total_(total), tty_(::isatty(2) == 1) {}
  void add(std::int64_t n) {
    done_ += n;
    if (!tty_) return;
    const auto now = std::chrono::steady_clock::now();
    if (now - shown_ < std::chrono::milliseconds(100)) return;
    shown_ = now;
    draw();
  }
  void done() {
    if (!tty_) return;
    draw();
    std::cerr << "\n";
  }

 private:
  void draw() const {
    if (total_ > 0) {
      const int width = 30;
      const auto filled = static_cast<int>(width * std::min<std::int64_t>(done_, total_) / total_);
      std::cerr << "\r[" << std::string(static_cast<size_t>(filled), '#')
                << std::string(static_cast<size_t>(width - filled), ' ') << "] " << done_ << "/"
                << total_ << " " << what_ << std::flush;
    } else {
      std::cerr << "\r" << done_ << " " << what_ << std::flush;
    }
  }
  std::string what_;
  std::int64_t total_;
  bool tty_;
  std::int64_t done_ = 0;
  std::chrono::steady_clock::time_point shown_{};
};

// redisched bench: put (single calls, 256 in flight; batches of 100) and
// reserve+ack (batches of 100) on the topic redisched-bench, which ends
// empty (its counters remain, so it stays listed).
int run_bench(Client& client, std::int64_t jobs, bool as_json) {
  const std::string topic = "redisched-bench";
  auto spec = [](std::int64_t i) {
    JobSpec s;
    s.id = "b" + std::to_string(i);
    s.body = std::string(100, static_cast<char>('a' + i % 26));
    return s;
  };
  auto timed = [](auto&& f) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  Progress progress("jobs", jobs * 3);
  // put, single calls, a window of 256 in flight
  const double put_single = timed([&] {
    std::deque<std::future<PutOutcome>> window;
    for (std::int64_t i = 0; i < jobs; ++i) {
      window.push_back(client.put_async(topic, spec(i)));
      if (window.size() >= 256) {
        window.front().get();
        window.pop_front();
        progress.add(1);
      }
    }
    for (auto& f : window) f.get(), progress.add(1);
  });
  const double put_batched = timed([&] {
    std::vector<JobSpec> batch;
    for (std::int64_t i = jobs; i < 2 * jobs; ++i) {
      batch.push_back(spec(i));
      if (batch.size() == 100 || i == 2 * jobs - 1) {
        client.put_many(topic, batch);
        progress.add(static_cast<std::int64_t>(batch.size()));
        batch.clear();
      }
    }
  });
  std::int64_t taken = 0;
  const double reserve_ack = timed([&] {
    while (taken < 2 * jobs) {
      auto r = client.reserve(topic, 100, Millis{60000});
      if (r.jobs.empty()) break;
      std::vector<std::pair<std::string, std::uint64_t>> held;
      for (auto& j : r.jobs) held.emplace_back(j.id, j.token);
      client.ack_many(topic, held);
      taken += static_cast<std::int64_t>(held.size());
      progress.add(static_cast<std::int64_t>(held.size()) / 2);
    }
  });
  progress.done();
  const double n = static_cast<double>(jobs);
  const double rows[] = {n / put_single, n / put_batched, static_cast<double>(taken) / reserve_ack};
  if (as_json) {
    print_json(json::object{
        {"put_single", rows[0]}, {"put_batched", rows[1]}, {"reserve_ack_batched", rows[2]}});
  } else {
    std::cout << "figure (100-byte bodies)              jobs/s\n";
    std::cout << "put, single calls (256 in flight) " << std::setw(10) << static_cast<long>(rows[0])
              << "\n";
    std::cout << "put, batches of 100               " << std::setw(10) << static_cast<long>(rows[1])
              << "\n";
    std::cout << "reserve+ack, batches of 100       " << std::setw(10) << static_cast<long>(rows[2])
              << "\n";
  }
  return taken == 2 * jobs ? 0 : 1;
}

// The embedded Redis a command started, if it did (stopped at exit).
std::unique_ptr<embedded::RedisProcess> g_embedded;

// --redis, else the Redis of a serve running on --data-dir, else one of
// our own there for this command.
std::string resolve_redis(const GlobalOptions& g) {
  if (!g.redis_url.empty()) return g.redis_url;
  const std::string sock =
      std::filesystem::absolute(g.data_dir).lexically_normal().string() + "/redis.sock";
  if (embedded::redis_socket_answers(sock)) return "unix://" + sock;
  g_embedded =
      std::make_unique<embedded::RedisProcess>(embedded::embedded_default(g.data_dir, "everysec"));
  return g_embedded->unix_url();
}

std::unique_ptr<Client> connect(const GlobalOptions& g) {
  ClientOptions o;
  o.redis_url = resolve_redis(g);
  o.prefix = g.prefix;
  return std::make_unique<Client>(o);
}

}  // namespace

void add_commands(CLI::App& app, GlobalOptions& /*global*/) {
  // Each subcommand's values live as long as the program.
  struct Values {
    std::string topic, id, body, error, state, backoff;
    std::vector<std::string> ids;
    std::uint64_t token = 0;
    std::optional<std::int64_t> delay, at, ttr, attempts, keep;
    int priority = 0, count = 1, limit = 1000;
    std::optional<int> new_priority;
    std::int64_t offset = 0;
    bool replace = false, upsert = false, dead = false, all = false, no_body = false;
  };
  static Values v;

  static server::ServeOptions serve_options;
  static std::string fsync = "everysec";
  auto* serve = app.add_subcommand(
      "serve", "run the HTTP server (with its own redis-server unless --redis is given)");
  server::add_serve_options(*serve, serve_options);
  serve->add_option("--fsync", fsync, "the embedded Redis's appendfsync: always, everysec, no")
      ->check(CLI::IsMember({"always", "everysec", "no"}))
      ->capture_default_str();
  serve->callback([] {
    g_selected = [](const GlobalOptions& g) {
      auto r = redis_choice(g);
      r.fsync = fsync;
      return server::serve(serve_options, r);
    };
  });

  auto* put = app.add_subcommand("put", "put a job (body from the argument, or stdin with -)");
  put->add_option("topic", v.topic)->required();
  put->add_option("id", v.id, "job id, unique in the topic; * to generate one")->required();
  put->add_option("body", v.body, "the body; - reads stdin")->required();
  put->add_option("--delay", v.delay, "due this many ms from now")
      ->check(CLI::Range(std::int64_t{0}, limits::kDelayMax));
  put->add_option("--at", v.at, "due at this Unix time in ms")
      ->check(CLI::Range(std::int64_t{0}, limits::kMsMax));
  put->add_option("--priority", v.priority, "0..1000, higher first")
      ->check(CLI::Range(std::int64_t{0}, limits::kPrioMax));
  put->add_option("--ttr", v.ttr, "time-to-run of a reservation, ms")
      ->check(CLI::Range(std::int64_t{1}, limits::kTtrMax));
  put->add_option("--attempts", v.attempts, "attempts before the job is dead")
      ->check(CLI::Range(std::int64_t{1}, limits::kAttemptsMax));
  put->add_option("--backoff", v.backoff, "fixed:MS or exponential:BASE_MS:CAP_MS");
  put->add_flag("--replace", v.replace, "update an existing job only");
  put->add_flag("--upsert", v.upsert, "create or update");
  put->callback([] {
    g_selected = [](const GlobalOptions& g) {
      JobSpec spec;
      spec.id = v.id;
      if (v.body == "-") {
        spec.body.assign(std::istreambuf_iterator<char>(std::cin),
                         std::istreambuf_iterator<char>());
      } else {
        spec.body = v.body;
      }
      if (v.delay) spec.delay = Millis(*v.delay);
      spec.due_at_ms = v.at;
      spec.priority = v.priority;
      if (v.ttr) spec.ttr = Millis(*v.ttr);
      if (v.attempts) spec.max_attempts = static_cast<int>(*v.attempts);
      if (!v.backoff.empty()) spec.backoff = parse_backoff(v.backoff);
      if (v.replace && v.upsert) throw Error(Errc::invalid_argument, "give --replace or --upsert");
      if (v.replace) spec.mode = PutMode::replace;
      if (v.upsert) spec.mode = PutMode::upsert;
      if (spec.id == "*") {  // a generated id
        spec.id.clear();
        const std::string id = connect(g)->add(v.topic, spec);
        if (g.json)
          print_json(json::object{{"id", id}, {"outcome", "created"}});
        else
          std::cout << "created " << id << "\n";
        return 0;
      }
      const PutOutcome o = connect(g)->put(v.topic, spec);
      const char* names[] = {"created", "updated", "exists", "not found"};
      const char* name = names[static_cast<int>(o)];
      if (g.json) {
        print_json(json::object{{"id", spec.id}, {"outcome", name}});
      } else if (o == PutOutcome::created || o == PutOutcome::updated) {
        std::cout << name << " " << spec.id << "\n";
      }
      if (o == PutOutcome::exists) {
        std::cerr << "redisched: job " << spec.id << " exists (use --replace or --upsert)\n";
      }
      if (o == PutOutcome::not_found) std::cerr << "redisched: no job " << spec.id << "\n";
      return (o == PutOutcome::created || o == PutOutcome::updated) ? 0 : 1;
    };
  });

  auto* get = app.add_subcommand("get", "show a job");
  get->add_option("topic", v.topic)->required();
  get->add_option("id", v.id)->required();
  get->callback([] {
    g_selected = [](const GlobalOptions& g) {
      auto job = connect(g)->get(v.topic, v.id);
      if (!job) {
        std::cerr << "redisched: no job " << v.id << " in " << v.topic << "\n";
        return 1;
      }
      if (g.json) {
        print_json(wire::job_json(*job));
      } else {
        print_job_text(*job);
      }
      return 0;
    };
  });

  auto* del = app.add_subcommand("delete", "delete jobs in any state");
  del->add_option("topic", v.topic)->required();
  del->add_option("ids", v.ids)->required();
  del->callback([] {
    g_selected = [](const GlobalOptions& g) {
      auto client = connect(g);
      int missing = 0;
      for (const auto& id : v.ids) {
        const bool removed = client->remove(v.topic, id);
        if (g.json)
          print_json(json::object{{"id", id}, {"deleted", removed}});
        else if (removed)
          std::cout << "deleted " << id << "\n";
        if (!removed) {
          std::cerr << "redisched: no job " << id << "\n";
          ++missing;
        }
      }
      return missing == 0 ? 0 : 1;
    };
  });

  auto* reserve = app.add_subcommand("reserve", "reserve ready jobs");
  reserve->add_option("topic", v.topic)->required();
  reserve->add_option("--count", v.count, "how many, 1..1000")
      ->check(CLI::Range(std::int64_t{1}, limits::kBatchMax))
      ->capture_default_str();
  reserve->add_option("--ttr", v.ttr, "time-to-run for jobs without their own, ms")
      ->check(CLI::Range(std::int64_t{1}, limits::kTtrMax));
  reserve->callback([] {
    g_selected = [](const GlobalOptions& g) {
      auto r = connect(g)->reserve(v.topic, v.count, Millis(v.ttr.value_or(0)));
      print_taken(r, g, true);
      return 0;
    };
  });

  auto* pull = app.add_subcommand("pull", "take ready jobs for good (at-most-once)");
  pull->add_option("topic", v.topic)->required();
  pull->add_option("--count", v.count, "how many, 1..1000")
      ->check(CLI::Range(std::int64_t{1}, limits::kBatchMax))
      ->capture_default_str();
  pull->callback([] {
    g_selected = [](const GlobalOptions& g) {
      print_taken(connect(g)->pull(v.topic, v.count), g, false);
      return 0;
    };
  });

  auto add_held = [](CLI::App* sub) {
    sub->add_option("topic", v.topic)->required();
    sub->add_option("id", v.id)->required();
    sub->add_option("token", v.token, "the reservation's token")->required();
  };
  auto* ack = app.add_subcommand("ack", "a reserved job is done");
  add_held(ack);
  ack->add_option("--keep", v.keep, "keep the finished job this many ms")
      ->check(CLI::Range(std::int64_t{0}, limits::kDelayMax));
  ack->callback([] {
    g_selected = [](const GlobalOptions& g) {
      return report(connect(g)->ack(v.topic, v.id, v.token, Millis(v.keep.value_or(0))), "acked",
                    v.id, g);
    };
  });

  auto* release = app.add_subcommand("release", "put a reserved job back");
  add_held(release);
  release->add_option("--delay", v.delay, "due this many ms from now")
      ->check(CLI::Range(std::int64_t{0}, limits::kDelayMax));
  release->add_option("--priority", v.new_priority, "new priority")
      ->check(CLI::Range(std::int64_t{0}, limits::kPrioMax));
  release->callback([] {
    g_selected = [](const GlobalOptions& g) {
      return report(
          connect(g)->release(v.topic, v.id, v.token, Millis(v.delay.value_or(0)), v.new_priority),
          "released", v.id, g);
    };
  });

  auto* fail = app.add_subcommand("fail", "a reserved job's attempt failed");
  add_held(fail);
  fail->add_option("error", v.error, "what went wrong")->required();
  fail->add_flag("--dead", v.dead, "do not retry");
  fail->callback([] {
    g_selected = [](const GlobalOptions& g) {
      auto r = connect(g)->fail(v.topic, v.id, v.token, v.error, v.dead);
      if (r.outcome == Outcome::ok && !g.json) {
        std::cout << "failed " << v.id << ", now " << to_string(r.state) << "\n";
        return 0;
      }
      return report(r.outcome, "failed", v.id, g);
    };
  });

  auto* touch = app.add_subcommand("touch", "extend a reservation");
  add_held(touch);
  touch->add_option("--ttr", v.ttr, "new time-to-run from now, ms")
      ->check(CLI::Range(std::int64_t{1}, limits::kTtrMax));
  touch->callback([] {
    g_selected = [](const GlobalOptions& g) {
      auto r = connect(g)->touch(v.topic, v.id, v.token, Millis(v.ttr.value_or(0)));
      if (r.outcome == Outcome::ok && !g.json) {
        std::cout << "touched " << v.id << ", deadline " << r.deadline_ms << "\n";
        return 0;
      }
      return report(r.outcome, "touched", v.id, g);
    };
  });

  auto* stats = app.add_subcommand("stats", "counts per state of topics (all when none named)");
  stats->add_option("topics", v.ids);
  stats->callback([] {
    g_selected = [](const GlobalOptions& g) {
      auto client = connect(g);
      auto topics = v.ids.empty() ? client->topics() : v.ids;
      if (!g.json) std::cout << "topic\tdelayed\tready\treserved\tdead\tdone\tpaused\n";
      for (const auto& t : topics) {
        auto s = client->stats(t);
        if (g.json) {
          print_json(wire::stats_json(t, s));
        } else {
          std::cout << t << "\t" << s.delayed << "\t" << s.ready << "\t" << s.reserved << "\t"
                    << s.dead << "\t" << s.done << "\t" << (s.paused ? "yes" : "no") << "\n";
        }
      }
      return 0;
    };
  });

  auto* topics = app.add_subcommand("topics", "list topics");
  topics->callback([] {
    g_selected = [](const GlobalOptions& g) {
      for (const auto& t : connect(g)->topics()) {
        if (g.json)
          print_json(json::object{{"topic", t}});
        else
          std::cout << t << "\n";
      }
      return 0;
    };
  });

  auto* list = app.add_subcommand("list", "jobs of one state, in the order they leave it");
  list->add_option("topic", v.topic)->required();
  list->add_option("state", v.state, "delayed, ready, reserved, dead or done")->required();
  list->add_option("--offset", v.offset)
      ->check(CLI::Range(std::int64_t{0}, limits::kOffsetMax))
      ->capture_default_str();
  list->add_option("--count", v.count, "1..1000")
      ->check(CLI::Range(std::int64_t{1}, limits::kBatchMax))
      ->capture_default_str();
  list->add_flag("--no-body", v.no_body, "leave bodies out");
  list->callback([] {
    g_selected = [](const GlobalOptions& g) {
      auto state = parse_job_state(v.state);
      if (!state) throw Error(Errc::invalid_argument, "unknown state '" + v.state + "'");
      auto page = connect(g)->list(v.topic, *state, v.offset, v.count, !v.no_body);
      for (const auto& j : page.jobs) {
        if (g.json)
          print_json(wire::job_json(j));
        else
          std::cout << j.id << "\tpriority " << j.priority << "\tdue " << j.due_ms << "\t"
                    << printable(j.body) << "\n";
      }
      if (!g.json) std::cout << page.jobs.size() << " of " << page.total << " " << v.state << "\n";
      return 0;
    };
  });

  static std::string file;
  auto* exp = app.add_subcommand(
      "export", "write a topic's jobs, every state, as JSON lines (for backups and migrations)");
  exp->add_option("topic", v.topic)->required();
  exp->add_option("-o,--output", file, "file to write (default: stdout)");
  exp->callback([] {
    g_selected = [](const GlobalOptions& g) {
      auto client = connect(g);
      std::ofstream out_file;
      if (!file.empty()) {
        out_file.open(file);
        if (!out_file) throw Error(Errc::invalid_argument, "cannot write " + file);
      }
      std::ostream& out = file.empty() ? std::cout : out_file;
      const auto s = client->stats(v.topic);
      Progress progress("exported", s.delayed + s.ready + s.reserved + s.dead + s.done);
      for (JobState state : {JobState::delayed, JobState::ready, JobState::reserved, JobState::dead,
                             JobState::done}) {
        for (std::int64_t offset = 0;; offset += 1000) {
          auto page = client->list(v.topic, state, offset, 1000);
          for (const auto& j : page.jobs) out << json::serialize(wire::job_json(j)) << "\n";
          progress.add(static_cast<std::int64_t>(page.jobs.size()));
          if (page.jobs.size() < 1000) break;
        }
      }
      out.flush();
      progress.done();
      if (!out) throw Error(Errc::invalid_argument, "writing the export failed");
      return 0;
    };
  });

  auto* imp = app.add_subcommand(
      "import", "load jobs written by export into a topic, as they were (reserved ones ready)");
  imp->add_option("topic", v.topic)->required();
  imp->add_option("file", file, "JSON lines to read (default: stdin)");
  imp->add_flag("--replace", v.replace, "overwrite jobs whose id exists (else they are skipped)");
  imp->callback([] {
    g_selected = [](const GlobalOptions& g) {
      auto client = connect(g);
      std::ifstream in_file;
      if (!file.empty()) {
        in_file.open(file);
        if (!in_file) throw Error(Errc::invalid_argument, "cannot read " + file);
      }
      std::istream& in = file.empty() ? std::cin : in_file;
      // Every line is read and checked before the first job goes in, so a
      // bad line stops the import with nothing imported.
      std::vector<Job> jobs;
      std::int64_t line_no = 0;
      for (std::string line; std::getline(in, line);) {
        ++line_no;
        if (line.empty()) continue;
        try {
          boost::system::error_code ec;
          auto value = json::parse(line, ec);
          if (ec || !value.is_object()) throw std::runtime_error("not a JSON object");
          jobs.push_back(wire::job_from_json(value.as_object()));
        } catch (const std::exception& e) {
          throw Error(Errc::invalid_argument, "line " + std::to_string(line_no) + ": " + e.what() +
                                                  " (nothing was imported)");
        }
      }
      Progress progress("imported", static_cast<std::int64_t>(jobs.size()));
      std::int64_t restored = 0, skipped = 0;
      // Many restores in flight on the pipeline, a window at a time.
      constexpr std::size_t kWindow = 1000;
      for (std::size_t at = 0; at < jobs.size(); at += kWindow) {
        std::vector<std::future<bool>> window;
        const std::size_t end = std::min(jobs.size(), at + kWindow);
        for (std::size_t i = at; i < end; ++i) {
          window.push_back(client->restore_async(v.topic, jobs[i], v.replace));
        }
        for (std::size_t i = at; i < end; ++i) {
          try {
            (window[i - at].get() ? restored : skipped) += 1;
          } catch (const Error& e) {
            throw Error(e.code(), "job " + jobs[i].id + ": " + e.what() + " (" +
                                      std::to_string(restored + skipped) +
                                      " jobs before it were imported or skipped)");
          }
        }
        progress.add(static_cast<std::int64_t>(end - at));
      }
      progress.done();
      if (g.json) {
        print_json(json::object{{"restored", restored}, {"skipped", skipped}});
      } else {
        std::cout << "restored " << restored << ", skipped " << skipped
                  << " (existing ids, or finished jobs)\n";
      }
      return 0;
    };
  });

  static std::int64_t bench_jobs = 100000;
  auto* bench = app.add_subcommand(
      "bench",
      "measure put and reserve+ack against this Redis, on a scratch topic, and print a table");
  bench->add_option("--jobs", bench_jobs, "jobs per figure")
      ->check(CLI::Range(1000, 10000000))
      ->capture_default_str();
  bench->callback([] {
    g_selected = [](const GlobalOptions& g) { return run_bench(*connect(g), bench_jobs, g.json); };
  });

  auto* kick = app.add_subcommand("kick", "dead jobs back to ready");
  kick->add_option("topic", v.topic)->required();
  kick->add_option("ids", v.ids);
  kick->add_flag("--all", v.all, "every dead job (up to --limit)");
  kick->add_option("--limit", v.limit)
      ->check(CLI::Range(std::int64_t{1}, limits::kLimitMax))
      ->capture_default_str();
  kick->callback([] {
    g_selected = [](const GlobalOptions& g) {
      if (v.all == !v.ids.empty()) throw Error(Errc::invalid_argument, "give ids or --all");
      auto client = connect(g);
      const int n = v.all ? client->kick_all(v.topic, v.limit) : client->kick(v.topic, v.ids);
      if (g.json)
        print_json(json::object{{"kicked", n}});
      else
        std::cout << "kicked " << n << "\n";
      return 0;
    };
  });

  for (const char* name : {"pause", "resume"}) {
    auto* sub = app.add_subcommand(name, std::string(name) + " a topic");
    sub->add_option("topic", v.topic)->required();
    const bool pausing = std::string_view(name) == "pause";
    sub->callback([pausing] {
      g_selected = [pausing](const GlobalOptions& g) {
        auto client = connect(g);
        const bool changed = pausing ? client->pause(v.topic) : client->resume(v.topic);
        if (g.json)
          print_json(json::object{{"topic", v.topic}, {"changed", changed}});
        else
          std::cout << v.topic << (pausing ? " paused" : " resumed") << "\n";
        return 0;
      };
    });
  }

  auto* requeue = app.add_subcommand("requeue", "lapsed reservations back to ready");
  requeue->add_option("topic", v.topic)->required();
  requeue->add_option("--limit", v.limit)
      ->check(CLI::Range(std::int64_t{1}, limits::kLimitMax))
      ->capture_default_str();
  requeue->callback([] {
    g_selected = [](const GlobalOptions& g) {
      auto r = connect(g)->requeue(v.topic, v.limit);
      if (g.json)
        print_json(json::object{{"requeued", r.requeued}, {"buried", r.buried}});
      else
        std::cout << "requeued " << r.requeued << ", buried " << r.buried << "\n";
      return 0;
    };
  });
}

int run_selected(const GlobalOptions& global) {
  if (!g_selected) return 2;
  return g_selected(global);
}

}  // namespace redisched::cli
