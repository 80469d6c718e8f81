// Where Redis is and how to log in: parsed from a Redis URL.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace redisched::redis {

struct Endpoint {
  enum class Kind { tcp, unix_socket };
  Kind kind = Kind::tcp;
  std::string host = "127.0.0.1";
  std::uint16_t port = 6379;
  std::string path;  // unix socket
  bool tls = false;
  std::string ca_file;     // TLS: trust these CAs (default: the system's)
  bool tls_verify = true;  // TLS: verify the server's certificate
  std::string cert_file;   // TLS: our certificate (chain), for servers that ask for one
  std::string key_file;    // TLS: its private key
  std::string user;        // AUTH user (empty: "default")
  std::string password;    // AUTH password (empty: no AUTH)
  int db = 0;
  // Redis Sentinel: the sentinels to ask, in turn, for the primary of
  // `service`; host and port are then where it was last found.
  struct Sentinel {
    std::string host;
    std::uint16_t port = 26379;
  };
  std::vector<Sentinel> sentinels;
  std::string service;
  std::string sentinel_user;      // the sentinels' own AUTH (empty: "default")
  std::string sentinel_password;  // (empty: no AUTH)
  bool via_sentinel() const { return !sentinels.empty(); }

  // host:port or the socket path, for messages (never the password).
  std::string describe() const;
};

// Parses redis://[user:password@]host[:port][/db], rediss://... (query
// parameters ca, cert, key, verify=0|1), unix:///path[?db=N] and
// redis+sentinel://[user:password@]host[:port][,host[:port]...]/service[/db]
// (query parameters db, sentinel_user, sentinel_password; the userinfo is
// the Redis nodes' AUTH, sentinels default to port 26379). Throws Error
// (Errc::invalid_argument) naming the fault.
Endpoint parse_url(std::string_view url);

// Several nodes of one Redis Cluster, comma-separated: each a URL as above
// (a redis+sentinel:// URL, whose commas part its sentinels, is one).
// Throws as parse_url does, naming the one at fault.
std::vector<Endpoint> parse_urls(std::string_view urls);

}  // namespace redisched::redis
