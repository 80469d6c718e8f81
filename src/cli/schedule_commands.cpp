// Recurring jobs: schedule set, list, pause, resume, delete.
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/commands.h"
#include "cli/output.h"
#include "redisched/client.h"
#include "redisched/limits.h"
#include "wire/job_json.h"

namespace redisched::cli {
namespace {

struct ScheduleArgs {
  std::string topic, name, body, cron, zone = "UTC", catch_up = "skip";
  std::optional<std::int64_t> every, ttr, attempts, keep;
  std::int64_t priority = 0;
  bool paused = false;

  ScheduleSpec spec() const {
    ScheduleSpec s;
    s.cron = cron;
    s.time_zone = zone;
    if (every) s.every = Millis(*every);
    s.body = body;
    s.priority = priority;
    if (ttr) s.ttr = Millis(*ttr);
    if (attempts) s.max_attempts = static_cast<int>(*attempts);
    if (keep) s.keep = Millis(*keep);
    s.catch_up = catch_up == "last" ? CatchUp::last : CatchUp::skip;
    s.paused = paused;
    return s;
  }
};

void print_schedule(const Schedule& s, const Session& session) {
  if (session.json()) return print_json(wire::schedule_json(s));
  std::cout << s.name << "\t"
            << (s.spec.every ? "every " + std::to_string(s.spec.every->count()) + " ms"
                             : "cron " + s.spec.cron + " (" + s.spec.time_zone + ")")
            << "\tnext " << s.next_ms << "\tlast "
            << (s.last_tick_ms > 0 ? std::to_string(s.last_tick_ms) : "none")
            << (s.spec.paused ? "\tpaused" : "") << "\n";
}

int changed(Outcome o, std::string_view what, const std::string& topic, const std::string& name,
            const Session& s) {
  if (o == Outcome::not_found) {
    std::cerr << "redisched: no schedule " << name << " in " << topic << "\n";
    return 1;
  }
  const bool c = o == Outcome::ok;
  if (s.json()) {
    print_json(boost::json::object{{"name", name}, {"changed", c}});
  } else {
    std::cout << (c ? std::string(what) : "unchanged") << " " << name << "\n";
  }
  return 0;
}

}  // namespace

void add_schedule_commands(CLI::App& app, Action& selected) {
  auto* group = app.add_subcommand(
      "schedule", "recurring jobs: each tick puts one job, id <name>@<tick ms>, once");
  group->require_subcommand(1);

  auto a = std::make_shared<ScheduleArgs>();
  auto* set = group->add_subcommand("set", "create or change a schedule");
  set->add_option("topic", a->topic)->required();
  set->add_option("name", a->name,
                  "1.." + std::to_string(limits::kSchedNameMax) + " of A-Z a-z 0-9 _ - .")
      ->required();
  set->add_option("body", a->body, "each tick's job's body")->required();
  auto* cron = set->add_option("--cron", a->cron,
                               "5 fields (minute hour day month weekday) or 6 (seconds first), "
                               "or @daily, @hourly...");
  auto* every = set->add_option("--every", a->every, "a fixed interval, ms")
                    ->check(CLI::Range(std::int64_t{1}, limits::kDelayMax));
  cron->excludes(every);
  set->add_option("--tz", a->zone, "the cron rule's time zone (IANA)")->capture_default_str();
  set->add_option("--catch-up", a->catch_up,
                  "ticks missed while no scheduler ran: skip, or run the last")
      ->check(CLI::IsMember({"skip", "last"}))
      ->capture_default_str();
  set->add_option("--priority", a->priority,
                  std::to_string(limits::kPrioMin) + ".." + std::to_string(limits::kPrioMax))
      ->check(CLI::Range(limits::kPrioMin, limits::kPrioMax));
  set->add_option("--ttr", a->ttr, "time-to-run, ms")
      ->check(CLI::Range(std::int64_t{0}, limits::kTtrMax));
  set->add_option("--attempts", a->attempts)
      ->check(CLI::Range(std::int64_t{1}, limits::kAttemptsMax));
  set->add_option("--keep", a->keep, "keep each finished job (and its result) this many ms")
      ->check(CLI::Range(std::int64_t{0}, limits::kDelayMax));
  set->add_flag("--paused", a->paused, "set it paused");
  set->callback([a, &selected] {
    selected = [a](Session& s) {
      print_schedule(s.client().set_schedule(a->topic, a->name, a->spec()), s);
      return 0;
    };
  });

  struct Named {
    std::string topic, name;
  };
  auto l = std::make_shared<Named>();
  auto* list = group->add_subcommand("list", "a topic's schedules");
  list->add_option("topic", l->topic)->required();
  list->callback([l, &selected] {
    selected = [l](Session& s) {
      for (const auto& sc : s.client().schedules(l->topic).schedules) print_schedule(sc, s);
      return 0;
    };
  });

  const auto named = [&](const char* verb, const char* what, auto call) {
    auto n = std::make_shared<Named>();
    auto* cmd = group->add_subcommand(verb, what);
    cmd->add_option("topic", n->topic)->required();
    cmd->add_option("name", n->name)->required();
    cmd->callback([n, &selected, call] {
      selected = [n, call](Session& s) { return call(s, n->topic, n->name); };
    });
  };
  named("pause", "put nothing until resumed",
        [](Session& s, const std::string& t, const std::string& n) {
          return changed(s.client().pause_schedule(t, n), "paused", t, n, s);
        });
  named("resume", "tick again from now on",
        [](Session& s, const std::string& t, const std::string& n) {
          return changed(s.client().resume_schedule(t, n), "resumed", t, n, s);
        });
  named("delete", "delete a schedule (the jobs it put stay)",
        [](Session& s, const std::string& t, const std::string& n) {
          return changed(s.client().remove_schedule(t, n) ? Outcome::ok : Outcome::not_found,
                         "deleted", t, n, s);
        });
}

}  // namespace redisched::cli
