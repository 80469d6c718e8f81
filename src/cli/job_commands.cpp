// put, get, delete.
#include <boost/json/object.hpp>
#include <future>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <vector>

#include "cli/commands.h"
#include "cli/output.h"
#include "redisched/client.h"
#include "redisched/limits.h"
#include "wire/job_json.h"

namespace redisched::cli {
namespace {

namespace json = boost::json;

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

// --after TOPIC/ID[:POLICY] (POLICY fail, ignore or drop; a job id may
// hold '/' and ':', a topic neither: the first '/' ends the topic, and a
// last ':' followed by a policy's name ends the id).
Dependency parse_dependency(const std::string& text) {
  const auto slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size()) {
    throw Error(Errc::invalid_argument, "--after must be TOPIC/ID or TOPIC/ID:POLICY, got " + text);
  }
  Dependency d{text.substr(0, slash), text.substr(slash + 1), OnFailure::fail};
  if (const auto colon = d.id.rfind(':'); colon != std::string::npos) {
    if (auto p = parse_on_failure(std::string_view(d.id).substr(colon + 1))) {
      d.on_failure = *p;
      d.id.resize(colon);
    }
  }
  return d;
}

// --batch TOPIC/ID, and batch's --add TOPIC/ID: a job named by topic and id
// (the first '/' ends the topic).
JobRef parse_ref(const std::string& text, const char* option) {
  const auto slash = text.find('/');
  if (slash == std::string::npos || slash == 0 || slash + 1 == text.size()) {
    throw Error(Errc::invalid_argument, std::string(option) + " must be TOPIC/ID, got " + text);
  }
  return {text.substr(0, slash), text.substr(slash + 1)};
}

struct PutArgs {
  std::string topic, id, body, backoff, batch;
  std::vector<std::string> after;
  std::optional<std::int64_t> delay, at, ttr, attempts, replicas, keep;
  std::int64_t priority = 0;
  bool replace = false, upsert = false, debounce = false;

  JobSpec spec() const {
    JobSpec spec;
    spec.id = id;
    if (body == "-") {
      spec.body.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
      spec.body = body;
    }
    if (delay) spec.delay = Millis(*delay);
    spec.due_at_ms = at;
    spec.priority = priority;
    if (ttr) spec.ttr = Millis(*ttr);
    if (attempts) spec.max_attempts = static_cast<int>(*attempts);
    if (replicas) spec.replicas = static_cast<int>(*replicas);
    if (keep) spec.keep = Millis(*keep);
    if (!backoff.empty()) spec.backoff = parse_backoff(backoff);
    for (const auto& a : after) spec.after.push_back(parse_dependency(a));
    if (int{replace} + int{upsert} + int{debounce} > 1) {
      throw Error(Errc::invalid_argument, "give one of --replace, --upsert and --debounce");
    }
    if (replace) spec.mode = PutMode::replace;
    if (upsert) spec.mode = PutMode::upsert;
    if (debounce) spec.mode = PutMode::debounce;
    return spec;
  }
};

int put(Session& s, const PutArgs& a) {
  JobSpec spec = a.spec();
  if (!a.batch.empty()) {
    // The member first: a job that finished before it was added would count
    // only while its trace is kept.
    if (spec.id == "*") throw Error(Errc::invalid_argument, "--batch needs the job's id, not *");
    const JobRef b = parse_ref(a.batch, "--batch");
    s.client().batch(b.topic, b.id, BatchChange{.add = {{a.topic, spec.id}}});
  }
  if (spec.id == "*") {  // a generated id
    spec.id.clear();
    const std::string id = s.client().add(a.topic, spec);
    if (s.json()) {
      print_json(json::object{{"id", id}, {"outcome", "created"}});
    } else {
      std::cout << "created " << id << "\n";
    }
    return 0;
  }
  const PutOutcome o = s.client().put(a.topic, spec);
  const char* names[] = {"created", "updated", "exists", "not found"};
  const char* name = names[static_cast<int>(o)];
  if (s.json()) {
    print_json(json::object{{"id", spec.id}, {"outcome", name}});
  } else if (o == PutOutcome::created || o == PutOutcome::updated) {
    std::cout << name << " " << spec.id << "\n";
  }
  if (o == PutOutcome::exists && spec.mode == PutMode::debounce) {
    std::cerr << "redisched: job " << spec.id
              << " is not waiting (reserved, dead or done): left as it is\n";
  } else if (o == PutOutcome::exists) {
    std::cerr << "redisched: job " << spec.id << " exists (use --replace or --upsert)\n";
  }
  if (o == PutOutcome::not_found) std::cerr << "redisched: no job " << spec.id << "\n";
  return (o == PutOutcome::created || o == PutOutcome::updated) ? 0 : 1;
}

int get(Session& s, const std::string& topic, const std::string& id) {
  auto job = s.client().get_with_dependencies(topic, id);
  if (!job) {
    std::cerr << "redisched: no job " << id << " in " << topic << "\n";
    return 1;
  }
  if (s.json()) {
    std::cout << wire::job_text(*job) << "\n";
  } else {
    print_job_text(*job);
  }
  return 0;
}

// Waits for the job to finish. Exit status: 0 done, 1 no such job, 3 dead,
// 4 not finished when the timeout came (the job is printed as it is).
int wait(Session& s, const std::string& topic, const std::string& id, std::int64_t timeout) {
  auto job = s.client().wait(topic, id, Millis(timeout));
  if (!job) {
    std::cerr << "redisched: no job " << id << " in " << topic
              << " (never put, deleted, or finished without --keep)\n";
    return 1;
  }
  if (s.json()) {
    std::cout << wire::job_text(*job) << "\n";
  } else {
    print_job_text(*job);
  }
  if (job->state == JobState::done) return 0;
  if (job->state == JobState::dead) return 3;
  std::cerr << "redisched: job " << id << " is still " << to_string(job->state) << " after "
            << timeout << " ms\n";
  return 4;
}

// Every id's delete goes out at once on the pipeline (one round trip), and
// each is reported.
// Every id that starts with prefix, one a line (--json: one JSON string a
// line), in no set order; at most limit (0: all). Exit status 1 when none.
int find(Session& s, const std::string& topic, const std::string& prefix, std::int64_t limit) {
  std::int64_t printed = 0;
  std::string cursor;
  do {
    auto page = s.client().find_ids(topic, prefix, cursor, limits::kBatchMax);
    for (const auto& id : page.ids) {
      if (limit > 0 && printed == limit) return 0;
      if (s.json()) {
        print_json(json::value(id));
      } else {
        std::cout << id << "\n";  // (an id holds no control character)
      }
      ++printed;
    }
    cursor = std::move(page.cursor);
  } while (!cursor.empty());
  return printed > 0 ? 0 : 1;
}

int remove(Session& s, const std::string& topic, const std::vector<std::string>& ids) {
  std::vector<std::future<bool>> removals;
  removals.reserve(ids.size());
  for (const auto& id : ids) removals.push_back(s.client().remove_async(topic, id));
  int missing = 0;
  for (std::size_t i = 0; i < ids.size(); ++i) {
    const bool removed = removals[i].get();
    if (s.json()) {
      print_json(json::object{{"id", ids[i]}, {"deleted", removed}});
    } else if (removed) {
      std::cout << "deleted " << ids[i] << "\n";
    }
    if (!removed) {
      std::cerr << "redisched: no job " << ids[i] << "\n";
      ++missing;
    }
  }
  return missing == 0 ? 0 : 1;
}

}  // namespace

