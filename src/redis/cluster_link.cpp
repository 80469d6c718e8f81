// The link of a Client: one Redis node, or a Redis Cluster found out from it.
//
// It starts as a single node (the endpoint it was given owns every slot) and
// asks that node for CLUSTER SHARDS at once. A node with cluster support off
// says so, and from then on commands go straight to it. A cluster's map
// gives a link per primary; a command goes to the primary of its route key's
// slot, follows MOVED (the map is updated, and refreshed in the background)
// and ASK (ASKING, then the command, once), and waits out TRYAGAIN and
// CLUSTERDOWN within the command timeout. A failed connection refreshes the
// map from the other nodes (a failover); the command that met it fails, for
// its caller to retry. Subscriptions live on the primary of their channel's
// slot and move with it.
#include <spdlog/spdlog.h>

#include <array>
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <map>
#include <memory>
#include <optional>

#include "redis/cluster.h"
#include "redis/command.h"
#include "redis/connection.h"
#include "redis/subscriptions.h"
#include "redisched/error.h"

namespace redisched::redis {
namespace {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

constexpr int kMaxRedirects = 5;
constexpr std::chrono::milliseconds kRefreshEvery{500};  // at most this often
constexpr std::chrono::milliseconds kBusyRetry{50};

enum class Mode { unknown, single, cluster };

// A command on its way, kept for a resend after a redirection.
struct Pending {
  std::string route;
  std::string command;
  std::optional<Batchable> batch;  // instead of command: a call that may be coalesced
  ReplyHandler done;
  int redirects = 0;
  Clock::time_point deadline;
  int replicas = 0;  // send_replicated's
  std::chrono::milliseconds wait_timeout{0};
  std::size_t sent_to = 0;  // the node that will answer
  bool asking = false;      // sent after ASKING: a TRYAGAIN is retried there
};

// A subscription, on the primary that owns its channel's slot (moved when
// the slot moves). On the I/O thread.
struct Sub {
  std::shared_ptr<Subscriber> who;
  std::uint16_t slot = 0;
  std::size_t node = 0;
  std::uint64_t inner = 0;  // its id on that node's link, 0 none
};

// The state, on the I/O thread; callbacks in flight hold it.
class Cluster : public std::enable_shared_from_this<Cluster> {
 public:
  Cluster(asio::io_context& io, ConnectionConfig config, int connections)
      : io_(io), config_(std::move(config)), connections_(connections), refresh_timer_(io) {
    owner_.fill(0);
  }

  // seeds: more nodes of the cluster than config.endpoint, to ask for the
  // map when it does not answer.
  static std::shared_ptr<Cluster> make(asio::io_context& io, ConnectionConfig config,
                                       int connections, const std::vector<Endpoint>& seeds) {
    auto c = std::make_shared<Cluster>(io, std::move(config), connections);
    c->nodes_.push_back(
        {name_of(c->config_.endpoint), c->config_.endpoint, c->node_link(c->config_.endpoint)});
    for (const auto& e : seeds) c->nodes_.push_back({name_of(e), e, c->node_link(e)});
    // Several seeds: commands wait for the first map (the first seed may be
    // the one that is down). One: they go to it at once, as to a single node.
    c->holding_ = !seeds.empty();
    c->seed_ = c->nodes_.front().link.get();
    return c;
  }

  std::atomic<Mode> mode{Mode::unknown};

  // Any thread: the node of a single-node link never moves.
  Link& seed() { return *seed_; }

  void start() { refresh(); }

  void send(std::string route, std::string command, ReplyHandler done, int replicas = 0,
            std::chrono::milliseconds wait_timeout = {}) {
    auto p = std::make_shared<Pending>();
    p->route = std::move(route);
    p->command = std::move(command);
    p->done = std::move(done);
    p->replicas = replicas;
    p->wait_timeout = wait_timeout;
    p->deadline = Clock::now() + command_timeout();
    dispatch(std::move(p));
  }

  void send_batchable(std::string route, Batchable call, ReplyHandler done) {
    auto p = std::make_shared<Pending>();
    p->route = std::move(route);
    p->batch = std::move(call);
    p->done = std::move(done);
    p->deadline = Clock::now() + command_timeout();
    dispatch(std::move(p));
  }

