#include "embedded/redis_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <stdexcept>
#include <thread>

namespace redisched::embedded {
namespace {

bool port_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  ::close(fd);
  return ok;
}

// A cluster node needs its port at most 55535 and the bus port (+10000)
// free too: ports below the kernel's ephemeral range, tried at random.
int free_cluster_port() {
  static std::mt19937 random(std::random_device{}());
  std::uniform_int_distribution<int> pick(20000, 29999);
  for (int tries = 0; tries < 1000; ++tries) {
    const int port = pick(random);
    if (port_free(port) && port_free(port + 10000)) return port;
  }
  throw std::runtime_error("no free port pair for a cluster node");
}

std::string output_of(const std::string& command) {
  std::string out;
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ::pclose(p);
  return out;
}

}  // namespace

bool cluster_ok(int port, int nodes) {
  const std::string info =
      output_of("redis-cli -h 127.0.0.1 -p " + std::to_string(port) + " cluster info 2>/dev/null");
  return info.find("cluster_state:ok") != std::string::npos &&
         info.find("cluster_slots_ok:16384") != std::string::npos &&
         info.find("cluster_known_nodes:" + std::to_string(nodes) + "\r") != std::string::npos;
}

std::vector<std::unique_ptr<RedisProcess>> start_cluster(
    int primaries, int replicas_per_primary, const std::vector<std::string>& extra_config) {
  std::vector<std::unique_ptr<RedisProcess>> nodes;
  const int total = primaries * (1 + replicas_per_primary);
  for (int i = 0; i < total; ++i) {
    RedisProcessOptions o;
    o.die_with_parent = true;
    o.config = {"cluster-enabled yes",
                "cluster-config-file nodes.conf",
                "cluster-node-timeout 1000",
                "cluster-require-full-coverage no",
                "cluster-allow-replica-migration no",
                "repl-diskless-sync-delay 0"};
    o.config.insert(o.config.end(), extra_config.begin(), extra_config.end());
    // Another process may take the port first: a few tries.
    for (int attempt = 1;; ++attempt) {
      o.port = free_cluster_port();
      try {
        nodes.push_back(std::make_unique<RedisProcess>(o));
        break;
      } catch (const std::runtime_error&) {
        if (attempt == 3) throw;
      }
    }
  }
  std::string cmd = "redis-cli --cluster create";
  for (const auto& n : nodes) cmd += " 127.0.0.1:" + std::to_string(n->port());
  cmd += " --cluster-replicas " + std::to_string(replicas_per_primary) + " --cluster-yes";
  cmd += " > " + nodes.front()->dir() + "/create.log 2>&1";
  if (std::system(cmd.c_str()) != 0) {
    throw std::runtime_error("redis-cli --cluster create failed; see " + nodes.front()->dir() +
                             "/create.log");
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (const auto& n : nodes) {
    while (!cluster_ok(n->port(), total)) {
      if (std::chrono::steady_clock::now() > deadline) {
        throw std::runtime_error("the cluster did not come up in 30 s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  return nodes;
}

}  // namespace redisched::embedded
