#include "redis/cluster.h"

#include <boost/crc.hpp>
#include <charconv>

#include "redisched/error.h"

namespace redisched::redis {
namespace {

// CRC-16/XMODEM: polynomial 0x1021, initial 0, no reflection, no final xor.
using Crc16 = boost::crc_optimal<16, 0x1021, 0, 0, false, false>;

template <class Int>
std::optional<Int> to_int(std::string_view s) {
  Int v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

[[noreturn]] void bad_shape(const std::string& what) {
  throw Error(Errc::protocol, "CLUSTER SHARDS: " + what);
}

// A RESP2 map: a flat array of name, value, name, value...
const Reply* field(const Reply& map, std::string_view name) {
  if (map.type != Reply::Type::array) bad_shape("a map that is not an array");
  for (size_t i = 0; i + 1 < map.elements.size(); i += 2) {
    if (map.elements[i].str == name) return &map.elements[i + 1];
  }
  return nullptr;
}

}  // namespace

std::uint16_t crc16(std::string_view bytes) {
  Crc16 crc;
  crc.process_bytes(bytes.data(), bytes.size());
  return crc.checksum();
}

std::uint16_t hash_slot(std::string_view key) {
  if (const auto open = key.find('{'); open != std::string_view::npos) {
    const auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1) {
      key = key.substr(open + 1, close - open - 1);
    }
  }
  return static_cast<std::uint16_t>(crc16(key) % kSlots);
}

std::optional<Redirect> parse_redirect(std::string_view error) {
  Redirect r;
  if (error.starts_with("MOVED ")) {
    error.remove_prefix(6);
  } else if (error.starts_with("ASK ")) {
    r.ask = true;
    error.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const auto space = error.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  const auto slot = to_int<std::uint16_t>(error.substr(0, space));
  const std::string_view node = error.substr(space + 1);
  const auto colon = node.rfind(':');
  if (!slot || *slot >= kSlots || colon == std::string_view::npos) return std::nullopt;
  const auto port = to_int<std::uint16_t>(node.substr(colon + 1));
  if (!port) return std::nullopt;
  r.slot = *slot;
  r.host = std::string(node.substr(0, colon));
  if (r.host.size() > 2 && r.host.front() == '[' && r.host.back() == ']') {
    r.host = r.host.substr(1, r.host.size() - 2);  // an IPv6 address
  }
  r.port = *port;
  return r;
}

bool cluster_busy(std::string_view error) {
  return error.starts_with("TRYAGAIN") || error.starts_with("CLUSTERDOWN");
}

bool cluster_disabled(std::string_view error) {
  return error.find("cluster support disabled") != std::string_view::npos ||
         error.starts_with("NOPERM") || error.starts_with("ERR unknown command") ||
         error.starts_with("ERR unknown subcommand");
}

std::vector<ShardPrimary> parse_cluster_shards(const Reply& reply) {
  if (reply.type != Reply::Type::array) bad_shape("not an array");
  std::vector<ShardPrimary> out;
  for (const Reply& shard : reply.elements) {
    const Reply* slots = field(shard, "slots");
    const Reply* nodes = field(shard, "nodes");
    if (!slots || !nodes || slots->type != Reply::Type::array ||
        nodes->type != Reply::Type::array) {
      bad_shape("a shard without slots or nodes");
    }
    if (slots->elements.empty()) continue;  // a shard that serves nothing
    ShardPrimary p;
    if (slots->elements.size() % 2 != 0) bad_shape("an odd list of slot bounds");
    for (size_t i = 0; i < slots->elements.size(); i += 2) {
      const auto& a = slots->elements[i];
      const auto& b = slots->elements[i + 1];
      if (a.type != Reply::Type::integer || b.type != Reply::Type::integer || a.integer < 0 ||
          b.integer < a.integer || b.integer >= kSlots) {
        bad_shape("a slot range out of bounds");
      }
      p.slots.emplace_back(static_cast<std::uint16_t>(a.integer),
                           static_cast<std::uint16_t>(b.integer));
    }
    bool found = false;
    for (const Reply& node : nodes->elements) {
      const Reply* role = field(node, "role");
      const Reply* health = field(node, "health");
      if (!role || role->str != "master") continue;
      if (health && health->str != "online") continue;
      const Reply* endpoint = field(node, "endpoint");
      const Reply* ip = field(node, "ip");
      const Reply* port = field(node, "port");
      const Reply* tls_port = field(node, "tls-port");
      // "?" or empty: the node does not know its endpoint; its IP will do.
      if (endpoint && !endpoint->str.empty() && endpoint->str != "?") {
        p.host = endpoint->str;
      } else if (ip) {
        p.host = ip->str;
      }
      if (port && port->type == Reply::Type::integer) {
        p.port = static_cast<std::uint16_t>(port->integer);
      }
      if (tls_port && tls_port->type == Reply::Type::integer) {
        p.tls_port = static_cast<std::uint16_t>(tls_port->integer);
      }
      found = !p.host.empty() && (p.port != 0 || p.tls_port != 0);
      break;
    }
    if (found) out.push_back(std::move(p));
  }
  return out;
}

}  // namespace redisched::redis
