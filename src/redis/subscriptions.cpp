#include "redis/subscriptions.h"

namespace redisched::redis {

std::pair<std::uint64_t, std::shared_ptr<Subscriber>> SubscriberTable::add(
    std::string channel, MessageHandler on_message, ReadyHandler on_ready) {
  auto s = std::make_shared<Subscriber>();
  s->channel = std::move(channel);
  s->on_message = std::move(on_message);
  s->on_ready = std::move(on_ready);
  std::lock_guard lock(mu_);
  const std::uint64_t id = ++next_id_;
  by_id_[id] = s;
  return {id, std::move(s)};
}

std::shared_ptr<Subscriber> SubscriberTable::remove(std::uint64_t id) {
  std::shared_ptr<Subscriber> s;
  {
    std::lock_guard lock(mu_);
    auto it = by_id_.find(id);
    if (it == by_id_.end()) return nullptr;
    s = std::move(it->second);
    by_id_.erase(it);
  }
  s->active = false;
  return s;
}

bool ChannelTable::want(std::uint64_t id, const std::shared_ptr<Subscriber>& s) {
  auto& subscribers = channels_[s->channel];
  const bool fresh = subscribers.empty();
  subscribers.emplace(id, s);
  channel_of_[id] = s->channel;
  if (fresh) return up_;
  if (confirmed_.count(s->channel) > 0) s->ready();  // the channel is there already
  return false;
}

bool ChannelTable::drop(std::uint64_t id) {
  auto it = channel_of_.find(id);
  if (it == channel_of_.end()) return false;
  const std::string channel = std::move(it->second);
  channel_of_.erase(it);
  auto c = channels_.find(channel);
  if (c == channels_.end()) return false;
  c->second.erase(id);
  if (!c->second.empty()) return false;
  channels_.erase(c);
  confirmed_.erase(channel);
  refused_.erase(channel);
  return up_;
}

std::vector<std::string> ChannelTable::up() {
  up_ = true;
  confirmed_.clear();
  refused_.clear();
  std::vector<std::string> all;
  all.reserve(channels_.size());
  for (const auto& [channel, subscribers] : channels_) all.push_back(channel);
  return all;
}

void ChannelTable::down() {
  up_ = false;
  confirmed_.clear();
}

void ChannelTable::confirmed(const std::string& channel) {
  auto c = channels_.find(channel);
  if (c == channels_.end()) return;  // nobody wants it any more
  confirmed_.insert(channel);
  for (const auto& s : subscribers(channel)) s->ready();
}

void ChannelTable::refused(const std::string& channel) {
  if (channels_.count(channel) == 0) return;
  confirmed_.erase(channel);
  refused_.insert(channel);
}

std::vector<std::string> ChannelTable::retry() {
  std::vector<std::string> again;
  if (!up_) return again;
  for (const auto& channel : refused_) {
    if (channels_.count(channel) > 0) again.push_back(channel);
  }
  refused_.clear();
  return again;
}

std::vector<std::shared_ptr<Subscriber>> ChannelTable::subscribers(
    const std::string& channel) const {
  std::vector<std::shared_ptr<Subscriber>> out;
  auto c = channels_.find(channel);
  if (c == channels_.end()) return out;
  out.reserve(c->second.size());
  for (const auto& [id, s] : c->second) out.push_back(s);
  return out;
}

}  // namespace redisched::redis
