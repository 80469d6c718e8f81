// main() of the test binaries that need Redis: starts one redis-server for
// the binary; a test that needs its own (restarts, AOF) makes a RedisServer.
#include <gtest/gtest.h>

namespace redisched::test {
::testing::Environment* make_shared_redis_environment();
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(redisched::test::make_shared_redis_environment());
  return RUN_ALL_TESTS();
}
