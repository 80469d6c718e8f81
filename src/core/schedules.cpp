// The Client's recurring jobs: schedules stored by the Functions library,
// their ticks computed here (core/ticks.h). docs/redis-api.md, "Recurring
// jobs".
#include <memory>

#include "core/client_access.h"
#include "core/client_impl.h"
#include "core/client_wrap.h"
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

}  // namespace

void Client::schedules_async(std::string_view topic, Callback<ScheduleList> done) {
  impl_->run<op::Schedules>(topic, {}, std::move(done));
}
REDISCHED_WRAP(ScheduleList, schedules, (std::string_view topic), (topic, std::move(cb)))

void Client::set_schedule_async(std::string_view topic, std::string_view name,
                                const ScheduleSpec& spec, Callback<Schedule> done) try {
  const auto rule = core::tick_rule(spec);  // checked before anything goes out
  JobSpec job = tick_job(spec);
  core::check_spec(job, impl_->opts.max_body);
  // Redis's clock (and the last tick, which a change keeps), then the
  // schedule with its first tick from that clock.
  impl_->run<op::Schedules>(
      topic, {std::string(name)},
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
        impl_->run<op::Schedule>(
            topic, {Schedule{name, spec, next, old ? old->last_tick_ms : 0}, std::move(job)},
            std::move(done));
      });
} catch (const Error& e) {
  impl_->refuse(done, e);
}
REDISCHED_WRAP(Schedule, set_schedule,
               (std::string_view topic, std::string_view name, const ScheduleSpec& spec),
               (topic, name, spec, std::move(cb)))

void Client::remove_schedule_async(std::string_view topic, std::string_view name,
                                   Callback<bool> done) {
  impl_->run<op::Unschedule>(topic, {std::string(name)}, std::move(done));
}
REDISCHED_WRAP(bool, remove_schedule, (std::string_view topic, std::string_view name),
               (topic, name, std::move(cb)))

void Client::pause_schedule_async(std::string_view topic, std::string_view name,
                                  Callback<Outcome> done) {
  impl_->run<op::PauseSchedule>(topic, {std::string(name)}, std::move(done));
}
REDISCHED_WRAP(Outcome, pause_schedule, (std::string_view topic, std::string_view name),
               (topic, name, std::move(cb)))

void Client::resume_schedule_async(std::string_view topic, std::string_view name,
                                   Callback<Outcome> done) {
  impl_->run<op::Schedules>(
      topic, {std::string(name)},
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
        impl_->run<op::ResumeSchedule>(topic, {name, next}, std::move(done));
      });
}
REDISCHED_WRAP(Outcome, resume_schedule, (std::string_view topic, std::string_view name),
               (topic, name, std::move(cb)))

void detail::ClientAccess::tick(Client& client, std::string_view topic, std::string_view name,
                                std::int64_t expect, std::int64_t next,
                                std::optional<std::int64_t> run, Callback<TickOutcome> done) {
  client.impl_->run<core::op::Tick>(topic, {std::string(name), expect, next, run}, std::move(done));
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
