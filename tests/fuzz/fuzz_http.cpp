// libFuzzer: the HTTP request path of redisched serve, from bytes to the
// answer: the head scan, Beast's parser, the head checks, the route table,
// every route's validation and handler, with a Client over a fake link
// behind it (answers of every shape, errors included), with and without
// --token. Whatever comes in, the answer is HTTP, and a JSON answer is
// valid JSON in valid UTF-8.
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/json/parse.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string_view>

#include "core/client_access.h"
#include "core/text.h"
#include "redisched/asio.h"
#include "server/api.h"
#include "server/census.h"
#include "server/metrics.h"
#include "server/push.h"
#include "server/sweeper.h"
#include "server/wake_hub.h"
#include "testutil/fake_link.h"
#include "testutil/replies.h"

namespace {

using namespace redisched;
using namespace redisched::server;
namespace asio = boost::asio;

unsigned g_choice = 0;  // picks the fake Redis's answers, from the input

struct World {
  asio::io_context background;  // for the hub and sweeper; never run
  // The routes' own: one for the whole run, as a server's shards live as
  // long as what they serve (the census keeps a route's wake-up until its
  // reading lands, which may be after the route answered).
  asio::io_context routes;
  ClientOptions options;
  std::unique_ptr<Client> client;
  std::unique_ptr<WakeHub> hub;
  Metrics metrics;
  std::unique_ptr<Client> push_client;
  std::unique_ptr<Pusher> pusher;
  std::unique_ptr<Census> census;
  std::unique_ptr<Sweeper> sweeper;
  std::unique_ptr<ApiContext> open, guarded;

  World() {
    // Nothing listens there: webhooks and the hub fail fast, as with Redis down.
    options.redis_url = "unix:///nonexistent/redisched-fuzz.sock";
    options.connect_timeout = Millis{1};
    // The fake Redis answers on the Clients' runtime, as a link does.
    options.runtime = std::make_shared<Runtime>(1);
    const test::FakeLink::Post on_runtime = [rt = options.runtime](std::function<void()> f) {
      asio::post(shard_io(*rt, 0), std::move(f));
    };
    client =
        detail::ClientAccess::over_link(options, std::make_unique<test::FakeLink>(
                                                     [](const std::vector<std::string>& words) {
                                                       return test::canned_reply(words, g_choice++);
                                                     },
                                                     on_runtime));
    hub = std::make_unique<WakeHub>(*client, background.get_executor());
    // The webhooks' workers run on a Client of their own whose Redis answers
    // PING and refuses everything else: they start and stop, but deliver
    // nothing.
    push_client = detail::ClientAccess::over_link(
        options, std::make_unique<test::FakeLink>(
                     [](const std::vector<std::string>& words) {
                       if (!words.empty() && words[0] == "PING") {
                         return test::text("PONG", redis::Reply::Type::status);
                       }
                       return test::text("ERR no Redis behind the fuzzer's webhooks",
                                         redis::Reply::Type::error);
                     },
                     on_runtime));
    pusher = std::make_unique<Pusher>(*push_client, metrics);
    census = std::make_unique<Census>(*client);
    sweeper = std::make_unique<Sweeper>(background, *client, *census, metrics);
    // max_wait 0: a long-poll asks for a wait the fuzzer would sit through.
    open.reset(new ApiContext{*client, *hub, metrics, *pusher, *census, *sweeper, Access{}, 0});
    guarded.reset(new ApiContext{*client, *hub, metrics, *pusher, *census, *sweeper,
                                 Access::parse("s3cret", "read readonly-token-0123456789", "fuzz"),
                                 0});
  }
};

void check_answer(const Response& res) {
  const auto type = res[http::field::content_type];
  if (type.starts_with("application/json")) {
    if (!core::valid_utf8(res.body())) std::abort();
    boost::system::error_code ec;
    boost::json::parse(res.body(), ec);
    if (ec) std::abort();
  }
  if (res.result_int() < 100 || res.result_int() > 599) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static World* world = new World();  // lives for the whole run
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  g_choice = size == 0 ? 0 : data[size - 1];

  constexpr std::size_t kHeaderLimit = 16 << 10;
  const auto scan = scan_head(bytes.substr(0, kHeaderLimit), kHeaderLimit);
  if (!scan.complete) return 0;  // refused, or a head still to come
  http::request_parser<http::string_body> parser;
  parser.header_limit(kHeaderLimit);
  parser.body_limit(1 << 20);
  parser.eager(true);
  boost::system::error_code ec;
  parser.put(asio::buffer(bytes.data(), bytes.size()), ec);
  if (ec || !parser.is_header_done()) return 0;
  if (check_head(parser.get())) return 0;
  if (!parser.is_done()) return 0;  // a body still to come
  Request req = parser.release();
  for (ApiContext* ctx : {world->open.get(), world->guarded.get()}) {
    auto& io = world->routes;
    // Run until the answer (the Client's answers come from its runtime's
    // thread), then stopped: what the route left behind runs on later.
    auto work = asio::make_work_guard(io);
    Request copy = req;
    io.restart();
    asio::co_spawn(io, route(*ctx, copy), [&](std::exception_ptr e, Response res) {
      work.reset();
      io.stop();
      if (e) std::abort();  // route() answers every failure itself
      check_answer(res);
    });
    io.run();
  }
  return 0;
}
