// libFuzzer: bytes on the beanstalkd port, to its framing and parser
// (server/beanstalk_protocol.h). The first byte sets how the rest arrives:
// in pieces of 1..64 bytes, as a slow client sends them. What must hold:
// the same events in the same order as when the bytes come at once; a
// put's body of its announced size, never over the max job size; the
// buffer bounded by a line or a body and one piece.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "server/beanstalk_protocol.h"

namespace bs = redisched::server::beanstalk;

namespace {

constexpr std::size_t kMaxJob = 300;

std::string describe(const bs::Framer::Event& ev) {
  if (const auto* r = std::get_if<std::string_view>(&ev)) return std::string(*r);
  const auto& c = std::get<bs::Command>(ev);
  if (c.verb == bs::Verb::put && c.body.size() != c.bytes) std::abort();
  if (c.body.size() > kMaxJob) std::abort();
  return std::string(bs::verb_name(c.verb)) + " " + std::to_string(c.id) + " " + c.tube + " " +
         std::to_string(c.pri) + " " + std::to_string(c.timeout) + " " + c.body;
}

std::vector<std::string> run(std::string_view input, std::size_t piece) {
  bs::Framer f(kMaxJob);
  std::vector<std::string> out;
  for (std::size_t at = 0; at < input.size(); at += piece) {
    f.feed(input.substr(at, piece));
    while (auto ev = f.next()) out.push_back(describe(*ev));
    if (f.buffered() > kMaxJob + 2 + bs::kLineMax + piece) std::abort();
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t piece = 1 + data[0] % 64;
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (run(input, piece) != run(input, input.size() + 1)) std::abort();
  return 0;
}
