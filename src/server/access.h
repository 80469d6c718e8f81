// Who may call which route: bearer tokens, each with a role and optionally
// a topic prefix (docs/security.md, "Scoped tokens"). --token is one admin
// token for every topic; --tokens FILE adds any number of scoped ones.
//
//   read      GET and HEAD of every route, /metrics, the event stream
//   produce   read, and putting, updating and deleting jobs
//   consume   read, and reserve, pull, ack, release, fail, touch
//   admin     everything: kick, pause, limits, shards, schedules, webhooks
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace redisched::server {

enum class Role { read, produce, consume, admin };

std::string_view to_string(Role r) noexcept;

struct Grant {
  std::string token;
  Role role = Role::read;
  std::string prefix;  // the topics it may touch start with it; empty: every topic
};

class Access {
 public:
  // Every request allowed: no token was configured.
  Access() = default;
  // token: --token (admin of every topic; empty: none). tokens_file:
  // --tokens (empty: none), one grant a line, "ROLE TOKEN [TOPIC_PREFIX]";
  // blank lines and lines starting with # are skipped. Throws
  // std::runtime_error naming the file and line of a bad one.
  static Access from(const std::string& token, const std::string& tokens_file);
  // The same from the file's text (tests).
  static Access parse(const std::string& token, std::string_view text, const std::string& source);

  // No token configured: the server is open.
  bool open() const noexcept { return grants_.empty(); }
  // The grant of a token, compared in constant time with each; nullptr
  // when none has it.
  const Grant* find(std::string_view token) const noexcept;
  // The grant of an Authorization header's value ("Bearer TOKEN", the
  // scheme in any case); nullptr for another scheme or an unknown token.
  const Grant* from_header(std::string_view header) const noexcept;

 private:
  std::vector<Grant> grants_;
};

// Why a grant may not make a call that needs `need` on `topic` (empty: a
// route that names no topic in its path), or nullopt when it may.
std::optional<std::string> refusal(const Grant& g, Role need, std::string_view topic);

}  // namespace redisched::server