  // The primaries' ids (indexes into nodes_, which only grows), once the
  // first map is in.
  void primaries(std::function<void(std::error_code, std::vector<std::size_t>)> done) {
    if (holding_) {
      return hold(Clock::now() + command_timeout(),
                  [self = shared_from_this(), done = std::move(done)](std::error_code ec,
                                                                      const std::string&) {
                    if (ec) return done(ec, {});
                    self->primaries(done);
                  });
    }
    if (mode == Mode::cluster && !primaries_.empty()) return done({}, primaries_);
    done({}, {seed_index_});
  }

  void send_to_node(std::size_t node, std::string command, ReplyHandler done) {
    if (node >= nodes_.size()) {
      Reply r;
      r.type = Reply::Type::error;
      r.str = "no such node";
      // (Posted: no answer runs before its call returned.)
      asio::post(io_, [done = std::move(done), r = std::move(r)]() mutable {
        done(make_error_code(Errc::connection), std::move(r));
      });
      return;
    }
    nodes_[node].link->send("", std::move(command), std::move(done));
  }

  void attach(const std::shared_ptr<Subscriber>& who) {
    if (closed_ || !who->active) return;
    Sub& s = subs_[who.get()];
    s.who = who;
    s.slot = hash_slot(who->channel);
    s.node = owner_[s.slot];
    std::weak_ptr<Subscriber> weak = who;
    s.inner = nodes_[s.node].link->subscribe(
        who->channel,
        [weak](const std::string& payload) {
          if (auto w = weak.lock()) w->message(payload);
        },
        [weak] {
          if (auto w = weak.lock()) w->ready();
        });
  }

  void detach(const Subscriber* who) {
    auto it = subs_.find(who);
    if (it == subs_.end()) return;
    if (it->second.inner != 0) nodes_[it->second.node].link->unsubscribe(it->second.inner);
    subs_.erase(it);
  }

  void close() {
    closed_ = true;
    refresh_timer_.cancel();
    if (holding_) release_held(make_error_code(Errc::closed), "the client is closed");
    for (auto& n : nodes_) n.link->close();
  }

 private:
  struct Node {
    std::string name;  // host:port
    Endpoint endpoint;
    std::unique_ptr<Link> link;
  };

  // Something that waits for the first map: go(ec) when it is in (no ec)
  // or when no seed answered or the deadline passed (ec and why).
  struct Held {
    std::function<void(std::error_code, const std::string&)> go;
    std::unique_ptr<asio::steady_timer> deadline;
    bool gone = false;
  };

  std::chrono::milliseconds command_timeout() const {
    return config_.command_timeout.count() > 0 ? config_.command_timeout : std::chrono::hours(1);
  }

  void hold(Clock::time_point deadline,
            std::function<void(std::error_code, const std::string&)> go) {
    auto h = std::make_shared<Held>();
    h->go = std::move(go);
    h->deadline = std::make_unique<asio::steady_timer>(io_, deadline);
    h->deadline->async_wait([self = shared_from_this(), h](boost::system::error_code ec) {
      if (ec || h->gone) return;
      h->gone = true;
      std::erase(self->held_, h);
      h->go(make_error_code(Errc::timeout),
            "no seed of the cluster answered within the command timeout");
    });
    held_.push_back(std::move(h));
  }

  static std::string name_of(const Endpoint& e) {
    return e.kind == Endpoint::Kind::unix_socket ? e.path : e.host + ":" + std::to_string(e.port);
  }

  // The first map is in (or nobody answered): what waited for it goes.
  void release_held(std::error_code ec, const std::string& why) {
    holding_ = false;
    auto held = std::exchange(held_, {});
    for (auto& h : held) {
      h->gone = true;
      h->deadline->cancel();
      h->go(ec, why);
    }
  }

  void dispatch(std::shared_ptr<Pending> p) {
    if (holding_) {
      const auto deadline = p->deadline;
      return hold(deadline, [self = shared_from_this(), p = std::move(p)](
                                std::error_code ec, const std::string& why) mutable {
        if (!ec) return self->dispatch(std::move(p));
        Reply r;
        r.type = Reply::Type::error;
        r.str = why;
        p->done(ec, std::move(r));
      });
    }
    const std::size_t node = p->route.empty() ? any_primary() : owner_[hash_slot(p->route)];
    send_on(node, std::move(p));
  }