void add_job_commands(CLI::App& app, Action& selected) {
  auto p = std::make_shared<PutArgs>();
  auto* put_cmd = app.add_subcommand("put", "put a job (body from the argument, or stdin with -)");
  put_cmd->add_option("topic", p->topic)->required();
  put_cmd->add_option("id", p->id, "job id, unique in the topic; * to generate one")->required();
  put_cmd->add_option("body", p->body, "the body; - reads stdin")->required();
  put_cmd->add_option("--delay", p->delay, "due this many ms from now")
      ->check(CLI::Range(std::int64_t{0}, limits::kDelayMax));
  put_cmd->add_option("--at", p->at, "due at this Unix time in ms")
      ->check(CLI::Range(std::int64_t{0}, limits::kMsMax));
  put_cmd
      ->add_option("--priority", p->priority,
                   std::to_string(limits::kPrioMin) + ".." + std::to_string(limits::kPrioMax) +
                       ", higher first")
      ->check(CLI::Range(limits::kPrioMin, limits::kPrioMax));
  put_cmd->add_option("--ttr", p->ttr, "time-to-run of a reservation, ms")
      ->check(CLI::Range(std::int64_t{1}, limits::kTtrMax));
  put_cmd->add_option("--attempts", p->attempts, "attempts before the job is dead")
      ->check(CLI::Range(std::int64_t{1}, limits::kAttemptsMax));
  put_cmd->add_option("--backoff", p->backoff, "fixed:MS or exponential:BASE_MS:CAP_MS");
  put_cmd
      ->add_option("--replicas", p->replicas,
                   "answer once this many replicas have the job (WAIT), else fail")
      ->check(CLI::Range(std::int64_t{0}, std::int64_t{16}));
  put_cmd
      ->add_option("--keep", p->keep,
                   "once acked, keep the job and its result this many ms (for wait)")
      ->check(CLI::Range(std::int64_t{0}, limits::kDelayMax));
  put_cmd->add_option("--after", p->after,
                      "wait for job TOPIC/ID first (repeat for more; :fail, :ignore or :drop "
                      "after it says what its failure does, fail by default)");
  put_cmd->add_option("--batch", p->batch,
                      "add the job to batch TOPIC/ID (made if new) before it is put (if "
                      "the put fails, the batch waits for it still: put it again)");
  put_cmd->add_flag("--replace", p->replace, "update an existing job only");
  put_cmd->add_flag("--upsert", p->upsert, "create or update");
  put_cmd->add_flag("--debounce", p->debounce,
                    "create, or update a job still waiting to this body and due time");
  put_cmd->callback([p, &selected] { selected = [p](Session& s) { return put(s, *p); }; });

  struct Named {
    std::string topic, id;
    std::vector<std::string> ids;
  };
  auto g = std::make_shared<Named>();
  auto* get_cmd = app.add_subcommand("get", "show a job");
  get_cmd->add_option("topic", g->topic)->required();
  get_cmd->add_option("id", g->id)->required();
  get_cmd->callback(
      [g, &selected] { selected = [g](Session& s) { return get(s, g->topic, g->id); }; });

  struct Waiting {
    std::string topic, id;
    std::int64_t timeout = 30000;
  };
  auto w = std::make_shared<Waiting>();
  auto* wait_cmd =
      app.add_subcommand("wait",
                         "wait for a job to finish and show it with its result "
                         "(exit status 0 done, 1 no such job, 3 dead, 4 not finished in time)");
  wait_cmd->add_option("topic", w->topic)->required();
  wait_cmd->add_option("id", w->id)->required();
  wait_cmd->add_option("--timeout", w->timeout, "ms")
      ->check(CLI::Range(std::int64_t{0}, limits::kDelayMax))
      ->capture_default_str();
  wait_cmd->callback([w, &selected] {
    selected = [w](Session& s) { return wait(s, w->topic, w->id, w->timeout); };
  });

  struct Found {
    std::string topic, prefix;
    std::int64_t limit = 0;
  };
  auto f = std::make_shared<Found>();
  auto* find_cmd = app.add_subcommand(
      "find", "the ids of a topic's jobs (any state) that start with a prefix, one a line");
  find_cmd->add_option("topic", f->topic)->required();
  find_cmd->add_option("prefix", f->prefix, "the ids' start (none: every id)");
  find_cmd->add_option("--limit", f->limit, "at most this many (0: all)")
      ->check(CLI::Range(std::int64_t{0}, limits::kOffsetMax))
      ->capture_default_str();
  find_cmd->callback([f, &selected] {
    selected = [f](Session& s) { return find(s, f->topic, f->prefix, f->limit); };
  });

  struct Moved {
    std::string topic, id;
    std::optional<std::int64_t> priority;
    std::optional<std::int64_t> delay, at;
  };
  auto mv = std::make_shared<Moved>();
  auto* resched = app.add_subcommand(
      "reschedule", "a waiting job's priority or due time, in place (its attempts stay)");
  resched->add_option("topic", mv->topic)->required();
  resched->add_option("id", mv->id)->required();
  resched
      ->add_option("--priority", mv->priority,
                   std::to_string(limits::kPrioMin) + ".." + std::to_string(limits::kPrioMax) +
                       ", higher first")
      ->check(CLI::Range(limits::kPrioMin, limits::kPrioMax));
  auto* delay_opt = resched->add_option("--delay", mv->delay, "due this many ms from now")
                        ->check(CLI::Range(std::int64_t{0}, limits::kDelayMax));
  resched->add_option("--at", mv->at, "due at this time, Unix ms (a time past is now)")
      ->check(CLI::Range(std::int64_t{0}, limits::kMsMax))
      ->excludes(delay_opt);
  resched->callback([mv, &selected] {
    selected = [mv](Session& s) {
      RescheduleOptions change{.priority = mv->priority, .due_at_ms = mv->at};
      if (mv->delay) change.delay = Millis{*mv->delay};
      return report(s.client().reschedule(mv->topic, mv->id, change), "rescheduled", mv->id, s);
    };
  });

  struct Batched {
    std::string topic, id;
    std::vector<std::string> add;
    bool seal = false;
    std::optional<std::int64_t> keep;
  };
  auto b = std::make_shared<Batched>();
  auto* batch_cmd = app.add_subcommand(
      "batch",
      "make a batch, add members, seal it; shows it (docs/flows.md: jobs put --after "
      "TOPIC/ID wait for it)");
  batch_cmd->add_option("topic", b->topic)->required();
  batch_cmd->add_option("id", b->id)->required();
  batch_cmd->add_option("--add", b->add, "a member, TOPIC/ID (repeat for more)");
  batch_cmd->add_flag("--seal", b->seal, "no more members: it finishes once they all have");
  batch_cmd
      ->add_option("--keep", b->keep, "keep it this many ms once finished (a week unless given)")
      ->check(CLI::Range(std::int64_t{1}, limits::kDelayMax));
  batch_cmd->callback([b, &selected] {
    selected = [b](Session& s) {
      BatchChange change{.seal = b->seal};
      for (const auto& m : b->add) change.add.push_back(parse_ref(m, "--add"));
      if (b->keep) change.keep = Millis{*b->keep};
      const Job batch = s.client().batch(b->topic, b->id, change);
      if (s.json()) {
        std::cout << wire::job_text(batch) << "\n";
      } else {
        print_job_text(batch);
      }
      return 0;
    };
  });

  auto d = std::make_shared<Named>();
  auto* del = app.add_subcommand("delete", "delete jobs in any state");
  del->add_option("topic", d->topic)->required();
  del->add_option("ids", d->ids)->required();
  del->callback(
      [d, &selected] { selected = [d](Session& s) { return remove(s, d->topic, d->ids); }; });
}

}  // namespace redisched::cli
