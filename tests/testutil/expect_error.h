// EXPECT_REDISCHED_ERROR(statement, code, words): statement throws a
// redisched::Error with that code and a message containing words.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <string_view>

#include "redisched/error.h"

namespace redisched::test {

template <class Call>
void expect_error(Call&& call, Errc code, std::string_view words, const char* file, int line) {
  const ::testing::ScopedTrace trace(file, line, "expected a redisched::Error here");
  try {
    call();
    ADD_FAILURE() << "no error; expected one saying '" << words << "'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_NE(std::string_view(e.what()).find(words), std::string_view::npos) << e.what();
  }
}

}  // namespace redisched::test

#define EXPECT_REDISCHED_ERROR(statement, code, words) \
  ::redisched::test::expect_error([&] { statement; }, code, words, __FILE__, __LINE__)
