#include "server/access.h"

#include <openssl/crypto.h>

#include <boost/beast/core/string.hpp>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace redisched::server {

std::string_view to_string(Role r) noexcept {
  switch (r) {
    case Role::read:
      return "read";
    case Role::produce:
      return "produce";
    case Role::consume:
      return "consume";
    case Role::admin:
      return "admin";
  }
  return "?";
}

namespace {

std::optional<Role> role_named(std::string_view name) {
  for (Role r : {Role::read, Role::produce, Role::consume, Role::admin}) {
    if (name == to_string(r)) return r;
  }
  return std::nullopt;
}

// What may stand in a token: visible ASCII (RFC 6750's b64token and more),
// so that a header carries it as is.
bool token_chars(std::string_view t) {
  for (char c : t) {
    if (c <= ' ' || c > '~') return false;
  }
  return true;
}

}  // namespace

Access Access::parse(const std::string& token, std::string_view text, const std::string& source) {
  Access a;
  if (!token.empty()) a.grants_.push_back({token, Role::admin, ""});
  std::istringstream in{std::string(text)};
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    const auto at = source + ":" + std::to_string(n) + ": ";
    std::istringstream words(line);
    std::string role, tok, prefix, extra;
    if (!(words >> role) || role.front() == '#') continue;
    words >> tok >> prefix >> extra;
    const auto r = role_named(role);
    if (!r) {
      throw std::runtime_error(at + "unknown role '" + role + "': read, produce, consume or admin");
    }
    if (tok.empty()) throw std::runtime_error(at + "a grant is ROLE TOKEN [TOPIC_PREFIX]");
    if (!extra.empty()) {
      throw std::runtime_error(at + "more than ROLE TOKEN [TOPIC_PREFIX] on the line");
    }
    if (tok.size() < 16 || !token_chars(tok)) {
      throw std::runtime_error(at + "a token is at least 16 visible ASCII characters");
    }
    for (const auto& g : a.grants_) {
      if (g.token == tok) throw std::runtime_error(at + "this token is granted twice");
    }
    a.grants_.push_back({tok, *r, prefix});
  }
  return a;
}

Access Access::from(const std::string& token, const std::string& tokens_file) {
  if (tokens_file.empty()) return parse(token, "", "");
  std::ifstream in(tokens_file);
  if (!in) throw std::runtime_error("--tokens: cannot read " + tokens_file);
  std::stringstream text;
  text << in.rdbuf();
  Access a = parse(token, text.str(), tokens_file);
  if (a.open()) throw std::runtime_error("--tokens: " + tokens_file + " grants no token");
  return a;
}

const Grant* Access::find(std::string_view token) const noexcept {
  const Grant* found = nullptr;
  // Every grant is compared, found or not: the time says nothing of which.
  for (const auto& g : grants_) {
    const bool same = g.token.size() == token.size() &&
                      CRYPTO_memcmp(g.token.data(), token.data(), token.size()) == 0;
    if (same) found = &g;
  }
  return found;
}

const Grant* Access::from_header(std::string_view header) const noexcept {
  constexpr std::string_view kScheme = "Bearer ";
  if (header.size() <= kScheme.size() ||
      !boost::beast::iequals(header.substr(0, kScheme.size()), kScheme)) {
    return nullptr;
  }
  return find(header.substr(kScheme.size()));
}

std::optional<std::string> refusal(const Grant& g, Role need, std::string_view topic) {
  const bool role_ok = g.role == Role::admin || need == Role::read || g.role == need;
  if (!role_ok) {
    return "this token's role is " + std::string(to_string(g.role)) + "; this call needs " +
           std::string(to_string(need)) + (need == Role::admin ? "" : " (or admin)");
  }
  if (g.prefix.empty()) return std::nullopt;
  if (topic.empty()) {
    return "this token is limited to topics starting with '" + g.prefix +
           "', and this route names no topic in its path";
  }
  if (!topic.starts_with(g.prefix)) {
    return "this token is limited to topics starting with '" + g.prefix + "'";
  }
  return std::nullopt;
}

}  // namespace redisched::server