  void send_on(std::size_t node, std::shared_ptr<Pending> p) {
    std::string command = p->command;  // kept for a resend
    std::optional<Batchable> batch = p->batch;
    const std::string route = p->route;
    p->sent_to = node;
    const int replicas = p->replicas;
    const auto wait_timeout = p->wait_timeout;
    ReplyHandler answer = [self = shared_from_this(), p = std::move(p)](std::error_code ec,
                                                                        Reply reply) mutable {
      self->on_reply(std::move(p), ec, std::move(reply));
    };
    if (batch) {
      nodes_[node].link->send_batchable(route, std::move(*batch), std::move(answer));
    } else if (replicas > 0) {
      nodes_[node].link->send_replicated(route, std::move(command), replicas, wait_timeout,
                                         std::move(answer));
    } else {
      nodes_[node].link->send(route, std::move(command), std::move(answer));
    }
  }

  void on_reply(std::shared_ptr<Pending> p, std::error_code ec, Reply reply) {
    // A redirect or a busy node met after close() would have been followed:
    // the command did not run, so its answer is the close, not the
    // redirect's text.
    if (!ec && reply.is_error() && closed_ &&
        (parse_redirect(reply.str) || cluster_busy(reply.str))) {
      Reply closed;
      closed.type = Reply::Type::error;
      closed.str = "the client is closed";
      return p->done(make_error_code(Errc::closed), std::move(closed));
    }
    if (!ec && reply.is_error() && !closed_) {
      if (auto to = parse_redirect(reply.str); to && p->redirects < kMaxRedirects) {
        ++p->redirects;
        // "MOVED 3999 :6381": the host of the node that answered.
        if (to->host.empty()) to->host = nodes_[p->sent_to].endpoint.host;
        const std::size_t node = node_for(to->host, to->port);
        if (to->ask) return ask(node, std::move(p));
        p->asking = false;
        owner_[to->slot] = node;
        mode = Mode::cluster;
        refresh();
        return dispatch(std::move(p));
      }
      // TRYAGAIN (a topic's keys half migrated) and CLUSTERDOWN (a failover)
      // are waited out within the deadline, where they were met: after an
      // ASK, at the importing node again.
      if (cluster_busy(reply.str) && Clock::now() + kBusyRetry < p->deadline) {
        auto timer = std::make_shared<asio::steady_timer>(io_, kBusyRetry);
        timer->async_wait([self = shared_from_this(), timer,
                           p = std::move(p)](boost::system::error_code) mutable {
          const std::size_t at = p->sent_to;  // before p is moved from
          if (p->asking) return self->ask(at, std::move(p));
          self->dispatch(std::move(p));
        });
        return;
      }
    }
    // A node that fails or does not answer: a failover, perhaps.
    if (ec && (ec == make_error_code(Errc::connection) || ec == make_error_code(Errc::timeout)) &&
        mode == Mode::cluster) {
      refresh();
    }
    p->done(ec, std::move(reply));
  }

  // ASKING, then the command, on the same connection of node.
  void ask(std::size_t node, std::shared_ptr<Pending> p) {
    p->asking = true;
    nodes_[node].link->send(p->route, encode_command({"ASKING"}), [](std::error_code, Reply) {});
    send_on(node, std::move(p));
  }

  std::size_t any_primary() const {
    return mode == Mode::cluster && !primaries_.empty() ? primaries_.front() : seed_index_;
  }

  // The link to host:port, made when first seen (it loads the Functions
  // library there as it connects).
  std::size_t node_for(const std::string& host, std::uint16_t port) {
    const std::string name = host + ":" + std::to_string(port);
    for (std::size_t i = 0; i < nodes_.size(); ++i) {
      if (nodes_[i].name == name) return i;
    }
    Endpoint e = config_.endpoint;
    e.kind = Endpoint::Kind::tcp;
    e.host = host;
    e.port = port;
    nodes_.push_back({name, e, node_link(e)});
    return nodes_.size() - 1;
  }

  std::unique_ptr<Link> node_link(const Endpoint& endpoint) {
    ConnectionConfig c = config_;
    c.endpoint = endpoint;
    c.on_slot_moved = [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->refresh();
    };
    return make_node_link(io_, c, connections_);
  }

