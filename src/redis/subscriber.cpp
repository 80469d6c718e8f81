#include "redis/subscriber.h"

#include <boost/asio/io_context.hpp>

#include "redis/command.h"

namespace redisched::redis {

Subscriber::Subscriber(boost::asio::io_context& io, ConnectionConfig config, OnMessage on_message,
                       OnReady on_ready)
    : on_message_(std::move(on_message)), on_ready_(std::move(on_ready)) {
  config.load_library = false;
  config.command_timeout = Millis{0};  // a subscriber waits for messages, not replies
  config.on_push = [this](const Reply& r) { on_message_(r.elements[1].str, r.elements[2].str); };
  config.on_up = [this] {
    up_ = true;
    unconfirmed_ = 0;
    for (const auto& c : channels_) send_subscribe(c);
    if (channels_.empty()) on_ready_();
  };
  link_ = make_node_link(io, std::move(config), 1);
}

Subscriber::~Subscriber() { close(); }

void Subscriber::subscribe(const std::string& channel) {
  if (!channels_.insert(channel).second) return;
  if (up_) send_subscribe(channel);
}

void Subscriber::unsubscribe(const std::string& channel) {
  if (channels_.erase(channel) == 0 || !up_) return;  // down: on_up will not renew it
  const std::string_view words[] = {"SUNSUBSCRIBE", channel};
  std::string cmd;
  append_command(cmd, words);
  link_->send(channel, std::move(cmd), [](std::error_code, Reply) {});
}

void Subscriber::send_subscribe(const std::string& channel) {
  const std::string_view words[] = {"SSUBSCRIBE", channel};
  std::string cmd;
  append_command(cmd, words);
  ++unconfirmed_;
  link_->send(channel, std::move(cmd), [this](std::error_code ec, Reply) {
    if (ec) {  // the connection dropped; on_up subscribes again
      up_ = false;
      return;
    }
    if (--unconfirmed_ == 0) on_ready_();
  });
}

void Subscriber::close() {
  if (link_) link_->close();
}

}  // namespace redisched::redis
