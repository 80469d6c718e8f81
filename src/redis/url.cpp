#include "redis/url.h"

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>
#include <charconv>

#include "redisched/error.h"

namespace redisched::redis {
namespace {

[[noreturn]] void bad_url(std::string_view url, std::string_view why) {
  throw Error(Errc::invalid_argument,
              "invalid Redis URL '" + std::string(url) + "': " + std::string(why));
}

int parse_db(std::string_view url, std::string_view text) {
  int db = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), db);
  if (ec != std::errc() || end != text.data() + text.size() || db < 0 || db > 65535) {
    bad_url(url, "database must be a number from 0, got '" + std::string(text) + "'");
  }
  return db;
}

}  // namespace

std::string Endpoint::describe() const {
  if (kind == Kind::unix_socket) return "unix:" + path;
  return (tls ? "rediss://" : "redis://") + host + ":" + std::to_string(port);
}

Endpoint parse_url(std::string_view url) {
  auto parsed = boost::urls::parse_uri(url);
  if (!parsed) bad_url(url, parsed.error().message());
  const boost::urls::url_view& u = *parsed;
  Endpoint e;
  const std::string scheme = u.scheme();
  if (scheme == "unix") {
    e.kind = Endpoint::Kind::unix_socket;
    e.path = u.path();
    if (e.path.empty()) bad_url(url, "no socket path");
  } else if (scheme == "redis" || scheme == "rediss") {
    e.tls = scheme == "rediss";
    if (!u.has_authority() || u.host().empty()) bad_url(url, "no host");
    e.host = u.host();
    if (u.has_port()) {
      if (u.port_number() == 0) bad_url(url, "port must be from 1 to 65535");
      e.port = u.port_number();
    }
    std::string path = u.path();
    if (!path.empty() && path != "/") e.db = parse_db(url, std::string_view(path).substr(1));
  } else {
    bad_url(url, "scheme must be redis, rediss or unix");
  }
  if (u.has_userinfo()) {
    e.user = u.user();
    e.password = u.password();
    // redis://:password@host means the default user.
    if (!u.has_password()) std::swap(e.user, e.password);
  }
  for (auto param : u.params()) {
    if (param.key == "db") {
      e.db = parse_db(url, param.value);
    } else if (param.key == "ca" && e.tls) {
      e.ca_file = param.value;
    } else if (param.key == "cert" && e.tls) {
      e.cert_file = param.value;
    } else if (param.key == "key" && e.tls) {
      e.key_file = param.value;
    } else if (param.key == "verify" && e.tls) {
      if (param.value != "0" && param.value != "1") bad_url(url, "verify must be 0 or 1");
      e.tls_verify = param.value == "1";
    } else {
      bad_url(url, "unknown parameter '" + std::string(param.key) + "'");
    }
  }
  if (e.cert_file.empty() != e.key_file.empty()) bad_url(url, "give cert and key together");
  return e;
}

std::vector<Endpoint> parse_urls(std::string_view urls) {
  std::vector<Endpoint> out;
  for (;;) {
    const auto comma = urls.find(',');
    out.push_back(parse_url(urls.substr(0, comma)));
    if (comma == std::string_view::npos) return out;
    urls.remove_prefix(comma + 1);
  }
}

}  // namespace redisched::redis
