// The Client's recurring jobs: schedules stored by the Functions library,
// their ticks computed here (core/ticks.h). docs/redis-api.md, "Recurring
// jobs".
#include <memory>

#include "core/client_access.h"
#include "core/client_impl.h"
#include "core/keys.h"
#include "core/ticks.h"
#include "redisched/client.h"

namespace redisched {
namespace {

// The tick job's options, as put takes them.
JobSpec tick_job(const ScheduleSpec& spec) {
  JobSpec job;
  job.body = spec.body;
  job.priority = spec.priority;
  job.ttr = spec.ttr;
  job.max_attempts = spec.max_attempts;
  job.backoff = spec.backoff;
  job.keep = spec.keep;
  return job;
}

// The one schedule a NAME read found, if any.
std::optional<Schedule> only(ScheduleList& list) {
  if (list.schedules.empty()) return std::nullopt;
  return std::move(list.schedules.front());
}

// unschedule's code: whether there was one.
bool changed(const Reply& r) { return core::parse_integer(r) == 1; }

}  // namespace

void Client::schedules_async(std::string_view topic, Callback<ScheduleList> done) try {
  impl_->call<ScheduleList>(topic, impl_->fcall("schedules", topic), core::parse_schedules,
                            std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(ScheduleList, schedules, (std::string_view topic), (topic, std::move(cb)))

void Client::set_schedule_async(std::string_view topic, std::string_view name,
                                const ScheduleSpec& spec, Callback<Schedule> done) try {
  const auto rule = core::tick_rule(spec);  // checked before anything goes out
  JobSpec job = tick_job(spec);
  core::check_spec(job, impl_->opts.max_body);
  // Redis's clock (and the last tick, which a change keeps), then the
  // schedule with its first tick from that clock.
  auto read = impl_->fcall("schedules", topic);
  read.add("NAME").add(name);
  impl_->call<ScheduleList>(
      topic, read, core::parse_schedules,
      [this, topic = std::string(topic), name = std::string(name), spec, rule, job,
       done = std::move(done)](Result<ScheduleList> r) mutable {
        if (!r.ok()) return done(r.error());
        const auto old = only(r.value());
        // The same rule set again (an application declaring its schedules
        // at each start): its next tick stays, so a restart neither delays
        // an interval nor drops a tick that is due.
        const bool same_rule = old && !old->spec.paused && old->spec.cron == spec.cron &&
                               old->spec.time_zone == spec.time_zone &&
                               old->spec.every == spec.every;
        const std::int64_t next = same_rule ? old->next_ms : rule.next_after(r.value().now_ms);
        if (next < 0) return done(Error(Errc::invalid_argument, "the cron rule never comes"));
        auto cmd = impl_->fcall("schedule", topic);
        cmd.add(name).add(spec.body);
        if (spec.every) {
          cmd.add("EVERY").add(spec.every->count());
        } else {
          cmd.add("CRON").add(spec.cron).add(spec.time_zone);
        }
        cmd.add("NEXT").add(next);
        if (spec.catch_up == CatchUp::last) cmd.add("CATCHUP").add("last");
        if (spec.paused) cmd.add("PAUSED");
        core::add_put_options(cmd, job);
        impl_->add_max_body(cmd);
        Schedule stored{name, spec, next, old ? old->last_tick_ms : 0};
        impl_->call<Schedule>(
            topic, cmd, [stored](const Reply&) { return stored; }, std::move(done));
      });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(Schedule, set_schedule,
               (std::string_view topic, std::string_view name, const ScheduleSpec& spec),
               (topic, name, spec, std::move(cb)))

void Client::remove_schedule_async(std::string_view topic, std::string_view name,
                                   Callback<bool> done) try {
  auto cmd = impl_->fcall("unschedule", topic);
  cmd.add(name);
  impl_->call<bool>(topic, cmd, changed, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(bool, remove_schedule, (std::string_view topic, std::string_view name),
               (topic, name, std::move(cb)))

void Client::pause_schedule_async(std::string_view topic, std::string_view name,
                                  Callback<Outcome> done) try {
  auto cmd = impl_->fcall("pauseschedule", topic);
  cmd.add(name);
  impl_->call<Outcome>(topic, cmd, core::parse_outcome, std::move(done));
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(Outcome, pause_schedule, (std::string_view topic, std::string_view name),
               (topic, name, std::move(cb)))

void Client::resume_schedule_async(std::string_view topic, std::string_view name,
                                   Callback<Outcome> done) try {
  auto read = impl_->fcall("schedules", topic);
  read.add("NAME").add(name);
  impl_->call<ScheduleList>(
      topic, read, core::parse_schedules,
      [this, topic = std::string(topic), name = std::string(name),
       done = std::move(done)](Result<ScheduleList> r) mutable {
        if (!r.ok()) return done(r.error());
        const auto sc = only(r.value());
        if (!sc) return done(Outcome::not_found);
        std::int64_t next = 0;
        try {
          next = core::tick_rule(sc->spec).next_after(r.value().now_ms);
        } catch (const Error& e) {
          return done(e);
        }
        if (next < 0) return done(Error(Errc::invalid_argument, "the cron rule never comes"));
        auto cmd = impl_->fcall("resumeschedule", topic);
        cmd.add(name).add("NEXT").add(next);
        impl_->call<Outcome>(topic, cmd, core::parse_outcome, std::move(done));
      });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(Outcome, resume_schedule, (std::string_view topic, std::string_view name),
               (topic, name, std::move(cb)))

void detail::ClientAccess::tick(Client& client, std::string_view topic, std::string_view name,
                                std::int64_t expect, std::int64_t next,
                                std::optional<std::int64_t> run, Callback<TickOutcome> done) try {
  auto& impl = *client.impl_;
  auto cmd = impl.fcall("tick", topic);
  cmd.add(name).add(expect).add(next);
  if (run) cmd.add("RUN").add(*run);
  impl.call<TickOutcome>(topic, cmd, core::parse_tick, std::move(done));
} catch (const Error& e) {
  client.impl_->refuse(done, e);
}

Subscription Client::watch_schedules(std::string_view topic,
                                     std::function<void(const std::string& name)> on_change,
                                     std::function<void()> on_ready) {
  core::check_topic(topic);
  auto& link = impl_->link(topic);
  // (The channel also carries "~shards", a change of the topic's shards.)
  const std::uint64_t id = link.subscribe(
      core::schedules_channel(impl_->opts.prefix, topic),
      [on_change = std::move(on_change)](const std::string& name) {
        if (!name.starts_with('~')) on_change(name);
      },
      std::move(on_ready));
  return Subscription([&link, id] { link.unsubscribe(id); });
}

#undef REDISCHED_WRAP

}  // namespace redisched