  // Asks for the map now, or as soon as the last refresh is old enough; one
  // at a time.
  void refresh() {
    if (closed_ || mode == Mode::single) return;
    if (refreshing_) {
      again_ = true;
      return;
    }
    refreshing_ = true;
    const auto wait = last_refresh_ + kRefreshEvery - Clock::now();
    if (wait > Clock::duration::zero()) {
      refresh_timer_.expires_after(wait);
      refresh_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
        if (!ec) self->ask_for_map(0);
      });
      return;
    }
    ask_for_map(0);
  }

  // CLUSTER SHARDS from node `from` on, trying the next on a connection
  // failure (the one that failed over, perhaps).
  void ask_for_map(std::size_t tried) {
    last_refresh_ = Clock::now();
    const std::size_t node = (next_source_ + tried) % nodes_.size();
    nodes_[node].link->send("", encode_command({"CLUSTER", "SHARDS"}),
                            [self = shared_from_this(), tried](std::error_code ec, Reply reply) {
                              self->on_map(tried, ec, std::move(reply));
                            });
  }

  void on_map(std::size_t tried, std::error_code ec, Reply reply) {
    if (closed_) return;
    if (ec && tried + 1 < nodes_.size()) return ask_for_map(tried + 1);
    refreshing_ = false;
    const std::size_t source = (next_source_ + tried) % nodes_.size();
    if (ec) {
      // Nobody answered: ask again later (a node still starting, a
      // single node that is down).
      next_source_ = (next_source_ + 1) % nodes_.size();
      if (holding_) release_held(ec, "no seed answered: " + reply.str);
      retry_later();
      return;
    }
    if (reply.is_error()) {
      if (mode == Mode::unknown && cluster_disabled(reply.str)) {
        // Cluster support off: a single node, for good.
        seed_index_ = source;
        seed_ = nodes_[source].link.get();
        owner_.fill(source);
        move_subscriptions();
        mode = Mode::single;
        if (holding_) release_held({}, {});
        return;
      }
      // Not an answer about the cluster (LOADING, BUSY, an ACL without
      // CLUSTER...): asked again later; calls go on as they went.
      spdlog::warn("redisched: CLUSTER SHARDS from {}: {}", nodes_[source].name, reply.str);
      if (holding_) release_held({}, {});
      retry_later();
      return;
    }
    std::vector<ShardPrimary> shards;
    try {
      shards = parse_cluster_shards(reply);
    } catch (const Error& e) {
      spdlog::warn("redisched: {}", e.what());
      if (holding_) release_held({}, {});
      retry_later();
      return;
    }
    std::vector<std::size_t> primaries;
    for (const auto& s : shards) {
      const bool tls = config_.endpoint.tls && s.tls_port != 0;
      const std::size_t node = node_for(s.host, tls ? s.tls_port : s.port);
      primaries.push_back(node);
      for (const auto& [from, to] : s.slots) {
        for (int slot = from; slot <= to; ++slot) owner_[static_cast<std::size_t>(slot)] = node;
      }
    }
    primaries_ = std::move(primaries);
    mode = Mode::cluster;
    next_source_ = source;  // it answers: ask it first next time
    move_subscriptions();
    if (holding_) release_held({}, {});
    if (std::exchange(again_, false)) refresh();
  }

  // Subscriptions follow their slots (Redis ends them on a slot move).
  void move_subscriptions() {
    std::vector<std::shared_ptr<Subscriber>> moving;
    for (const auto& [key, s] : subs_) {
      if (owner_[s.slot] != s.node) moving.push_back(s.who);
    }
    for (const auto& who : moving) {
      detach(who.get());
      attach(who);
    }
  }

  void retry_later() {
    if (mode == Mode::single) return;
    refreshing_ = true;
    refresh_timer_.expires_after(config_.reconnect_max);
    refresh_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return;
      self->refreshing_ = false;
      self->refresh();
    });
  }

  asio::io_context& io_;
  const ConnectionConfig config_;
  const int connections_;
  std::vector<Node> nodes_;  // only grows; [0] is the first seed
  // A single node's (set before mode turns single; seed_ is read by any
  // thread after that).
  std::size_t seed_index_ = 0;
  std::atomic<Link*> seed_{nullptr};
  std::array<std::size_t, kSlots> owner_{};
  std::vector<std::size_t> primaries_;  // the nodes that serve slots
  std::map<const Subscriber*, Sub> subs_;
  asio::steady_timer refresh_timer_;
  Clock::time_point last_refresh_{};
  std::size_t next_source_ = 0;
  bool holding_ = false;  // commands wait for the first map
  std::vector<std::shared_ptr<Held>> held_;
  bool refreshing_ = false;
  bool again_ = false;
  bool closed_ = false;
};

