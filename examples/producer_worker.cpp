// The smallest producer and worker: schedules a reminder three days ahead,
// cancels it, then puts a job and handles it.
//   build/example_producer_worker [redis-url]
#include <redisched/client.h>

#include <chrono>
#include <iostream>

int main(int argc, char** argv) try {
  redisched::Client client({.redis_url = argc > 1 ? argv[1] : "redis://127.0.0.1:6379"});

  client.put("emails", {.id = "need_some_help_email_42",
                        .body = "Need some help?",
                        .delay = std::chrono::hours(72)});
  // ... the user acted first:
  client.remove("emails", "need_some_help_email_42");

  client.put("emails", {.id = "welcome_42", .body = "Welcome!", .priority = 5});
  auto r = client.reserve("emails", 10, std::chrono::seconds(30));
  for (const auto& job : r.jobs) {
    std::cout << "sending " << job.id << ": " << job.body << "\n";
    client.ack("emails", job.id, job.token);
  }
  return 0;
} catch (const redisched::Error& e) {
  std::cerr << "example: " << e.what() << "\n";
  return 1;
}
