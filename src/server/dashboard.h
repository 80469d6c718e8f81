// The web dashboard: its files at / (built in from web/), and the live feed
// it reads, GET /v1/events: server-sent events, a snapshot of every topic
// and the jobs that moved, once a second.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <optional>
#include <string>
#include <vector>

#include "server/api.h"

namespace redisched::server {

// The file at path (/, /index.html, /app.js, /style.css); nullopt for any
// other path.
std::optional<Response> dashboard_file(const Request& req, std::string_view path);

// GET /v1/events?topics=a,b: the topics a stream follows, at most
// kEventsTopicsMax distinct valid names; nullopt when the list is not that.
inline constexpr std::size_t kEventsTopicsMax = 100;
std::optional<std::vector<std::string>> events_topics(std::string_view value);

// Claims GET /v1/events (the token may come as ?token=, since EventSource
// sends no headers) and streams until the client leaves or the server stops;
// owed (the answers before it, pipelined) goes first.
boost::asio::awaitable<bool> events_stream(ApiContext& ctx, Request& req,
                                           boost::beast::tcp_stream& stream, std::string& owed);

}  // namespace redisched::server
