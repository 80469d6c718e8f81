// REDISCHED_WRAP, for the files that define the Client's calls (client.cpp,
// schedules.cpp, flows.cpp), each of which #undefs it at its end. No
// include guard: in a unity build those files share one translation unit,
// and each must see the macro again.
#include "core/client_impl.h"

// Every operation: the callback form does the work; the synchronous form
// waits for it (the token forms: redisched/detail/async_calls.h).
#define REDISCHED_WRAP(T, name, params, args)                                      \
  T Client::name params {                                                          \
    return client_detail::wait_for<T>(*impl_->runtime,                             \
                                      [&](Callback<T> cb) { name##_async args; }); \
  }
