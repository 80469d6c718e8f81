// The link to one Redis node (make_node_link): pipelined connections used
// in turn by topic, connections of their own for writes that wait for
// replicas, and a subscriber connection made at the first subscription.
#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <utility>
#include <vector>

#include "redis/command.h"
#include "redis/connection.h"
#include "redis/node_connection.h"
#include "redis/subscriptions.h"

namespace redisched::redis {
namespace {

namespace asio = boost::asio;

// The subscriptions of a link, on one subscriber connection of its own
// (RESP2 keeps a subscribed connection from running commands), made when the
// first one is asked for: the I/O around a ChannelTable
// (redis/subscriptions.h), which decides what to send. On the I/O thread,
// but for what subscribe() and unsubscribe() post to it.
class Subscriptions : public std::enable_shared_from_this<Subscriptions> {
 public:
  Subscriptions(asio::io_context& io, ConnectionConfig config)
      : io_(io), config_(std::move(config)), retry_(io) {
    config_.load_library = false;
    config_.command_timeout = std::chrono::milliseconds{0};  // it waits for messages, not replies
  }

  void add(std::uint64_t id, const std::shared_ptr<Subscriber>& s) {
    if (closed_) return;
    if (!conn_) start();
    if (table_.want(id, s)) send_subscribe(s->channel);
  }

  void remove(std::uint64_t id, const std::string& channel) {
    if (table_.drop(id)) {
      send(channel, is_shard_channel(channel) ? "SUNSUBSCRIBE" : "UNSUBSCRIBE",
           [](std::error_code, Reply) {});
    }
  }

  void close() {
    closed_ = true;
    retry_.cancel();
    if (conn_) conn_->close();
  }

 private:
  void start() {
    auto weak = weak_from_this();
    PushHooks hooks;
    hooks.on_push = [weak](const Reply& r) {
      auto self = weak.lock();
      if (!self) return;
      if (r.elements[0].str == "sunsubscribe") return self->ended(r.elements[1].str);
      for (const auto& s : self->table_.subscribers(r.elements[1].str)) {
        s->message(r.elements[2].str);
      }
    };
    hooks.on_up = [weak] {
      auto self = weak.lock();
      if (!self) return;
      for (const auto& channel : self->table_.up()) self->send_subscribe(channel);
    };
    conn_ = Connection::make(io_, config_, std::move(hooks));
    conn_->start();
  }

  // (S)SUBSCRIBE or (S)UNSUBSCRIBE of channel; the reply to SUNSUBSCRIBE is
  // told apart from the one Redis sends unasked (Pipeline::enqueue_unsubscribe).
  void send(const std::string& channel, std::string_view verb, ReplyHandler done) {
    const std::string_view words[] = {verb, channel};
    std::string cmd;
    append_command(cmd, words);
    if (verb == "SUNSUBSCRIBE") return conn_->enqueue_unsubscribe(cmd, channel, std::move(done));
    conn_->enqueue(cmd, std::move(done));
  }

  void send_subscribe(const std::string& channel) {
    send(channel, is_shard_channel(channel) ? "SSUBSCRIBE" : "SUBSCRIBE",
         [this, self = shared_from_this(), channel](std::error_code ec, Reply r) {
           if (ec) return table_.down();  // the connection dropped; up() asks again
           if (!table_.wanted(channel)) return;
           if (!r.is_error()) return table_.confirmed(channel);
           // Refused (an ACL without the channel, a node that does not own
           // it): not subscribed. Ask again later rather than sleep on a
           // channel that never speaks; a cluster link moves it to its owner.
           if (r.str.rfind("MOVED ", 0) == 0 && config_.on_slot_moved) {
             config_.on_slot_moved();
           } else {
             spdlog::error("redisched: Redis refused to subscribe to {}: {} (asking again)",
                           channel, r.str);
           }
           table_.refused(channel);
           retry_refused();
         });
  }

  void retry_refused() {
    if (retrying_) return;
    retrying_ = true;
    retry_.expires_after(std::chrono::seconds(3));
    retry_.async_wait([this, self = shared_from_this()](boost::system::error_code ec) {
      retrying_ = false;
      if (ec || closed_) return;
      for (const auto& channel : table_.retry()) send_subscribe(channel);
    });
  }

  // Redis ended a subscription itself (a cluster slot moved): asked for
  // again later, here or (moved by the cluster link) on the new owner.
  void ended(const std::string& channel) {
    if (!table_.wanted(channel)) return;
    table_.refused(channel);
    if (config_.on_slot_moved) config_.on_slot_moved();
    retry_refused();
  }

