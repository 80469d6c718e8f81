#include "server/push.h"

#include <spdlog/spdlog.h>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <boost/json/parse.hpp>
#include <boost/url/parse.hpp>

#include "core/text.h"
#include "redisched/asio.h"
#include "redisched/runtime.h"
#include "server/api.h"
#include "server/metrics.h"
#include "wire/job_json.h"
#include "wire/json_text.h"

namespace redisched::server {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace json = boost::json;
using tcp = asio::ip::tcp;

struct Target {
  std::string host, port, path;
  bool tls = false;  // https: the server's certificate and name are checked
};

Target parse_target_url(const std::string& url) {
  auto u = boost::urls::parse_uri(url);
  if (!u || (u->scheme() != "http" && u->scheme() != "https") || u->host().empty()) {
    throw Error(Errc::invalid_argument,
                "webhook URL must be http[s]://host[:port]/path, got " + url);
  }
  Target t;
  t.tls = u->scheme() == "https";
  t.host = std::string(u->host());
  t.port = u->has_port() ? std::string(u->port()) : t.tls ? "443" : "80";
  t.path = u->encoded_target().empty() ? "/" : std::string(u->encoded_target());
  return t;
}

// The JSON the original redisched pushed ({topic, id, contents}), plus the
// body as such and the attempt.
std::string payload(const std::string& topic, const Reservation& j) {
  json::object o{{"topic", topic}, {"id", j.id}};
  wire::put_body(o, j.body);
  o["attempt"] = j.attempt;
  o["priority"] = j.priority;
  o["due"] = j.due_ms;
  // A JSON body goes as the JSON it is, its numbers as spelled.
  if (auto spelled = wire::compact_json(j.body)) return wire::to_text_with(o, "contents", *spelled);
  // One with a key given twice, as Boost.JSON reads it (the last), as
  // before; one with a number past a double's range, or not JSON, as text.
  boost::system::error_code ec;
  json::value contents = json::parse(j.body, ec);
  if (!ec && !wire::scan_json(j.body).out_of_range) {
    o["contents"] = std::move(contents);
  } else {
    o["contents"] = wire::valid_utf8(j.body) ? j.body : wire::base64_encode(j.body);
  }
  return wire::to_text(o);
}

// Connects the stream's TCP layer to the target (an address needs no
// lookup, and Asio's asynchronous lookup runs on a thread of its own).
asio::awaitable<void> connect(beast::tcp_stream& stream, const Target& t) {
  boost::system::error_code not_address;
  const auto address = asio::ip::make_address(t.host, not_address);
  if (!not_address) {
    co_await stream.async_connect(
        tcp::endpoint(address, static_cast<std::uint16_t>(std::stoul(t.port))),
        asio::use_awaitable);
  } else {
    tcp::resolver resolver(co_await asio::this_coro::executor);
    auto endpoints = co_await resolver.async_resolve(t.host, t.port, asio::use_awaitable);
    co_await stream.async_connect(endpoints, asio::use_awaitable);
  }
}

template <class Stream>
asio::awaitable<unsigned> exchange(Stream& stream, const Target& t, std::string body) {
  http::request<http::string_body> req{http::verb::post, t.path, 11};
  req.set(http::field::host, t.host);
  req.set(http::field::content_type, "application/json");
  req.set(http::field::user_agent, "redisched");
  req.body() = std::move(body);
  req.prepare_payload();
  co_await http::async_write(stream, req, asio::use_awaitable);
  beast::flat_buffer buffer;
  http::response<http::string_body> res;
  co_await http::async_read(stream, buffer, res, asio::use_awaitable);
  co_return res.result_int();
}

// POSTs body to the target; returns the status, or throws on a transport
// failure, a certificate that does not check out, or the timeout.
asio::awaitable<unsigned> post(Target t, std::string body, std::chrono::milliseconds timeout,
                               std::shared_ptr<asio::ssl::context> tls) {
  auto ex = co_await asio::this_coro::executor;
  boost::system::error_code ignored;
  if (!t.tls) {
    beast::tcp_stream stream(ex);
    stream.expires_after(timeout);
    co_await connect(stream, t);
    const unsigned status = co_await exchange(stream, t, std::move(body));
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    co_return status;
  }
  beast::ssl_stream<beast::tcp_stream> stream(ex, *tls);
  beast::get_lowest_layer(stream).expires_after(timeout);
  co_await connect(beast::get_lowest_layer(stream), t);
  // SNI (SSL_set_tlsext_host_name, without the macro's C cast), and the
  // certificate must name the host (asio's check takes IP addresses too).
  if (SSL_ctrl(stream.native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
               const_cast<char*>(t.host.c_str())) != 1) {
    throw Error(Errc::connection, "cannot set the TLS server name " + t.host);
  }
  stream.set_verify_callback(asio::ssl::host_name_verification(t.host));
  co_await stream.async_handshake(asio::ssl::stream_base::client, asio::use_awaitable);
  const unsigned status = co_await exchange(stream, t, std::move(body));
  beast::get_lowest_layer(stream).socket().shutdown(tcp::socket::shutdown_both, ignored);
  co_return status;
}

}  // namespace

