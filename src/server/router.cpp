#include "server/router.h"

#include <boost/url/parse.hpp>

#include "core/checks.h"
#include "redisched/error.h"
#include "server/fields.h"
#include "wire/job_json.h"

namespace redisched::server {

const std::string* Params::find(const std::string& key) const {
  auto it = query.find(key);
  return it == query.end() ? nullptr : &it->second;
}

Match match_route(std::span<const Route> routes, http::verb method, std::string_view target) {
  // Origin form ("/path?query"), or absolute form, which RFC 9112 §3.2.2 has
  // a server accept too (its host is not ours to check: Host is).
  auto url = target.starts_with("/") ? boost::urls::parse_origin_form(target)
                                     : boost::urls::parse_absolute_uri(target);
  if (!url || url->path().empty() || url->path().front() != '/') {
    bad_request("malformed request target");
  }
  std::vector<std::string> segments;
  segments.reserve(url->segments().size());
  for (auto seg : url->segments()) segments.emplace_back(seg);
  // "/" is one empty segment to Boost.URL's eyes, and none to ours.
  if (segments.size() == 1 && segments[0].empty()) segments.clear();

  Match m;
  for (const auto& route : routes) {
    std::string_view pattern = route.path.substr(1);
    std::size_t i = 0;
    Params params;
    bool same = true;
    while (same && !pattern.empty()) {
      const auto slash = pattern.find('/');
      const auto part = pattern.substr(0, slash);
      pattern = slash == std::string_view::npos ? "" : pattern.substr(slash + 1);
      if (i >= segments.size()) {
        same = false;
      } else if (part == "{topic}") {
        params.topic = segments[i];
      } else if (part == "{id}") {
        params.id = segments[i];
      } else if (part == "{name}") {
        params.name = segments[i];
      } else {
        same = part == segments[i];
      }
      ++i;
    }
    if (!same || i != segments.size()) continue;
    m.route = &route;
    m.params = std::move(params);
    const auto wanted = method == http::verb::head ? http::verb::get : method;
    for (const auto& rm : route.methods) {
      if (rm.verb == wanted) {
        m.handler = rm.handler;
        m.need = rm.need;
        m.long_poll = rm.long_poll;
      }
    }
    break;
  }
  m.params.path = url->path();
  for (auto param : url->params()) {
    auto [it, fresh] = m.params.query.emplace(std::string(param.key), std::string(param.value));
    if (!fresh && m.params.repeated.empty()) m.params.repeated = it->first;
  }
  return m;
}

void check_params(const Match& m) {
  const auto& p = m.params;
  if (m.route->path.find("{topic}") != std::string_view::npos) {
    core::check_topic(p.topic);
  }
  if (m.route->path.find("{id}") != std::string_view::npos) core::check_id(p.id);
  if (!p.repeated.empty()) {
    bad_request("query parameter " + wire::printable(p.repeated) + " is given more than once");
  }
  if (m.route->query) {
    for (const auto& [name, value] : p.query) {
      bool known = false;
      for (auto q : *m.route->query) known = known || q == name;
      if (!known) bad_request("unknown query parameter " + wire::printable(name));
    }
  }
}

std::string allowed_methods(const Route& route) {
  std::string out;
  for (const auto& rm : route.methods) {
    if (!out.empty()) out += ", ";
    out += std::string(http::to_string(rm.verb));
    if (rm.verb == http::verb::get) out += ", HEAD";
  }
  return out;
}

}  // namespace redisched::server
