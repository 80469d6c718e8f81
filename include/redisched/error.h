// Errors of redisched: one enum, registered as a std::error_code category, and
// one exception type that carries it with a message naming what went wrong.
// Synchronous calls throw Error; asynchronous ones hand a Result<T>, which
// holds a value or the Error (value() throws it). Both are plain values.
#pragma once

#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <variant>

namespace redisched {

// What went wrong. docs/http-api.md ("Errors") has the table of which
// answer of Redis is which, and the HTTP status of each.
enum class Errc {
  ok = 0,
  invalid_argument,  // the call's arguments were refused (nothing was changed)
  connection,        // Redis could not be reached, the connection was lost, or
                     // Redis cannot serve for now (LOADING, BUSY, ...)
  auth,              // Redis refused the credentials (AUTH) or the database (SELECT)
  timeout,           // Redis did not answer in time
  protocol,          // Redis answered something this client cannot read
  server,            // Redis answered with an error this client does not map
  closed,            // the client was closed
  bad_format,        // a stored job has a format this version does not read
  conflict,          // the topic cannot take the call as it is now (its counter
                     // used up, shards changed while it holds jobs, limits or
                     // schedules on a spread topic); nothing was changed
};

namespace detail {
struct ErrorAccess;  // the library's own reading of an Error (not part of the API)
}

const std::error_category& error_category() noexcept;

inline std::error_code make_error_code(Errc e) noexcept {
  return {static_cast<int>(e), error_category()};
}

// Thrown by the synchronous API; carried by Result in the asynchronous one.
class Error : public std::runtime_error {
 public:
  Error(Errc code, const std::string& message) : std::runtime_error(message), code_(code) {}
  Errc code() const noexcept { return code_; }

 private:
  friend struct detail::ErrorAccess;
  Errc code_;
  // Which error reply of the library or Redis it came from, when it did:
  // the Client decides on it (a spread topic, an older stored format),
  // never on the message's text.
  unsigned char word_ = 0;
};

// A value or the Error that prevented it (what asynchronous calls deliver).
template <class T>
class Result {
 public:
  Result(T value) : v_(std::move(value)) {}      // NOLINT(google-explicit-constructor)
  Result(Error error) : v_(std::move(error)) {}  // NOLINT(google-explicit-constructor)

  bool ok() const noexcept { return v_.index() == 0; }
  // REQUIRES: !ok()
  const Error& error() const { return std::get<1>(v_); }
  // Returns the value, or throws the Error.
  T& value() & {
    if (!ok()) throw std::get<1>(v_);
    return std::get<0>(v_);
  }
  T&& value() && {
    if (!ok()) throw std::get<1>(v_);
    return std::get<0>(std::move(v_));
  }

 private:
  std::variant<T, Error> v_;
};

}  // namespace redisched

template <>
struct std::is_error_code_enum<redisched::Errc> : std::true_type {};