std::pair<std::string, Subscription> parse_webhook_flag(const std::string& flag) {
  const auto eq = flag.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw std::runtime_error("--webhook wants TOPIC=URL, got " + flag);
  }
  Subscription s;
  s.url = flag.substr(eq + 1);
  parse_target_url(s.url);
  return {flag.substr(0, eq), s};
}

Pusher::Pusher(Client& client, Metrics& metrics, const std::string& ca_file)
    : client_(client),
      metrics_(metrics),
      tls_(std::make_shared<asio::ssl::context>(asio::ssl::context::tls_client)) {
  if (ca_file.empty()) {
    tls_->set_default_verify_paths();
  } else {
    boost::system::error_code ec;
    tls_->load_verify_file(ca_file, ec);
    if (ec) throw Error(Errc::invalid_argument, "--webhook-ca " + ca_file + ": " + ec.message());
  }
  tls_->set_verify_mode(asio::ssl::verify_peer);
}

void Pusher::allow(const std::vector<std::string>& destinations) {
  for (const auto& d : destinations) {
    // HOST[:PORT]: a name, an IPv4 address, or an IPv6 one in brackets.
    Destination dest;
    const auto host_end = d.starts_with("[") ? d.find(']') + 1 : d.rfind(':');
    dest.host = core::ascii_lower(d.substr(0, host_end));
    if (host_end < d.size()) {
      if (d[host_end] != ':') dest.host.clear();  // "[v6]junk": refused below
      dest.port = d.substr(host_end + 1);
      if (dest.port.empty()) dest.host.clear();
    }
    const bool port_ok =
        dest.port.empty() ||
        (dest.port.size() <= 5 && dest.port.find_first_not_of("0123456789") == std::string::npos);
    const std::string_view bare =
        std::string_view(dest.host).substr(dest.host.starts_with("*.") ? 2 : 0);
    if (bare.empty() || !port_ok || bare.find_first_of("/?#@ *") != std::string_view::npos) {
      throw Error(Errc::invalid_argument,
                  "--webhook-allow wants HOST, HOST:PORT or *.DOMAIN[:PORT], got " + d);
    }
    allowed_.push_back(std::move(dest));
  }
}

std::optional<std::string> Pusher::refusal(const std::string& url) const {
  const Target t = parse_target_url(url);
  if (allowed_.empty()) return std::nullopt;
  const std::string host = core::ascii_lower(t.host);
  for (const auto& d : allowed_) {
    const bool host_ok =
        d.host.starts_with("*.") ? host.ends_with(d.host.substr(1)) : host == d.host;
    if (host_ok && (d.port.empty() || d.port == t.port)) return std::nullopt;
  }
  return "webhook destination " + t.host + ":" + t.port +
         " is not in this server's --webhook-allow list";
}

Pusher::~Pusher() { stop(std::chrono::milliseconds(0)); }

