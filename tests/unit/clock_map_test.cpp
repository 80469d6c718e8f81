// ClockMap: Redis's clock mapped onto the local steady clock.
#include "worker/clock_map.h"

#include <gtest/gtest.h>

namespace redisched::worker {
namespace {

using Steady = ClockMap::Steady;
using std::chrono::milliseconds;

TEST(ClockMapTest, UnknownUntilAReplySaidTheTime) {
  ClockMap c;
  EXPECT_FALSE(c.known());
  c.observe(1'000'000, Steady::time_point(milliseconds(500)));
  EXPECT_TRUE(c.known());
  EXPECT_EQ(c.redis_now(Steady::time_point(milliseconds(500))), 1'000'000);
  EXPECT_EQ(c.redis_now(Steady::time_point(milliseconds(750))), 1'000'250);
}

TEST(ClockMapTest, LocalTimeIsTheInverseOfRedisNow) {
  ClockMap c;
  c.observe(5'000'000, Steady::time_point(milliseconds(1000)));
  EXPECT_EQ(c.local_time(5'000'300), Steady::time_point(milliseconds(1300)));
  EXPECT_EQ(c.redis_now(c.local_time(5'000'300)), 5'000'300);
}

// A reply that took longer to arrive reads an earlier clock: the largest
// bound wins, so a slow reply does not pull the estimate back.
TEST(ClockMapTest, TheLargestBoundWins) {
  ClockMap c;
  c.observe(1000, Steady::time_point(milliseconds(100)));  // offset 900
  c.observe(1100, Steady::time_point(milliseconds(205)));  // late reply: 895
  // 900, less 0.01 ms of decay: not pulled back to 895.
  EXPECT_NEAR(c.redis_now(Steady::time_point(milliseconds(300))), 1200, 1);
  c.observe(1210, Steady::time_point(milliseconds(300)));  // a tighter bound: 910
  EXPECT_EQ(c.redis_now(Steady::time_point(milliseconds(300))), 1210);
}

// The bound decays by 0.1 ms a second, so a clock that drifts back is
// followed, slowly.
TEST(ClockMapTest, ABoundDecaysSlowly) {
  ClockMap c;
  c.observe(10'000, Steady::time_point(milliseconds(0)));  // offset 10,000
  // 100 s later Redis's clock reads 20 ms less than the offset says: the
  // estimate has decayed by 10 ms only.
  const auto later = Steady::time_point(milliseconds(100'000));
  c.observe(109'980, later);
  EXPECT_EQ(c.redis_now(later), 109'990);
  // Another 100 s: decayed down to the new clock.
  const auto then = Steady::time_point(milliseconds(200'000));
  c.observe(209'980, then);
  EXPECT_EQ(c.redis_now(then), 209'980);
}

}  // namespace
}  // namespace redisched::worker