class ClusterLink final : public Link {
 public:
  ClusterLink(asio::io_context& io, ConnectionConfig config, int connections,
              const std::vector<Endpoint>& seeds)
      : io_(io), cluster_(Cluster::make(io, std::move(config), connections, seeds)) {
    asio::post(io_, [c = cluster_] { c->start(); });
  }
  ~ClusterLink() override { close(); }

  void send(std::string_view route, std::string command, ReplyHandler done) override {
    // A single node: straight to it, as if there were no cluster link.
    if (cluster_->mode == Mode::single) {
      return cluster_->seed().send(route, std::move(command), std::move(done));
    }
    on_io([c = cluster_, route = std::string(route), command = std::move(command),
           done = std::move(done)]() mutable {
      c->send(std::move(route), std::move(command), std::move(done));
    });
  }

  void send_batchable(std::string_view route, Batchable call, ReplyHandler done) override {
    if (cluster_->mode == Mode::single) {
      return cluster_->seed().send_batchable(route, std::move(call), std::move(done));
    }
    on_io([c = cluster_, route = std::string(route), call = std::move(call),
           done = std::move(done)]() mutable {
      c->send_batchable(std::move(route), std::move(call), std::move(done));
    });
  }

  void send_replicated(std::string_view route, std::string command, int replicas,
                       std::chrono::milliseconds timeout, ReplyHandler done) override {
    if (cluster_->mode == Mode::single) {
      return cluster_->seed().send_replicated(route, std::move(command), replicas, timeout,
                                              std::move(done));
    }
    on_io([c = cluster_, route = std::string(route), command = std::move(command), replicas,
           timeout, done = std::move(done)]() mutable {
      c->send(std::move(route), std::move(command), std::move(done), replicas, timeout);
    });
  }

  void primaries(std::function<void(std::error_code, std::vector<std::size_t>)> done) override {
    // (Posted even on the link's thread: no answer runs before its call
    // returned.)
    asio::post(io_,
               [c = cluster_, done = std::move(done)]() mutable { c->primaries(std::move(done)); });
  }

  void send_to_node(std::size_t node, std::string command, ReplyHandler done) override {
    on_io([c = cluster_, node, command = std::move(command), done = std::move(done)]() mutable {
      c->send_to_node(node, std::move(command), std::move(done));
    });
  }

  std::uint64_t subscribe(const std::string& channel, MessageHandler on_message,
                          ReadyHandler on_ready) override {
    auto [id, who] = subscribers_.add(channel, std::move(on_message), std::move(on_ready));
    asio::post(io_, [c = cluster_, who = who] { c->attach(who); });
    return id;
  }

  void unsubscribe(std::uint64_t id) override {
    auto who = subscribers_.remove(id);  // no callback starts from here on
    if (!who) return;
    asio::post(io_, [c = cluster_, who] { c->detach(who.get()); });
  }

  void close() override {
    if (closed_.exchange(true)) return;
    asio::post(io_, [c = cluster_] { c->close(); });
  }

 private:
  // On the link's own thread at once (no hop), else posted there.
  template <class Fn>
  void on_io(Fn&& fn) {
    if (io_.get_executor().running_in_this_thread()) {
      fn();
    } else {
      asio::post(io_, std::forward<Fn>(fn));
    }
  }

  asio::io_context& io_;
  std::shared_ptr<Cluster> cluster_;
  SubscriberTable subscribers_;
  std::atomic<bool> closed_{false};
};

}  // namespace

std::unique_ptr<Link> make_link(asio::io_context& io, ConnectionConfig config, int connections,
                                const std::vector<Endpoint>& seeds) {
  return std::make_unique<ClusterLink>(io, std::move(config), connections, seeds);
}

}  // namespace redisched::redis
