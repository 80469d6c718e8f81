#include "server/dashboard.h"

#include <atomic>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/url/parse.hpp>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <utility>
#include <vector>

#include "core/checks.h"
#include "server/async_util.h"
#include "server/census.h"
#include "server/metrics.h"
#include "server/web_assets.h"
#include "wire/job_json.h"
#include "wire/json_text.h"

namespace redisched::server {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;

std::string_view content_type(std::string_view path) {
  if (path.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (path.ends_with(".css")) return "text/css; charset=utf-8";
  return "text/html; charset=utf-8";
}

// What one stream sent: each topic's row as last sent (serialized), so that
// a message carries only the rows that changed.
using SentRows = std::map<std::string, std::string, std::less<>>;

// The counts of the topics a stream follows: every topic (the server's
// shared reading, at most a second old), or those it named, read alone.
using Rows = std::vector<std::pair<std::string, TopicStats>>;
asio::awaitable<std::shared_ptr<const Rows>> follow(ApiContext& ctx,
                                                    const std::vector<std::string>& named) {
  if (named.empty()) {
    auto reading =
        co_await ctx.census.after(std::chrono::steady_clock::now() - std::chrono::seconds(1));
    co_return std::shared_ptr<const Rows>(reading, &reading->topics);  // (no copy)
  }
  auto out = std::make_shared<Rows>();
  auto stats = co_await await_each<TopicStats>(
      named, [&](const std::string& t) { return ctx.client.stats_async(t, asio::deferred); });
  for (std::size_t i = 0; i < named.size(); ++i) {
    if (stats[i].ok()) out->emplace_back(named[i], stats[i].value());
    // (a failed read leaves the row as last sent: the next tick tries again)
  }
  co_return out;
}

// The jobs of a named stream's topics that reported (Client::watch_reports)
// since its last message, in the order they first did (so that none waits
// behind jobs that report all the time): at most kReportedMax kept, the
// later ones dropped until there is room (the job page reads its job again
// when it opens).
struct Reported {
  using JobKey = std::pair<std::string, std::string>;  // (topic, id)
  static constexpr std::size_t kReportedMax = 1000;
  std::mutex mu;
  std::deque<JobKey> order;
  std::set<JobKey> queued;
  void add(const std::string& topic, const std::string& id) {
    std::lock_guard lock(mu);
    if (queued.size() >= kReportedMax) return;
    if (queued.emplace(topic, id).second) order.emplace_back(topic, id);
  }
  // The first n, taken.
  std::vector<JobKey> take(std::size_t n) {
    std::lock_guard lock(mu);
    std::vector<JobKey> out;
    while (!order.empty() && out.size() < n) {
      queued.erase(order.front());
      out.push_back(std::move(order.front()));
      order.pop_front();
    }
    return out;
  }
};
// Jobs a message reads back for their reports, at most (the rest go in
// the next message's).
constexpr std::size_t kReportsPerMessage = 20;

// What the jobs that reported have now: [{topic, id, state, progress,
// progress_attempt, progress_at, log, log_total}] (a job gone is left out).
asio::awaitable<json::array> reports(ApiContext& ctx, Reported& reported) {
  const auto now = reported.take(kReportsPerMessage);
  auto got = co_await await_each<std::optional<Job>>(now, [&](const auto& job) {
    return ctx.client.get_async(job.first, job.second, false, asio::deferred);  // (no body)
  });
  json::array out;
  for (std::size_t i = 0; i < now.size(); ++i) {
    if (!got[i].ok()) {
      reported.add(now[i].first, now[i].second);  // (read again for the next message)
      continue;
    }
    if (!got[i].value()) continue;  // (gone)
    const Job& j = *got[i].value();
    json::object all = wire::job_json(j);
    json::object o{{"topic", now[i].first}, {"id", j.id}, {"state", to_string(j.state)}};
    for (const char* name : {"progress", "progress_attempt", "progress_at", "log", "log_total"}) {
      if (auto f = all.find(name); f != all.end()) o[name] = f->value();
    }
    out.push_back(std::move(o));
  }
  co_return out;
}

// The followed topics' counts and this server's counters, the rows that
// changed since the stream's last message (all of them in its first,
// "full"), the topics gone from the reading, the job events since seq, and
// (a named stream) the reports of its jobs since its last message.
asio::awaitable<std::string> snapshot(ApiContext& ctx, const std::vector<std::string>& named,
                                      bool counts, SentRows& sent, std::uint64_t& seq,
                                      Reported& reported, std::shared_ptr<OneShot> subscribed) {
  // (The first message waits for the stream's subscriptions, at most 2 s.)
  if (subscribed && !named.empty()) {
    co_await subscribed->wait(std::chrono::steady_clock::now() + std::chrono::seconds(2));
  }
  const bool full = sent.empty();  // (then every row is new, so every row goes)
  // (counts=none: the events alone, and no topic read)
  std::shared_ptr<const Rows> reading = std::make_shared<const Rows>();
  if (counts) reading = co_await follow(ctx, named);
  const auto counters = ctx.metrics.counters();
  json::array topics;
  std::set<std::string_view> present;
  for (const auto& [t, s] : *reading) {
    present.insert(t);
    json::object o = wire::stats_json(t, s);
    json::object events;
    for (const auto& [key, n] : counters) {
      if (key.second == t) events[key.first] = n;
    }
    o["events"] = std::move(events);
    std::string row = wire::to_text(o);
    auto it = sent.find(t);
    if (it != sent.end() && it->second == row) continue;
    if (it == sent.end()) it = sent.emplace(t, std::string()).first;
    it->second = std::move(row);
    topics.push_back(std::move(o));
  }
  json::array gone;
  // (only the whole reading says a topic is gone: a named one read again)
  if (named.empty()) {
    for (auto it = sent.begin(); it != sent.end();) {
      if (present.contains(it->first)) {
        ++it;
        continue;
      }
      gone.push_back(json::string(it->first));
      it = sent.erase(it);
    }
  }
  json::array moved;
  for (const auto& e : ctx.metrics.events_since(seq)) {
    seq = e.seq;
    moved.push_back(json::object{{"seq", e.seq},
                                 {"at", e.at_ms},
                                 {"event", e.event},
                                 {"topic", e.topic},
                                 {"id", e.id},
                                 {"due", e.due_ms}});
  }
  // A named stream sees only its topics' events.
  if (!named.empty()) {
    json::array mine;
    for (auto& e : moved) {
      const auto& topic = e.as_object().at("topic").as_string();
      if (std::find(named.begin(), named.end(), std::string_view(topic)) != named.end()) {
        mine.push_back(std::move(e));
      }
    }
    moved = std::move(mine);
  }
  json::object message{{"full", full},
                       {"topics", std::move(topics)},
                       {"gone", std::move(gone)},
                       {"events", std::move(moved)}};
  if (!named.empty()) message["reports"] = co_await reports(ctx, reported);
  co_return wire::to_text(message);
}

// Subscribes a named stream to its topics' reports (into watching); the
// event fires once every subscription is in place.
std::shared_ptr<OneShot> follow_reports(ApiContext& ctx, const std::vector<std::string>& named,
                                        const std::shared_ptr<Reported>& reported,
                                        std::vector<Subscription>& watching,
                                        const asio::any_io_executor& ex) {
  auto subscribed = OneShot::make(ex);
  auto pending = std::make_shared<std::atomic<std::size_t>>(named.size());
  for (const auto& t : named) {
    auto counted = std::make_shared<std::atomic<bool>>(false);
    watching.push_back(ctx.client.watch_reports(
        t, [reported, t](const std::string& id) { reported->add(t, id); },
        [pending, subscribed, counted] {
          if (!counted->exchange(true) && pending->fetch_sub(1) == 1) subscribed->fire();
        }));
  }
  return subscribed;
}

// EventSource sends no headers: the token may come as ?token=.
const Grant* token_in_query(const ApiContext& ctx, const boost::urls::url_view& u) {
  auto it = u.params().find("token");
  if (it == u.params().end()) return nullptr;
  return ctx.access.find(std::string((*it).value));
}

}  // namespace

std::optional<std::vector<std::string>> events_topics(std::string_view value) {
  std::vector<std::string> out;
  if (value.empty()) return std::nullopt;
  for (std::size_t at = 0; at <= value.size();) {
    const auto comma = std::min(value.find(',', at), value.size());
    std::string t(value.substr(at, comma - at));
    try {
      core::check_topic(t);
    } catch (const Error&) {
      return std::nullopt;
    }
    if (std::find(out.begin(), out.end(), t) == out.end()) out.push_back(std::move(t));
    at = comma + 1;
  }
  if (out.size() > kEventsTopicsMax) return std::nullopt;
  return out;
}

std::optional<Response> dashboard_file(const Request& req, std::string_view path) {
  if (path == "/") path = "/index.html";
  for (const auto& asset : web_assets()) {
    if (asset.path != path) continue;
    Response res{http::status::ok, req.version()};
    res.set(http::field::content_type, content_type(path));
    res.set(http::field::cache_control, "no-cache");
    // The page builds everything from text nodes: no inline script, no eval.
    res.set("Content-Security-Policy",
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:");
    res.set("X-Content-Type-Options", "nosniff");
    res.keep_alive(req.keep_alive());
    res.body() = std::string(asset.content);
    res.prepare_payload();
    return res;
  }
  return std::nullopt;
}

// How long one event may take to reach a reader.
constexpr std::chrono::seconds kEventWriteTimeout{10};

// What a feed asks for: ?topics=a,b (those topics alone; none: every
// topic) and ?counts=none (the job events alone, no topic's counts: the
// dashboard's Send page). nullopt: a bad query (the route answers 400).
// (Not in events_stream: GCC 12 warns mismatched-new-delete on its
// coroutine frame as that grows.)
struct FeedQuery {
  std::vector<std::string> named;
  bool counts = true;
};
std::optional<FeedQuery> feed_query(const boost::urls::url_view& u) {
  FeedQuery q;
  if (auto it = u.params().find("topics"); it != u.params().end()) {
    auto list = events_topics((*it).value);
    if (!list) return std::nullopt;
    q.named = std::move(*list);
  }
  if (auto it = u.params().find("counts"); it != u.params().end()) {
    if ((*it).value != "none") return std::nullopt;
    q.counts = false;
  }
  return q;
}

asio::awaitable<bool> events_stream(ApiContext& ctx, Request& req, boost::beast::tcp_stream& stream,
                                    std::string& owed) {
  auto u = boost::urls::parse_origin_form(req.target());
  if (!u || u->path() != "/v1/events" || req.method() != http::verb::get) co_return false;
  auto query = feed_query(*u);
  if (!query) co_return false;  // the route answers 400
  const std::vector<std::string> named = std::move(query->named);
  if (!ctx.access.open()) {
    const Grant* grant = grant_of(ctx, req);
    if (!grant) grant = token_in_query(ctx, *u);
    // Every topic's counts: a token limited to some topics may read only
    // those it names.
    if (!grant) co_return false;                                            // the route answers 401
    if (named.empty() && refusal(*grant, Role::read, "")) co_return false;  // 403
    for (const auto& t : named) {
      if (refusal(*grant, Role::read, t)) co_return false;
    }
  }
  stream.expires_after(kEventWriteTimeout);
  std::string head = std::exchange(owed, {}) +
                     "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: "
                     "no-cache\r\nConnection: close\r\n\r\nretry: 2000\n\n";
  co_await asio::async_write(stream, asio::buffer(head), asio::use_awaitable);
  stream.expires_never();
  std::uint64_t seq = 0;
  SentRows sent;
  // A named stream follows its topics' reports (progress, log lines).
  // The first message goes once the subscriptions are in place (at most
  // 2 s later), so that a report made after it is not missed (one made
  // while a subscription reconnects is, until the page reads its job again).
  auto reported = std::make_shared<Reported>();
  std::vector<Subscription> watching;
  auto subscribed = follow_reports(ctx, named, reported, watching, stream.get_executor());
  // A stop ends the stream at once, not at its next tick.
  auto stop = ctx.stopped.watch(co_await asio::this_coro::executor);
  struct Forget {
    Broadcast& from;
    std::shared_ptr<OneShot> one;
    ~Forget() { from.forget(one); }
  } forget{ctx.stopped, stop};
  while (!ctx.stopping) {
    std::string data =
        "data: " + co_await snapshot(ctx, named, query->counts, sent, seq, *reported, subscribed) +
        "\n\n";
    subscribed.reset();
    // A reader that stops reading is dropped, not waited for forever.
    stream.expires_after(kEventWriteTimeout);
    co_await asio::async_write(stream, asio::buffer(data), asio::use_awaitable);
    stream.expires_never();
    if (co_await stop->wait(std::chrono::steady_clock::now() + std::chrono::seconds(1))) break;
  }
  co_return true;
}

}  // namespace redisched::server
