// The token forms of the Client's asynchronous calls (redisched/client.h):
// each starts its callback form and answers as its completion token says
// (detail::answer_to). Read client.h for the API; this is how it is kept.
#pragma once

#include "redisched/client.h"  // (which includes this at its end, after class Client)

namespace redisched {

namespace detail {
// Starts a call, start(Callback<T>), whose answer goes to token.
template <class T, class Token, class Start>
auto answer_to([[maybe_unused]] Token&& token, Start&& start) {
  using Plain = std::remove_cvref_t<Token>;
  if constexpr (std::is_same_v<Plain, use_future_t>) {
    auto promise = std::make_shared<std::promise<T>>();
    auto future = promise->get_future();
    start(Callback<T>([promise](Result<T> r) {
      if (r.ok()) {
        promise->set_value(std::move(r).value());
      } else {
        promise->set_exception(std::make_exception_ptr(r.error()));
      }
    }));
    return future;
  } else if constexpr (ResultCallback<Plain, T>) {
    start(Callback<T>(std::forward<Token>(token)));
  } else {
    return AsioCompletion<Plain, T>::initiate(std::forward<Token>(token),
                                              std::forward<Start>(start));
  }
}
}  // namespace detail

template <AnswerToken<std::vector<std::string>> Token>
auto Client::set_shards_async(std::string_view topic, int n, Token&& completion) {
  return detail::answer_to<std::vector<std::string>>(
      std::forward<Token>(completion), [this, topic, n](Callback<std::vector<std::string>> done) {
        set_shards_async(topic, n, std::move(done));
      });
}

template <AnswerToken<std::vector<std::string>> Token>
auto Client::shards_async(std::string_view topic, Token&& completion) {
  return detail::answer_to<std::vector<std::string>>(
      std::forward<Token>(completion), [this, topic](Callback<std::vector<std::string>> done) {
        shards_async(topic, std::move(done));
      });
}

template <AnswerToken<PutOutcome> Token>
auto Client::put_async(std::string_view topic, const JobSpec& job, Token&& completion) {
  return detail::answer_to<PutOutcome>(
      std::forward<Token>(completion),
      [this, topic, &job](Callback<PutOutcome> done) { put_async(topic, job, std::move(done)); });
}

template <AnswerToken<std::string> Token>
auto Client::add_async(std::string_view topic, const JobSpec& job, Token&& completion) {
  return detail::answer_to<std::string>(
      std::forward<Token>(completion),
      [this, topic, &job](Callback<std::string> done) { add_async(topic, job, std::move(done)); });
}

template <AnswerToken<std::vector<PutOutcome>> Token>
auto Client::put_many_async(std::string_view topic, std::span<const JobSpec> jobs,
                            Token&& completion) {
  return detail::answer_to<std::vector<PutOutcome>>(
      std::forward<Token>(completion), [this, topic, jobs](Callback<std::vector<PutOutcome>> done) {
        put_many_async(topic, jobs, std::move(done));
      });
}

template <AnswerToken<std::optional<Job>> Token>
auto Client::get_async(std::string_view topic, std::string_view id, Token&& completion) {
  return detail::answer_to<std::optional<Job>>(
      std::forward<Token>(completion), [this, topic, id](Callback<std::optional<Job>> done) {
        get_async(topic, id, std::move(done));
      });
}

template <AnswerToken<std::optional<Job>> Token>
auto Client::get_async(std::string_view topic, std::string_view id, bool with_body,
                       Token&& completion) {
  return detail::answer_to<std::optional<Job>>(
      std::forward<Token>(completion),
      [this, topic, id, with_body](Callback<std::optional<Job>> done) {
        get_async(topic, id, with_body, std::move(done));
      });
}

template <AnswerToken<bool> Token>
auto Client::remove_async(std::string_view topic, std::string_view id, Token&& completion) {
  return detail::answer_to<bool>(
      std::forward<Token>(completion),
      [this, topic, id](Callback<bool> done) { remove_async(topic, id, std::move(done)); });
}

template <AnswerToken<ReserveResult> Token>
auto Client::reserve_async(std::string_view topic, int count, Millis ttr, Token&& completion) {
  return detail::answer_to<ReserveResult>(std::forward<Token>(completion),
                                          [this, topic, count, ttr](Callback<ReserveResult> done) {
                                            reserve_async(topic, count, ttr, std::move(done));
                                          });
}

template <AnswerToken<ReserveResult> Token>
auto Client::reserve_async(std::string_view topic, const ReserveOptions& options,
                           Token&& completion) {
  return detail::answer_to<ReserveResult>(std::forward<Token>(completion),
                                          [this, topic, options](Callback<ReserveResult> done) {
                                            reserve_async(topic, options, std::move(done));
                                          });
}

template <AnswerToken<Outcome> Token>
auto Client::ack_async(std::string_view topic, std::string_view id, std::uint64_t token,
                       Millis keep, Token&& completion) {
  return detail::answer_to<Outcome>(std::forward<Token>(completion),
                                    [this, topic, id, token, keep](Callback<Outcome> done) {
                                      ack_async(topic, id, token, keep, std::move(done));
                                    });
}

template <AnswerToken<Outcome> Token>
auto Client::ack_async(std::string_view topic, std::string_view id, std::uint64_t token,
                       Millis keep, std::string_view result, Token&& completion) {
  return detail::answer_to<Outcome>(std::forward<Token>(completion),
                                    [this, topic, id, token, keep, result](Callback<Outcome> done) {
                                      ack_async(topic, id, token, keep, result, std::move(done));
                                    });
}

template <AnswerToken<std::vector<Outcome>> Token>
auto Client::ack_many_async(std::string_view topic,
                            std::span<const std::pair<std::string, std::uint64_t>> jobs,
                            Millis keep, Token&& completion) {
  return detail::answer_to<std::vector<Outcome>>(
      std::forward<Token>(completion),
      [this, topic, jobs, keep](Callback<std::vector<Outcome>> done) {
        ack_many_async(topic, jobs, keep, std::move(done));
      });
}

template <AnswerToken<Outcome> Token>
auto Client::release_async(std::string_view topic, std::string_view id, std::uint64_t token,
                           Millis delay, std::optional<std::int64_t> priority, Token&& completion) {
  return detail::answer_to<Outcome>(
      std::forward<Token>(completion),
      [this, topic, id, token, delay, priority](Callback<Outcome> done) {
        release_async(topic, id, token, delay, priority, std::move(done));
      });
}

template <AnswerToken<FailResult> Token>
auto Client::fail_async(std::string_view topic, std::string_view id, std::uint64_t token,
                        std::string_view error, bool bury, std::optional<Millis> retry_delay,
                        std::optional<int> max_attempts, Token&& completion) {
  return detail::answer_to<FailResult>(
      std::forward<Token>(completion),
      [this, topic, id, token, error, bury, retry_delay, max_attempts](Callback<FailResult> done) {
        fail_async(topic, id, token, error, bury, retry_delay, max_attempts, std::move(done));
      });
}

template <AnswerToken<TouchResult> Token>
auto Client::touch_async(std::string_view topic, std::string_view id, std::uint64_t token,
                         Millis ttr, Token&& completion) {
  return detail::answer_to<TouchResult>(std::forward<Token>(completion),
                                        [this, topic, id, token, ttr](Callback<TouchResult> done) {
                                          touch_async(topic, id, token, ttr, std::move(done));
                                        });
}

template <AnswerToken<Outcome> Token>
auto Client::report_async(std::string_view topic, std::string_view id, std::uint64_t token,
                          const JobReport& report, Token&& completion) {
  return detail::answer_to<Outcome>(std::forward<Token>(completion),
                                    [this, topic, id, token, report](Callback<Outcome> done) {
                                      report_async(topic, id, token, report, std::move(done));
                                    });
}

template <AnswerToken<ReserveJobResult> Token>
auto Client::reserve_job_async(std::string_view topic, std::string_view id, Millis ttr,
                               std::string_view worker, Token&& completion) {
  return detail::answer_to<ReserveJobResult>(
      std::forward<Token>(completion),
      [this, topic, id, ttr, worker](Callback<ReserveJobResult> done) {
        reserve_job_async(topic, id, ttr, worker, std::move(done));
      });
}

template <AnswerToken<ReserveResult> Token>
auto Client::pull_async(std::string_view topic, int count, Token&& completion) {
  return detail::answer_to<ReserveResult>(std::forward<Token>(completion),
                                          [this, topic, count](Callback<ReserveResult> done) {
                                            pull_async(topic, count, std::move(done));
                                          });
}

template <AnswerToken<RequeueResult> Token>
auto Client::requeue_async(std::string_view topic, int limit, Token&& completion) {
  return detail::answer_to<RequeueResult>(std::forward<Token>(completion),
                                          [this, topic, limit](Callback<RequeueResult> done) {
                                            requeue_async(topic, limit, std::move(done));
                                          });
}

template <AnswerToken<MoveResult> Token>
auto Client::move_outbox_async(std::string_view topic, Token&& completion) {
  return detail::answer_to<MoveResult>(
      std::forward<Token>(completion),
      [this, topic](Callback<MoveResult> done) { move_outbox_async(topic, std::move(done)); });
}

template <AnswerToken<std::vector<std::string>> Token>
auto Client::outbox_topics_async(Token&& completion) {
  return detail::answer_to<std::vector<std::string>>(
      std::forward<Token>(completion),
      [this](Callback<std::vector<std::string>> done) { outbox_topics_async(std::move(done)); });
}

template <AnswerToken<Job> Token>
auto Client::batch_async(std::string_view topic, std::string_view id, const BatchChange& change,
                         Token&& completion) {
  return detail::answer_to<Job>(std::forward<Token>(completion),
                                [this, topic, id, change](Callback<Job> done) {
                                  batch_async(topic, id, change, std::move(done));
                                });
}

template <AnswerToken<std::optional<Job>> Token>
auto Client::get_with_dependencies_async(std::string_view topic, std::string_view id,
                                         Token&& completion) {
  return detail::answer_to<std::optional<Job>>(
      std::forward<Token>(completion), [this, topic, id](Callback<std::optional<Job>> done) {
        get_with_dependencies_async(topic, id, std::move(done));
      });
}

template <AnswerToken<TopicStats> Token>
auto Client::stats_async(std::string_view topic, Token&& completion) {
  return detail::answer_to<TopicStats>(
      std::forward<Token>(completion),
      [this, topic](Callback<TopicStats> done) { stats_async(topic, std::move(done)); });
}

template <AnswerToken<ListPage> Token>
auto Client::list_async(std::string_view topic, JobState state, std::int64_t offset, int count,
                        bool with_bodies, Token&& completion) {
  return detail::answer_to<ListPage>(
      std::forward<Token>(completion),
      [this, topic, state, offset, count, with_bodies](Callback<ListPage> done) {
        list_async(topic, state, offset, count, with_bodies, std::move(done));
      });
}

template <AnswerToken<Outcome> Token>
auto Client::reschedule_async(std::string_view topic, std::string_view id,
                              const RescheduleOptions& change, Token&& completion) {
  return detail::answer_to<Outcome>(std::forward<Token>(completion),
                                    [this, topic, id, change](Callback<Outcome> done) {
                                      reschedule_async(topic, id, change, std::move(done));
                                    });
}

template <AnswerToken<std::vector<HistoryRow>> Token>
auto Client::history_async(std::string_view topic, HistoryStep step, std::int64_t from_ms,
                           std::int64_t to_ms, Token&& completion) {
  return detail::answer_to<std::vector<HistoryRow>>(
      std::forward<Token>(completion),
      [this, topic, step, from_ms, to_ms](Callback<std::vector<HistoryRow>> done) {
        history_async(topic, step, from_ms, to_ms, std::move(done));
      });
}

template <AnswerToken<IdPage> Token>
auto Client::find_ids_async(std::string_view topic, std::string_view prefix,
                            std::string_view cursor, int count, Token&& completion) {
  return detail::answer_to<IdPage>(std::forward<Token>(completion),
                                   [this, topic, prefix, cursor, count](Callback<IdPage> done) {
                                     find_ids_async(topic, prefix, cursor, count, std::move(done));
                                   });
}

template <AnswerToken<std::vector<std::string>> Token>
auto Client::topics_async(Token&& completion) {
  return detail::answer_to<std::vector<std::string>>(
      std::forward<Token>(completion),
      [this](Callback<std::vector<std::string>> done) { topics_async(std::move(done)); });
}

template <AnswerToken<bool> Token>
auto Client::restore_async(std::string_view topic, const Job& job, bool replace,
                           Token&& completion) {
  return detail::answer_to<bool>(std::forward<Token>(completion),
                                 [this, topic, &job, replace](Callback<bool> done) {
                                   restore_async(topic, job, replace, std::move(done));
                                 });
}

template <AnswerToken<int> Token>
auto Client::kick_async(std::string_view topic, std::span<const std::string> ids,
                        Token&& completion) {
  return detail::answer_to<int>(
      std::forward<Token>(completion),
      [this, topic, ids](Callback<int> done) { kick_async(topic, ids, std::move(done)); });
}

template <AnswerToken<int> Token>
auto Client::remove_many_async(std::string_view topic, std::span<const std::string> ids,
                               Token&& completion) {
  return detail::answer_to<int>(
      std::forward<Token>(completion),
      [this, topic, ids](Callback<int> done) { remove_many_async(topic, ids, std::move(done)); });
}

template <AnswerToken<int> Token>
auto Client::kick_all_async(std::string_view topic, int limit, Token&& completion) {
  return detail::answer_to<int>(
      std::forward<Token>(completion),
      [this, topic, limit](Callback<int> done) { kick_all_async(topic, limit, std::move(done)); });
}

template <AnswerToken<int> Token>
auto Client::promote_async(std::string_view topic, std::span<const std::string> ids,
                           Token&& completion) {
  return detail::answer_to<int>(
      std::forward<Token>(completion),
      [this, topic, ids](Callback<int> done) { promote_async(topic, ids, std::move(done)); });
}

template <AnswerToken<BatchResult> Token>
auto Client::promote_all_async(std::string_view topic, int limit, Token&& completion) {
  return detail::answer_to<BatchResult>(std::forward<Token>(completion),
                                        [this, topic, limit](Callback<BatchResult> done) {
                                          promote_all_async(topic, limit, std::move(done));
                                        });
}

template <AnswerToken<BatchResult> Token>
auto Client::purge_dead_async(std::string_view topic, std::int64_t before_ms, int limit,
                              Token&& completion) {
  return detail::answer_to<BatchResult>(
      std::forward<Token>(completion), [this, topic, before_ms, limit](Callback<BatchResult> done) {
        purge_dead_async(topic, before_ms, limit, std::move(done));
      });
}

template <AnswerToken<int> Token>
auto Client::library_version_async(Token&& completion) {
  return detail::answer_to<int>(std::forward<Token>(completion), [this](Callback<int> done) {
    library_version_async(std::move(done));
  });
}

template <AnswerToken<std::int64_t> Token>
auto Client::now_ms_async(Token&& completion) {
  return detail::answer_to<std::int64_t>(
      std::forward<Token>(completion),
      [this](Callback<std::int64_t> done) { now_ms_async(std::move(done)); });
}

template <AnswerToken<bool> Token>
auto Client::beat_async(const WorkerEntry& entry, Millis ttl, Token&& completion) {
  return detail::answer_to<bool>(
      std::forward<Token>(completion),
      [this, &entry, ttl](Callback<bool> done) { beat_async(entry, ttl, std::move(done)); });
}

template <AnswerToken<bool> Token>
auto Client::leave_async(std::string_view worker_id, Token&& completion) {
  return detail::answer_to<bool>(
      std::forward<Token>(completion),
      [this, worker_id](Callback<bool> done) { leave_async(worker_id, std::move(done)); });
}

template <AnswerToken<std::vector<WorkerEntry>> Token>
auto Client::workers_async(Token&& completion) {
  return detail::answer_to<std::vector<WorkerEntry>>(
      std::forward<Token>(completion),
      [this](Callback<std::vector<WorkerEntry>> done) { workers_async(std::move(done)); });
}

template <AnswerToken<std::vector<RedisNode>> Token>
auto Client::redis_nodes_async(Token&& completion) {
  return detail::answer_to<std::vector<RedisNode>>(
      std::forward<Token>(completion),
      [this](Callback<std::vector<RedisNode>> done) { redis_nodes_async(std::move(done)); });
}

template <AnswerToken<bool> Token>
auto Client::pause_async(std::string_view topic, Token&& completion) {
  return detail::answer_to<bool>(
      std::forward<Token>(completion),
      [this, topic](Callback<bool> done) { pause_async(topic, std::move(done)); });
}

template <AnswerToken<bool> Token>
auto Client::pause_async(std::string_view topic, Millis duration, Token&& completion) {
  return detail::answer_to<bool>(std::forward<Token>(completion),
                                 [this, topic, duration](Callback<bool> done) {
                                   pause_async(topic, duration, std::move(done));
                                 });
}

template <AnswerToken<bool> Token>
auto Client::resume_async(std::string_view topic, Token&& completion) {
  return detail::answer_to<bool>(
      std::forward<Token>(completion),
      [this, topic](Callback<bool> done) { resume_async(topic, std::move(done)); });
}

template <AnswerToken<TopicLimits> Token>
auto Client::set_limits_async(std::string_view topic, const TopicLimits& limits,
                              Token&& completion) {
  return detail::answer_to<TopicLimits>(std::forward<Token>(completion),
                                        [this, topic, &limits](Callback<TopicLimits> done) {
                                          set_limits_async(topic, limits, std::move(done));
                                        });
}

template <AnswerToken<TopicLimits> Token>
auto Client::limits_async(std::string_view topic, Token&& completion) {
  return detail::answer_to<TopicLimits>(
      std::forward<Token>(completion),
      [this, topic](Callback<TopicLimits> done) { limits_async(topic, std::move(done)); });
}

template <AnswerToken<RetryWindow> Token>
auto Client::set_retry_window_async(std::string_view topic, Millis window, Token&& completion) {
  return detail::answer_to<RetryWindow>(std::forward<Token>(completion),
                                        [this, topic, window](Callback<RetryWindow> done) {
                                          set_retry_window_async(topic, window, std::move(done));
                                        });
}

template <AnswerToken<RetryWindow> Token>
auto Client::retry_window_async(std::string_view topic, Token&& completion) {
  return detail::answer_to<RetryWindow>(
      std::forward<Token>(completion),
      [this, topic](Callback<RetryWindow> done) { retry_window_async(topic, std::move(done)); });
}

template <AnswerToken<Migration> Token>
auto Client::migrate_async(std::string_view topic, int limit, Token&& completion) {
  return detail::answer_to<Migration>(std::forward<Token>(completion),
                                      [this, topic, limit](Callback<Migration> done) {
                                        migrate_async(topic, limit, std::move(done));
                                      });
}

template <AnswerToken<Schedule> Token>
auto Client::set_schedule_async(std::string_view topic, std::string_view name,
                                const ScheduleSpec& spec, Token&& completion) {
  return detail::answer_to<Schedule>(std::forward<Token>(completion),
                                     [this, topic, name, &spec](Callback<Schedule> done) {
                                       set_schedule_async(topic, name, spec, std::move(done));
                                     });
}

template <AnswerToken<ScheduleList> Token>
auto Client::schedules_async(std::string_view topic, Token&& completion) {
  return detail::answer_to<ScheduleList>(
      std::forward<Token>(completion),
      [this, topic](Callback<ScheduleList> done) { schedules_async(topic, std::move(done)); });
}

template <AnswerToken<bool> Token>
auto Client::remove_schedule_async(std::string_view topic, std::string_view name,
                                   Token&& completion) {
  return detail::answer_to<bool>(std::forward<Token>(completion),
                                 [this, topic, name](Callback<bool> done) {
                                   remove_schedule_async(topic, name, std::move(done));
                                 });
}

template <AnswerToken<Outcome> Token>
auto Client::pause_schedule_async(std::string_view topic, std::string_view name,
                                  Token&& completion) {
  return detail::answer_to<Outcome>(std::forward<Token>(completion),
                                    [this, topic, name](Callback<Outcome> done) {
                                      pause_schedule_async(topic, name, std::move(done));
                                    });
}

template <AnswerToken<Outcome> Token>
auto Client::resume_schedule_async(std::string_view topic, std::string_view name,
                                   Token&& completion) {
  return detail::answer_to<Outcome>(std::forward<Token>(completion),
                                    [this, topic, name](Callback<Outcome> done) {
                                      resume_schedule_async(topic, name, std::move(done));
                                    });
}

template <AnswerToken<std::optional<Job>> Token>
auto Client::wait_async(std::string_view topic, std::string_view id, Millis timeout,
                        Token&& completion) {
  return detail::answer_to<std::optional<Job>>(
      std::forward<Token>(completion),
      [this, topic, id, timeout](Callback<std::optional<Job>> done) {
        wait_async(topic, id, timeout, std::move(done));
      });
}

}  // namespace redisched
