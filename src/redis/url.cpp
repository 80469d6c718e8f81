#include "redis/url.h"

#include <boost/url/authority_view.hpp>
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

// The userinfo's AUTH: redis://:password@host and redis://password@host
// (koda's form) mean the default user.
void take_userinfo(const boost::urls::url_view& u, Endpoint& e) {
  if (!u.has_userinfo()) return;
  e.user = u.user();
  e.password = u.password();
  if (!u.has_password()) std::swap(e.user, e.password);
}

constexpr std::string_view kSentinelScheme = "redis+sentinel://";

// redis+sentinel://[userinfo@]h1[:p1],h2[:p2]/service[/db][?query]: the
// hosts are split off by hand (a URL has one authority), the rest is read
// as the URL redis://[userinfo@]sentinel/service[/db][?query].
Endpoint parse_sentinel_url(std::string_view url) {
  std::string_view rest = url.substr(kSentinelScheme.size());
  const auto slash = rest.find('/');
  if (slash == std::string_view::npos) bad_url(url, "no service name (…/mymaster)");
  std::string_view authority = rest.substr(0, slash);
  std::string userinfo;
  if (const auto at = authority.rfind('@'); at != std::string_view::npos) {
    userinfo = std::string(authority.substr(0, at)) + "@";
    authority.remove_prefix(at + 1);
  }
  std::vector<Endpoint::Sentinel> sentinels;
  for (;;) {
    const auto comma = authority.find(',');
    const std::string_view one = authority.substr(0, comma);
    auto host = boost::urls::parse_authority(one);
    if (!host || host->host().empty() || host->has_userinfo()) {
      bad_url(url, "sentinel '" + std::string(one) + "' is not host[:port]");
    }
    Endpoint::Sentinel s;
    s.host = host->host();
    if (host->has_port()) {
      if (host->port_number() == 0) bad_url(url, "port must be from 1 to 65535");
      s.port = host->port_number();
    }
    sentinels.push_back(std::move(s));
    if (comma == std::string_view::npos) break;
    authority.remove_prefix(comma + 1);
  }
  // (The view reads this text: it must outlive the view.)
  const std::string as_redis = "redis://" + userinfo + "sentinel" + std::string(rest.substr(slash));
  auto parsed = boost::urls::parse_uri(as_redis);
  if (!parsed) bad_url(url, parsed.error().message());
  const boost::urls::url_view& u = *parsed;
  Endpoint e;
  e.sentinels = std::move(sentinels);
  // (Names the link's one node; each connection asks for the primary.)
  e.host = e.sentinels.front().host;
  e.port = e.sentinels.front().port;
  if (u.has_fragment()) bad_url(url, "'#' ends the URL before its service name");
  std::string path = u.path();  // /service[/db]
  if (path.size() < 2) bad_url(url, "no service name (…/mymaster)");
  const auto db_slash = path.find('/', 1);
  e.service = path.substr(1, db_slash == std::string::npos ? std::string::npos : db_slash - 1);
  if (e.service.empty()) bad_url(url, "no service name (…/mymaster)");
  if (db_slash != std::string::npos) e.db = parse_db(url, path.substr(db_slash + 1));
  take_userinfo(u, e);
  for (auto param : u.params()) {
    if (param.key == "db") {
      e.db = parse_db(url, param.value);
    } else if (param.key == "sentinel_user") {
      e.sentinel_user = param.value;
    } else if (param.key == "sentinel_password") {
      e.sentinel_password = param.value;
    } else {
      bad_url(url, "unknown parameter '" + std::string(param.key) + "'");
    }
  }
  return e;
}

}  // namespace

std::string Endpoint::describe() const {
  if (kind == Kind::unix_socket) return "unix:" + path;
  if (via_sentinel()) {
    std::string all = "redis+sentinel://";
    for (const auto& s : sentinels) {
      all += (all.back() == '/' ? "" : ",") + s.host + ":" + std::to_string(s.port);
    }
    return all + "/" + service;
  }
  return (tls ? "rediss://" : "redis://") + host + ":" + std::to_string(port);
}

Endpoint parse_url(std::string_view url) {
  if (url.starts_with(kSentinelScheme)) return parse_sentinel_url(url);
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
    bad_url(url, "scheme must be redis, rediss, redis+sentinel or unix");
  }
  take_userinfo(u, e);
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
  if (urls.starts_with(kSentinelScheme)) return {parse_sentinel_url(urls)};
  std::vector<Endpoint> out;
  for (;;) {
    const auto comma = urls.find(',');
    out.push_back(parse_url(urls.substr(0, comma)));
    if (comma == std::string_view::npos) return out;
    urls.remove_prefix(comma + 1);
  }
}

}  // namespace redisched::redis