  asio::io_context& io_;
  ConnectionConfig config_;
  asio::steady_timer retry_;
  std::shared_ptr<Connection> conn_;
  bool closed_ = false;
  bool retrying_ = false;
  ChannelTable table_;
};

class NodeLink final : public Link {
 public:
  NodeLink(asio::io_context& io, const ConnectionConfig& config, int connections)
      : io_(io), subscriptions_(std::make_shared<Subscriptions>(io, config)) {
    for (int i = 0; i < std::max(connections, 1); ++i) {
      conns_.push_back(Connection::make(io, config));
      conns_.back()->start();
      durable_.push_back(std::make_shared<Durable>(Connection::make(io, config)));
    }
  }
  ~NodeLink() override { close(); }

  // A topic's commands always take the same connection, so they keep their
  // order; topics spread over the connections. On the link's own thread the
  // command is queued at once (no hop); from another thread it is posted.
  void send(std::string_view route_key, std::string command, ReplyHandler done) override {
    const size_t i = std::hash<std::string_view>{}(route_key) % conns_.size();
    if (io_.get_executor().running_in_this_thread()) {
      conns_[i]->enqueue(command, std::move(done));
      return;
    }
    asio::post(io_, [c = conns_[i], command = std::move(command),
                     done = std::move(done)]() mutable { c->enqueue(command, std::move(done)); });
  }

  void send_batchable(std::string_view route_key, Batchable call, ReplyHandler done) override {
    const size_t i = std::hash<std::string_view>{}(route_key) % conns_.size();
    if (io_.get_executor().running_in_this_thread()) {
      conns_[i]->enqueue_batchable(std::move(call), std::move(done));
      return;
    }
    asio::post(io_, [c = conns_[i], call = std::move(call), done = std::move(done)]() mutable {
      c->enqueue_batchable(std::move(call), std::move(done));
    });
  }

  // Writes that wait for replicas go on connections of their own (as many
  // as the others, a topic's always the same), each made at its first such
  // write: WAIT blocks the connection it runs on, and the reserves and reads
  // queued behind it there would wait out the replicas' timeout. (A write's
  // answer comes after its WAIT: a caller that waits for it sees the order
  // it made; calls made without waiting may overtake.)
  void send_replicated(std::string_view route_key, std::string command, int replicas,
                       std::chrono::milliseconds timeout, ReplyHandler done) override {
    const size_t i = std::hash<std::string_view>{}(route_key) % durable_.size();
    auto go = [d = durable_[i], command = std::move(command), replicas, timeout,
               done = std::move(done)]() mutable {
      if (!std::exchange(d->started, true)) d->conn->start();
      d->conn->enqueue_replicated(command, replicas, timeout, std::move(done));
    };
    if (io_.get_executor().running_in_this_thread()) return go();
    asio::post(io_, std::move(go));
  }

  void primaries(std::function<void(std::error_code, std::vector<std::size_t>)> done) override {
    asio::post(io_, [done = std::move(done)] { done({}, {0}); });
  }

  void send_to_node(std::size_t, std::string command, ReplyHandler done) override {
    send("", std::move(command), std::move(done));
  }

  std::uint64_t subscribe(const std::string& channel, MessageHandler on_message,
                          ReadyHandler on_ready) override {
    auto [id, s] = subscribers_.add(channel, std::move(on_message), std::move(on_ready));
    asio::post(io_, [t = subscriptions_, id = id, s = s] { t->add(id, s); });
    return id;
  }

  void unsubscribe(std::uint64_t id) override {
    auto s = subscribers_.remove(id);  // no callback starts from here on
    if (!s) return;
    asio::post(io_, [t = subscriptions_, id, s] { t->remove(id, s->channel); });
  }

  void close() override {
    if (closed_.exchange(true)) return;
    for (auto& c : conns_) asio::post(io_, [c] { c->close(); });
    for (auto& d : durable_) asio::post(io_, [d] { d->conn->close(); });
    asio::post(io_, [s = subscriptions_] { s->close(); });
  }

 private:
  asio::io_context& io_;
  std::vector<std::shared_ptr<Connection>> conns_;
  std::shared_ptr<Subscriptions> subscriptions_;
  struct Durable {
    explicit Durable(std::shared_ptr<Connection> c) : conn(std::move(c)) {}
    std::shared_ptr<Connection> conn;
    bool started = false;  // on the I/O thread
  };
  std::vector<std::shared_ptr<Durable>> durable_;  // the writes that wait for replicas
  SubscriberTable subscribers_;
  std::atomic<bool> closed_{false};
};

}  // namespace

std::unique_ptr<Link> make_node_link(asio::io_context& io, ConnectionConfig config,
                                     int connections) {
  return std::make_unique<NodeLink>(io, config, connections);
}

}  // namespace redisched::redis
