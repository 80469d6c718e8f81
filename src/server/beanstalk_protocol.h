// beanstalkd's protocol (1.12, doc/protocol.txt), sans-io: the framing of
// command lines and job bodies, and the parsing of each command, with
// beanstalkd's own refusals. No I/O and no Redis: the listener
// (beanstalk.h) feeds it bytes; the fuzzer feeds it anything.
//
// What beanstalkd does, and so this does (checked against Debian's
// beanstalkd by tests/beanstalk/conformance_test.py):
//  - a line is at most 224 bytes with its CRLF; a longer one is answered
//    BAD_FORMAT, its first 224 bytes dropped and the rest of it skipped up
//    to the next CRLF;
//  - a put's body is its announced bytes and a CRLF: other bytes there are
//    answered EXPECTED_CRLF (the bytes+2 are consumed); a body over the
//    max job size is answered JOB_TOO_BIG and its bytes+2 skipped;
//  - a put line that is refused leaves its body to be read as commands.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace redisched::server::beanstalk {

inline constexpr std::size_t kLineMax = 224;  // with its CRLF
inline constexpr std::size_t kNameMax = 200;  // a tube's name

enum class Verb {
  put,
  use,
  reserve,
  reserve_with_timeout,
  reserve_job,
  remove,  // "delete"
  release,
  bury,
  touch,
  watch,
  ignore,
  peek,
  peek_ready,
  peek_delayed,
  peek_buried,
  kick,
  kick_job,
  stats_job,
  stats_tube,
  stats,
  list_tubes,
  list_tube_used,
  list_tubes_watched,
  pause_tube,
  quit,
};
// Its name on the wire ("delete" for Verb::remove).
std::string_view verb_name(Verb v);
inline constexpr int kVerbs = static_cast<int>(Verb::quit) + 1;

// One command with its arguments; which fields a verb fills is its line's
// (protocol.txt): id for the commands on one job; tube for use, watch,
// ignore, stats-tube, pause-tube; pri, delay, ttr, bytes for put (and pri,
// delay for release, pri for bury); bound for kick; timeout for
// reserve-with-timeout (negative: none, as beanstalkd reads it); delay for
// pause-tube.
struct Command {
  Verb verb = Verb::quit;
  std::uint64_t id = 0;
  std::string tube;
  std::uint32_t pri = 0;
  std::uint32_t delay = 0;  // seconds
  std::uint32_t ttr = 0;    // seconds, as sent (0 is read as 1 later)
  std::uint64_t bytes = 0;
  std::uint64_t bound = 0;
  std::int64_t timeout = -1;  // seconds
  std::string body;           // a put's, once read
};

// Replies the parser itself gives.
inline constexpr std::string_view kBadFormat = "BAD_FORMAT\r\n";
inline constexpr std::string_view kUnknownCommand = "UNKNOWN_COMMAND\r\n";
inline constexpr std::string_view kExpectedCrlf = "EXPECTED_CRLF\r\n";
inline constexpr std::string_view kJobTooBig = "JOB_TOO_BIG\r\n";

// Parses one command line, its CRLF removed: the command, or the reply that
// refuses it (kBadFormat or kUnknownCommand).
std::variant<Command, std::string_view> parse_line(std::string_view line);

// Whether name is a tube name the protocol allows: 1..200 of
// A-Za-z0-9-+/;.$_() not starting with '-'.
bool valid_tube_name(std::string_view name);

// Cuts a connection's bytes into commands: feed() what was read, then take
// next() until it gives nothing. Bounded: it holds at most one line
// (kLineMax) or one body (max_job_size + 2) beyond what next() consumed.
class Framer {
 public:
  explicit Framer(std::size_t max_job_size) : max_job_size_(max_job_size) {}

  // A command to run, or a reply to send at once (a refusal).
  using Event = std::variant<Command, std::string_view>;

  void feed(std::string_view bytes) { in_.append(bytes); }
  // The next command or refusal, or nullopt when more bytes are needed.
  std::optional<Event> next();
  // Bytes buffered and not yet consumed.
  std::size_t buffered() const { return in_.size() - pos_; }
  // Whether a command has begun and not ended (a partial line or body): a
  // connection that stops here is slow, not idle.
  bool mid_command() const { return buffered() > 0 || state_ != State::line; }

 private:
  enum class State { line, skip_line, body, skip_body };
  void compact();

  std::size_t max_job_size_;
  std::string in_;
  std::size_t pos_ = 0;  // first byte not consumed
  State state_ = State::line;
  Command put_;             // State::body: the put waiting for its body
  std::uint64_t skip_ = 0;  // State::skip_body: bytes still to drop
};

}  // namespace redisched::server::beanstalk