void Pusher::subscribe(const std::string& topic, const Subscription& s) {
  Client::validate_topic(topic);
  const Target target = parse_target_url(s.url);
  if (s.concurrency < 1 || s.concurrency > kWebhookConcurrencyMax) {
    throw Error(Errc::invalid_argument,
                "webhook concurrency must be from 1 to " + std::to_string(kWebhookConcurrencyMax));
  }
  if (s.timeout.count() < 1 || s.timeout.count() > kWebhookTimeoutMaxMs) {
    throw Error(Errc::invalid_argument, "webhook timeout must be from 1 to " +
                                            std::to_string(kWebhookTimeoutMaxMs) + " ms");
  }
  if (auto why = refusal(s.url)) throw Error(Errc::invalid_argument, *why);
  // Held until the worker is in subs_: stop() either sees it there or comes
  // first, and then no worker starts (it would outlive the drain).
  std::lock_guard subscribing(subscribing_);
  if (stopped_) throw Error(Errc::closed, "the server is stopping: no new webhook");
  // On the server's Client and runtime: a webhook costs no thread and no
  // connection of its own.
  // The server's own Scheduler runs the topic's schedules.
  auto worker = std::make_unique<Worker>(client_, WorkerOptions{.run_schedules = false});
  HandlerOptions ho;
  ho.concurrency = s.concurrency;
  // The request's timeout counts against the reservation; the margin only
  // covers the answer's way back.
  ho.ttr = s.timeout + std::chrono::seconds(5);
  ho.overrun = Overrun::abandon;
  auto& metrics = metrics_;
  auto& runtime = client_.runtime();
  worker->handle_async(
      topic, ho, [topic, target, s, &metrics, &runtime, tls = tls_](std::shared_ptr<AsyncJob> job) {
        const auto started = std::chrono::steady_clock::now();
        // The request runs on the worker's shard, where this handler is called.
        const int here = runtime.current_shard();
        asio::co_spawn(
            shard_io(runtime, here >= 0 ? static_cast<std::size_t>(here) : 0),
            post(target, payload(topic, job->job()), s.timeout, tls),
            [job, topic, started, &metrics, url = s.url](std::exception_ptr e, unsigned status) {
              metrics.observe(
                  "delivery", topic,
                  std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
                      .count());
              if (!e && status >= 200 && status < 300) {
                metrics.job_event("pushed", topic, std::string(job->id()));
              } else {
                std::string why = "webhook answered HTTP " + std::to_string(status);
                if (e) {
                  try {
                    std::rethrow_exception(e);
                  } catch (const std::exception& ex) {
                    why = std::string("webhook ") + url + ": " + ex.what();
                  }
                }
                metrics.job_event("push_failed", topic, std::string(job->id()));
                job->fail(why, false);
              }
              job->done();
            });
      });
  worker->run();
  std::unique_ptr<Worker> old;
  {
    std::lock_guard lock(mu_);
    auto& slot = subs_[topic];
    old = std::move(slot.second);
    slot = {s, std::move(worker)};
  }
  retire(std::move(old), s.timeout);
  spdlog::info("pushing topic {} to {} (concurrency {})", topic, s.url, s.concurrency);
}

bool Pusher::unsubscribe(const std::string& topic) {
  std::unique_ptr<Worker> old;
  std::chrono::milliseconds drain{0};
  {
    std::lock_guard lock(mu_);
    auto it = subs_.find(topic);
    if (it == subs_.end()) return false;
    old = std::move(it->second.second);
    drain = it->second.first.timeout;
    subs_.erase(it);
  }
  retire(std::move(old), drain);
  return true;
}

// A replaced or removed subscription's worker drains off the runtime's
// threads (a route calls this on one, and cancel() waits).
void Pusher::retire(std::unique_ptr<Worker> old, std::chrono::milliseconds drain) {
  if (!old) return;
  std::lock_guard lock(mu_);
  std::erase_if(retiring_, [](Retiring& r) {
    if (!*r.finished) return false;
    r.thread.join();
    return true;
  });
  auto finished = std::make_shared<std::atomic<bool>>(false);
  retiring_.push_back({std::thread([w = std::move(old), drain, finished]() mutable {
                         w->cancel(drain);
                         w.reset();
                         *finished = true;
                       }),
                       finished});
}

void Pusher::stop(std::chrono::milliseconds drain) {
  std::map<std::string, std::pair<Subscription, std::unique_ptr<Worker>>> all;
  {
    std::lock_guard subscribing(subscribing_);
    std::lock_guard lock(mu_);
    stopped_ = true;
    all.swap(subs_);
  }
  // All at once, as any retired one: each waits for its own deliveries in
  // flight on a thread of its own.
  for (auto& [topic, sub] : all) retire(std::move(sub.second), drain);
  std::vector<Retiring> retiring;
  {
    std::lock_guard lock(mu_);
    retiring.swap(retiring_);
  }
  for (auto& r : retiring) r.thread.join();
}

std::optional<Subscription> Pusher::subscription(const std::string& topic) {
  std::lock_guard lock(mu_);
  auto it = subs_.find(topic);
  if (it == subs_.end()) return std::nullopt;
  return it->second.first;
}

}  // namespace redisched::server
