#include "worker/calls.h"

namespace redisched::worker {

void Shared::count_call(int delta) {
  std::lock_guard lock(mu);
  calls += delta;
  changed.notify_all();
}

void Shared::count_held(int delta) {
  std::lock_guard lock(mu);
  held += delta;
  changed.notify_all();
}

bool transient(const Error& e) { return e.code() == Errc::connection || e.code() == Errc::timeout; }

}  // namespace redisched::worker
