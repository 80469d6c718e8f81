// What serve's faces (HTTP, beanstalkd) share about connections: listening
// sockets, one acceptor per address a host name resolves to; the accept
// loop; and the set of open sessions that stop() and abort() reach.
#pragma once

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace redisched {
class Runtime;
}

namespace redisched::server {

// Binds and listens on each address of address (a name: every address it
// resolves to, so that clients reach it whichever family they prefer), all
// on one port (port 0: the first one bound). Throws std::runtime_error,
// naming flag, when none could be bound; warns when some could not.
std::vector<std::unique_ptr<boost::asio::ip::tcp::acceptor>> listen_on(boost::asio::io_context& io,
                                                                       const std::string& address,
                                                                       std::uint16_t port,
                                                                       std::string_view flag);

// Accepts on each of acceptors (opened on accepting, by listen_on) until it
// closes while stopping. Each connection lives on one shard, in turn: its
// requests, and the Redis calls they make, run on that shard's thread from
// start to end. take gets each socket, on the accepting thread, and starts
// its session; it keeps what it needs alive (the loops hold it till they end).
void accept_on(Runtime& runtime, boost::asio::io_context& accepting,
               const std::vector<std::unique_ptr<boost::asio::ip::tcp::acceptor>>& acceptors,
               const std::atomic<bool>& stopping, std::string_view face,
               const std::function<void(boost::asio::ip::tcp::socket)>& take);

// The open sessions of a face, for its stop() and abort(). Whether a
// session waits between requests is a flag of its own, set and read on its
// stream's thread only, so that a request takes no lock.
class Sessions {
 public:
  using Stream = std::shared_ptr<boost::beast::tcp_stream>;

  // A session begins; the flag it returns says "waiting between requests"
  // (false until the session sets it).
  std::shared_ptr<bool> add(const Stream& stream);
  void remove(const Stream& stream);
  // stop(): each session waiting between requests stops waiting, with
  // operation_aborted. Only if it still waits when this reaches its thread:
  // by then it may be reading a request (the acks of jobs it holds), which
  // a cancel would lose.
  void cancel_idle();
  // abort(): every session's socket shuts, on its thread, so that whatever
  // it awaits ends with an error and whatever it writes next fails.
  void close_all();

 private:
  std::mutex mu_;
  std::map<Stream, std::shared_ptr<bool>> open_;  // GUARDED_BY(mu_)
};

}  // namespace redisched::server
