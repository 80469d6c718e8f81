// What a connection says to Redis before its pipeline runs, as steps without
// I/O (sans-io, as Boost.Redis's resp3_handshaker): AUTH when the URL has a
// password, ROLE behind Sentinel (the primary it named may have been
// demoted), SELECT of a database other than 0, then the Functions library's
// version, and FUNCTION LOAD when Redis lacks it or holds an older one. The
// connection sends each command next() gives and hands its reply to
// reply(), until next() has none; tests/unit/handshake_test.cpp drives it
// with replies of its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "redis/reply.h"
#include "redis/url.h"
#include "redisched/error.h"

namespace redisched::redis {

// A failure that ends a connection, with the words for its callers.
struct ConnectionLost {
  Errc code;
  std::string message;
};

// Redis's answer to an FCALL of a function it does not have.
bool library_missing(const std::string& error);

class Handshake {
 public:
  // primary: host:port connected to, for the messages. load_library: check
  // (and load) the Functions library; a subscriber connection does not.
  Handshake(const Endpoint& endpoint, bool load_library, std::string primary);

  // The next command to send, RESP-encoded; nullopt once the connection is
  // ready for the pipeline.
  std::optional<std::string> next() const;
  // Redis's reply to the command next() gave. Throws ConnectionLost when
  // the connection cannot go on: Errc::auth (AUTH or SELECT refused, a
  // password missing), Errc::connection (not the primary, Redis still
  // loading or busy: worth trying again), Errc::server (the library cannot
  // be checked or loaded).
  void reply(const Reply& r);

 private:
  enum class Step : std::uint8_t { auth, role, select, version, load, ready };
  // The first step from `from` on that this connection needs.
  Step first_from(Step from) const;

  Endpoint endpoint_;
  bool load_library_;
  std::string primary_;
  Step step_;
};

}  // namespace redisched::redis
