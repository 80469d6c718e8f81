#include "redis/handshake.h"

#include <utility>

#include "redis/command.h"
#include "redis/library.h"

namespace redisched::redis {

bool library_missing(const std::string& error) {
  return error.rfind("ERR Function not found", 0) == 0;
}

Handshake::Handshake(const Endpoint& endpoint, bool load_library, std::string primary)
    : endpoint_(endpoint),
      load_library_(load_library),
      primary_(std::move(primary)),
      step_(first_from(Step::auth)) {}

Handshake::Step Handshake::first_from(Step from) const {
  switch (from) {
    case Step::auth:
      if (!endpoint_.password.empty()) return Step::auth;
      [[fallthrough]];
    case Step::role:
      if (endpoint_.via_sentinel()) return Step::role;
      [[fallthrough]];
    case Step::select:
      if (endpoint_.db != 0) return Step::select;
      [[fallthrough]];
    case Step::version:
      if (load_library_) return Step::version;
      [[fallthrough]];
    case Step::load:
    case Step::ready:
      return Step::ready;
  }
  return Step::ready;
}

std::optional<std::string> Handshake::next() const {
  const Endpoint& e = endpoint_;
  switch (step_) {
    case Step::auth:
      return e.user.empty() ? encode_command({"AUTH", e.password})
                            : encode_command({"AUTH", e.user, e.password});
    case Step::role:
      return encode_command({"ROLE"});
    case Step::select:
      return encode_command({"SELECT", std::to_string(e.db)});
    case Step::version:
      return encode_command({"FCALL", "redisched_version", "0"});
    case Step::load:
      return encode_command({"FUNCTION", "LOAD", "REPLACE", kLibraryCode});
    case Step::ready:
      break;
  }
  return std::nullopt;
}

void Handshake::reply(const Reply& r) {
  switch (step_) {
    case Step::auth:
      if (r.is_error()) throw ConnectionLost{Errc::auth, "AUTH refused: " + r.str};
      step_ = first_from(Step::role);
      return;
    case Step::role:
      if (r.type != Reply::Type::array || r.elements.empty() || r.elements[0].str != "master") {
        throw ConnectionLost{Errc::connection, primary_ +
                                                   ", named by the sentinels, is not the "
                                                   "primary of '" +
                                                   endpoint_.service + "' (yet)"};
      }
      step_ = first_from(Step::select);
      return;
    case Step::select:
      if (r.is_error()) {
        throw ConnectionLost{Errc::auth, "SELECT " + std::to_string(endpoint_.db) + ": " + r.str};
      }
      step_ = first_from(Step::version);
      return;
    case Step::version:
      if (r.type == Reply::Type::integer && r.integer >= kLibraryVersion) {
        step_ = Step::ready;
        return;
      }
      if (r.is_error() && r.str.rfind("NOAUTH", 0) == 0) {
        throw ConnectionLost{Errc::auth, "Redis requires a password: give it in the URL"};
      }
      // A Redis still loading its dataset (after a restart), or busy with a
      // script, is one not up yet: the connection tries again, and the calls
      // waiting on it are not refused (a worker would drop their acks).
      if (r.is_error() && (r.str.rfind("LOADING", 0) == 0 || r.str.rfind("BUSY", 0) == 0)) {
        throw ConnectionLost{Errc::connection, "Redis is not ready yet: " + r.str};
      }
      if (r.is_error() && !library_missing(r.str)) {
        throw ConnectionLost{Errc::server, "checking the Functions library: " + r.str};
      }
      step_ = Step::load;  // missing, or older than this build's
      return;
    case Step::load:
      if (r.is_error()) {
        throw ConnectionLost{Errc::server, "loading the Functions library: " + r.str};
      }
      step_ = Step::ready;
      return;
    case Step::ready:
      break;
  }
  throw ConnectionLost{Errc::protocol, "a reply after the handshake ended"};
}

}  // namespace redisched::redis
