// libFuzzer: RESP bytes through the reader, then every reply through every
// decoder of the library's replies (core/codec.h): a reply Redis (or a peer
// pretending to be one) sends can only give a value or an Error.
#include <cstddef>
#include <cstdint>

#include "core/codec.h"
#include "redis/resp_reader.h"
#include "redisched/error.h"

namespace {

template <class F>
void decode(F&& f) {
  try {
    f();
  } catch (const redisched::Error&) {
    // an unreadable reply: refused with an Error, as it must be
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace redisched;
  redis::RespReader reader;
  try {
    reader.feed(reinterpret_cast<const char*>(data), size);
    while (auto reply = reader.next()) {
      const redis::Reply& r = *reply;
      decode([&] { core::parse_put(r); });
      decode([&] { core::parse_put_many(r); });
      decode([&] { core::parse_get(r); });
      decode([&] { core::parse_reserve(r, true); });
      decode([&] { core::parse_reserve(r, false); });
      decode([&] { core::parse_outcome(r); });
      decode([&] { core::parse_outcomes(r); });
      decode([&] { core::parse_fail(r); });
      decode([&] { core::parse_touch(r); });
      decode([&] { core::parse_stats(r); });
      decode([&] { core::parse_list(r); });
      decode([&] { core::parse_requeue(r); });
      decode([&] { core::parse_integer(r); });
      if (r.is_error()) (void)core::error_from_reply(r.str);
    }
  } catch (const Error&) {
    // not RESP
  }
  return 0;
}
