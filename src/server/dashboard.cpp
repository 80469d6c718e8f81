#include "server/dashboard.h"

#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/json/serialize.hpp>
#include <boost/url/parse.hpp>

#include "server/census.h"
#include "server/metrics.h"
#include "server/web_assets.h"
#include "wire/job_json.h"

namespace redisched::server {
namespace {

namespace asio = boost::asio;
namespace json = boost::json;

std::string_view content_type(std::string_view path) {
  if (path.ends_with(".js")) return "text/javascript; charset=utf-8";
  if (path.ends_with(".css")) return "text/css; charset=utf-8";
  return "text/html; charset=utf-8";
}

// Every topic's counts (the server's shared reading, at most a second old)
// and this server's counters, and the job events since seq.
asio::awaitable<std::string> snapshot(ApiContext& ctx, std::uint64_t& seq) {
  const auto reading =
      co_await ctx.census.after(std::chrono::steady_clock::now() - std::chrono::seconds(1));
  const auto counters = ctx.metrics.counters();
  json::array topics;
  for (const auto& [t, s] : reading->topics) {
    json::object o = wire::stats_json(t, s);
    json::object events;
    for (const auto& [key, n] : counters) {
      if (key.second == t) events[key.first] = n;
    }
    o["events"] = std::move(events);
    topics.push_back(std::move(o));
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
  co_return json::serialize(
      json::object{{"topics", std::move(topics)}, {"events", std::move(moved)}});
}

// EventSource sends no headers: the token may come as ?token=.
const Grant* token_in_query(const ApiContext& ctx, const boost::urls::url_view& u) {
  auto it = u.params().find("token");
  if (it == u.params().end()) return nullptr;
  return ctx.access.find(std::string((*it).value));
}

}  // namespace

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

asio::awaitable<bool> events_stream(ApiContext& ctx, Request& req,
                                    boost::beast::tcp_stream& stream) {
  auto u = boost::urls::parse_origin_form(req.target());
  if (!u || u->path() != "/v1/events" || req.method() != http::verb::get) co_return false;
  if (!ctx.access.open()) {
    const Grant* grant = grant_of(ctx, req);
    if (!grant) grant = token_in_query(ctx, *u);
    // Every topic's counts: a token limited to some topics may not read them.
    if (!grant || refusal(*grant, Role::read, "")) co_return false;  // the route answers 401, 403
  }
  stream.expires_after(kEventWriteTimeout);
  std::string head =
      "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
      "Connection: close\r\n\r\nretry: 2000\n\n";
  co_await asio::async_write(stream, asio::buffer(head), asio::use_awaitable);
  stream.expires_never();
  std::uint64_t seq = 0;
  // A stop ends the stream at once, not at its next tick.
  auto stop = ctx.stopped.watch(co_await asio::this_coro::executor);
  struct Forget {
    Broadcast& from;
    std::shared_ptr<OneShot> one;
    ~Forget() { from.forget(one); }
  } forget{ctx.stopped, stop};
  while (!ctx.stopping) {
    std::string data = "data: " + co_await snapshot(ctx, seq) + "\n\n";
    // A reader that stops reading is dropped, not waited for forever.
    stream.expires_after(kEventWriteTimeout);
    co_await asio::async_write(stream, asio::buffer(data), asio::use_awaitable);
    stream.expires_never();
    if (co_await stop->wait(std::chrono::steady_clock::now() + std::chrono::seconds(1))) break;
  }
  co_return true;
}

}  // namespace redisched::server
