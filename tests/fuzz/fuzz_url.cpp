// libFuzzer: Redis URLs (redis://, rediss://, unix://, their parameters).
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "redis/url.h"
#include "redisched/error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    auto e = redisched::redis::parse_url(text);
    (void)e;
  } catch (const redisched::Error&) {
    // a refused URL: what a bad one must give
  }
  return 0;
}
