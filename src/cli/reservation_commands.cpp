// reserve, pull, and what a reservation's holder does: ack, release, fail,
// touch, report.
#include <boost/json/object.hpp>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/output.h"
#include "redisched/client.h"
#include "redisched/limits.h"

namespace redisched::cli {
namespace {

struct Taking {
  std::string topic;
  int count = 1;
  std::optional<std::int64_t> ttr;
  std::optional<std::string> worker;  // reserve's
  std::optional<std::string> id;      // reserve's: this job (reserve_job)
};

// The arguments of a call on a reservation.
struct Held {
  std::string topic, id, error;
  std::optional<std::string> result;
  std::uint64_t token = 0;
  std::optional<std::int64_t> keep, delay, ttr;
  std::optional<std::int64_t> priority;
  bool dead = false;
  std::optional<std::string> progress;  // report's
  std::vector<std::string> lines;
};

CLI::App* add_held(CLI::App& app, const char* name, const char* what, Held& h) {
  auto* sub = app.add_subcommand(name, what);
  sub->add_option("topic", h.topic)->required();
  sub->add_option("id", h.id)->required();
  sub->add_option("token", h.token, "the reservation's token")->required();
  return sub;
}

int fail(Session& s, const Held& h) {
  auto r = s.client().fail(h.topic, h.id, h.token, h.error, h.dead);
  if (r.outcome == Outcome::ok && !s.json()) {
    std::cout << "failed " << h.id << ", now " << to_string(r.state) << "\n";
    return 0;
  }
  return report(r.outcome, "failed", h.id, s);
}

int touch(Session& s, const Held& h) {
  auto r = s.client().touch(h.topic, h.id, h.token, Millis(h.ttr.value_or(0)));
  if (r.outcome == Outcome::ok && !s.json()) {
    std::cout << "touched " << h.id << ", deadline " << r.deadline_ms << "\n";
    return 0;
  }
  return report(r.outcome, "touched", h.id, s);
}

}  // namespace

void add_reservation_commands(CLI::App& app, Action& selected) {
  auto r = std::make_shared<Taking>();
  auto* reserve = app.add_subcommand("reserve", "reserve ready jobs");
  reserve->add_option("topic", r->topic)->required();
  reserve->add_option("--count", r->count, "how many, 1.." + std::to_string(limits::kBatchMax))
      ->check(CLI::Range(std::int64_t{1}, limits::kBatchMax))
      ->capture_default_str();
  reserve->add_option("--ttr", r->ttr, "time-to-run for jobs without their own, ms")
      ->check(CLI::Range(std::int64_t{1}, limits::kTtrMax));
  reserve->add_option("--worker", r->worker,
                      "who reserves (get and the job's history show it), 1.." +
                          std::to_string(limits::kWorkerIdMax) + " bytes");
  reserve
      ->add_option("--id", r->id,
                   "this job, ready, delayed or dead, ahead of the rest (beanstalkd's reserve-job)")
      ->excludes(reserve->get_option("--count"));
  reserve->callback([r, &selected] {
    selected = [r](Session& s) {
      if (r->worker && r->worker->empty()) throw Error(Errc::invalid_argument, "--worker is empty");
      if (r->id) {
        auto one = s.client().reserve_job(r->topic, *r->id, Millis(r->ttr.value_or(0)),
                                          r->worker.value_or(""));
        if (one.outcome == Outcome::not_found) return report(one.outcome, "reserved", *r->id, s);
        if (one.outcome != Outcome::ok) {
          std::cerr << "redisched: " << *r->id
                    << ": reserved, waiting for other jobs, or finished: not to be had\n";
          return 1;
        }
        ReserveResult taken;
        taken.jobs.push_back(std::move(one.job));
        print_taken(taken, s, true);
        return 0;
      }
      const ReserveOptions options{r->count, Millis(r->ttr.value_or(0)), r->worker.value_or("")};
      print_taken(s.client().reserve(r->topic, options), s, true);
      return 0;
    };
  });

  auto p = std::make_shared<Taking>();
  auto* pull = app.add_subcommand("pull", "take ready jobs for good (at-most-once)");
  pull->add_option("topic", p->topic)->required();
  pull->add_option("--count", p->count, "how many, 1.." + std::to_string(limits::kBatchMax))
      ->check(CLI::Range(std::int64_t{1}, limits::kBatchMax))
      ->capture_default_str();
  pull->callback([p, &selected] {
    selected = [p](Session& s) {
      print_taken(s.client().pull(p->topic, p->count), s, false);
      return 0;
    };
  });

  auto a = std::make_shared<Held>();
  auto* ack = add_held(app, "ack", "a reserved job is done", *a);
  ack->add_option("--keep", a->keep,
                  "keep the finished job this many ms (at least the keep reserve showed)")
      ->check(CLI::Range(std::int64_t{0}, limits::kDelayMax));
  ack->add_option("--result", a->result,
                  "the result, kept with the job (--keep, at least the retry window), and sent to "
                  "the jobs waiting "
                  "for it (then --keep may be left out)");
  ack->callback([a, &selected] {
    selected = [a](Session& s) {
      const Millis keep(a->keep.value_or(0));
      return report(a->result ? s.client().ack(a->topic, a->id, a->token, keep, *a->result)
                              : s.client().ack(a->topic, a->id, a->token, keep),
                    "acked", a->id, s);
    };
  });

  auto rel = std::make_shared<Held>();
  auto* release = add_held(app, "release", "put a reserved job back", *rel);
  release->add_option("--delay", rel->delay, "due this many ms from now")
      ->check(CLI::Range(std::int64_t{0}, limits::kDelayMax));
  release->add_option("--priority", rel->priority, "new priority")
      ->check(CLI::Range(limits::kPrioMin, limits::kPrioMax));
  release->callback([rel, &selected] {
    selected = [rel](Session& s) {
      return report(s.client().release(rel->topic, rel->id, rel->token,
                                       Millis(rel->delay.value_or(0)), rel->priority),
                    "released", rel->id, s);
    };
  });

  auto f = std::make_shared<Held>();
  auto* fail_cmd = add_held(app, "fail", "a reserved job's attempt failed", *f);
  fail_cmd->add_option("error", f->error, "what went wrong")->required();
  fail_cmd->add_flag("--dead", f->dead, "do not retry");
  fail_cmd->callback([f, &selected] { selected = [f](Session& s) { return fail(s, *f); }; });

  auto t = std::make_shared<Held>();
  auto* touch_cmd = add_held(app, "touch", "extend a reservation", *t);
  touch_cmd->add_option("--ttr", t->ttr, "new time-to-run from now, ms")
      ->check(CLI::Range(std::int64_t{1}, limits::kTtrMax));
  touch_cmd->callback([t, &selected] { selected = [t](Session& s) { return touch(s, *t); }; });

  auto rp = std::make_shared<Held>();
  auto* report_cmd =
      add_held(app, "report", "a reserved job's progress and log lines (get shows them)", *rp);
  report_cmd->add_option("--progress", rp->progress,
                         "a JSON value, e.g. 40 or '{\"percent\":40}', 1.." +
                             std::to_string(limits::kProgressMax) + " bytes");
  report_cmd->add_option("--log", rp->lines, "a log line (give it again for more)");
  report_cmd->callback([rp, &selected] {
    selected = [rp](Session& s) {
      return report(s.client().report(rp->topic, rp->id, rp->token, {rp->lines, rp->progress}),
                    "reported", rp->id, s);
    };
  });
}

}  // namespace redisched::cli
