// beanstalkd, a peer measured in the same run as the core (redisched_bench
// --peers): its own server process, driven over its text protocol the way
// its clients drive it, one command at a time per connection.
#pragma once

#include <string>

namespace redisched::bench {

struct PeerFigures {
  double put = 0;             // jobs/s, one `put` per call
  double reserve_delete = 0;  // jobs/s, `reserve-with-timeout 0` then `delete`
  double cpu_seconds = 0;     // the server's, both phases (beanstalkd_figures only)
};

// Starts beanstalkd from PATH (in memory, no binlog) on a free port, puts
// jobs 100-byte bodies (bench::job) over `connections` connections with one
// command in flight on each, then reserves and deletes them all the same
// way, and stops it. Throws if beanstalkd is missing or answers otherwise.
PeerFigures beanstalkd_figures(long jobs, int connections);

// The same load against a server that speaks beanstalkd's protocol at
// host:port (beanstalkd, or redisched serve --beanstalk), in its default
// tube, which must be empty.
PeerFigures beanstalk_figures_at(const std::string& host, unsigned short port, long jobs,
                                 int connections);

}  // namespace redisched::bench
