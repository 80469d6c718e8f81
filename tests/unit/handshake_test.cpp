// A connection's handshake without a socket: which commands go out, in
// which order, for which endpoint, and what each reply Redis may give makes
// of the connection (ready, loads the library, or lost with which Errc).
#include "redis/handshake.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "redis/command.h"
#include "redis/library.h"
#include "testutil/replies.h"

namespace redisched::redis {
namespace {

using test::array;
using test::integer;
using test::text;

const Reply kOk = text("OK", Reply::Type::status);

Reply error(const std::string& words) { return text(words, Reply::Type::error); }

Endpoint plain() {
  Endpoint e;
  e.host = "127.0.0.1";
  e.port = 6379;
  return e;
}

// Runs the handshake to its end with the replies given, in turn; returns
// the commands it sent.
std::vector<std::string> run(Handshake& h, const std::vector<Reply>& replies) {
  std::vector<std::string> sent;
  std::size_t i = 0;
  while (auto command = h.next()) {
    sent.push_back(*command);
    if (i == replies.size()) {
      ADD_FAILURE() << "no reply left for command " << sent.size();
      break;
    }
    h.reply(replies[i++]);
  }
  EXPECT_EQ(i, replies.size()) << "replies left over";
  return sent;
}

// The Errc and message of the ConnectionLost that reply r throws.
ConnectionLost lost_by(Handshake& h, const Reply& r) {
  try {
    h.reply(r);
  } catch (const ConnectionLost& lost) {
    return lost;
  }
  ADD_FAILURE() << "the reply was taken";
  return {Errc::ok, ""};
}

// (Functions, not globals: kLibraryCode is another file's global, maybe not
// yet initialised when this file's are.)
std::string version() { return encode_command({"FCALL", "redisched_version", "0"}); }
std::string load() { return encode_command({"FUNCTION", "LOAD", "REPLACE", kLibraryCode}); }

TEST(Handshake, ACurrentLibraryIsReadyAfterOneCall) {
  const Endpoint e = plain();
  Handshake h(e, true, "127.0.0.1:6379");
  EXPECT_EQ(run(h, {integer(kLibraryVersion)}), std::vector<std::string>{version()});
}

TEST(Handshake, ANewerLibraryIsKept) {
  const Endpoint e = plain();
  Handshake h(e, true, "127.0.0.1:6379");
  EXPECT_EQ(run(h, {integer(kLibraryVersion + 1)}), std::vector<std::string>{version()});
}

TEST(Handshake, AnOlderOrMissingLibraryIsLoaded) {
  const Endpoint e = plain();
  Handshake older(e, true, "");
  EXPECT_EQ(run(older, {integer(kLibraryVersion - 1), kOk}),
            (std::vector<std::string>{version(), load()}));
  Handshake missing(e, true, "");
  EXPECT_EQ(run(missing, {error("ERR Function not found"), kOk}),
            (std::vector<std::string>{version(), load()}));
}

TEST(Handshake, EveryStepInOrder) {
  Endpoint e = plain();
  e.user = "app";
  e.password = "secret";
  e.db = 3;
  e.sentinels.push_back({"127.0.0.1", 26379});
  e.service = "main";
  Handshake h(e, true, "10.0.0.1:6379");
  EXPECT_EQ(
      run(h, {kOk, array({text("master"), integer(0), array({})}), kOk, integer(kLibraryVersion)}),
      (std::vector<std::string>{encode_command({"AUTH", "app", "secret"}), encode_command({"ROLE"}),
                                encode_command({"SELECT", "3"}), version()}));
}

TEST(Handshake, APasswordAloneAuthenticatesTheDefaultUser) {
  Endpoint e = plain();
  e.password = "secret";
  Handshake h(e, false, "");
  EXPECT_EQ(run(h, {kOk}), std::vector<std::string>{encode_command({"AUTH", "secret"})});
}

TEST(Handshake, ASubscriberWithNothingToSayIsReadyAtOnce) {
  const Endpoint e = plain();
  Handshake h(e, false, "");
  EXPECT_FALSE(h.next());
}

TEST(Handshake, RefusalsEndTheConnectionWithTheirCode) {
  Endpoint e = plain();
  e.password = "secret";
  e.db = 2;
  {
    Handshake h(e, true, "");
    const auto lost = lost_by(h, error("WRONGPASS invalid username-password pair"));
    EXPECT_EQ(lost.code, Errc::auth);
    EXPECT_EQ(lost.message, "AUTH refused: WRONGPASS invalid username-password pair");
  }
  {
    Handshake h(e, true, "");
    h.reply(kOk);
    const auto lost = lost_by(h, error("ERR DB index is out of range"));
    EXPECT_EQ(lost.code, Errc::auth);
    EXPECT_EQ(lost.message, "SELECT 2: ERR DB index is out of range");
  }
}

TEST(Handshake, ADemotedPrimaryIsNotUsed) {
  Endpoint e = plain();
  e.sentinels.push_back({"127.0.0.1", 26379});
  e.service = "main";
  Handshake h(e, true, "10.0.0.1:6379");
  ASSERT_EQ(h.next(), encode_command({"ROLE"}));
  const auto lost = lost_by(h, array({text("slave"), text("10.0.0.2")}));
  EXPECT_EQ(lost.code, Errc::connection);
  EXPECT_EQ(lost.message,
            "10.0.0.1:6379, named by the sentinels, is not the primary of 'main' (yet)");
}

TEST(Handshake, WhatTheVersionCheckMayMeet) {
  const Endpoint e = plain();
  const struct {
    const char* said;
    Errc code;
    std::string message;
  } cases[] = {
      {"NOAUTH Authentication required.", Errc::auth,
       "Redis requires a password: give it in the URL"},
      {"LOADING Redis is loading the dataset in memory", Errc::connection,
       "Redis is not ready yet: LOADING Redis is loading the dataset in memory"},
      {"BUSY Redis is busy running a script.", Errc::connection,
       "Redis is not ready yet: BUSY Redis is busy running a script."},
      {"NOPERM this user has no permissions to run the 'fcall' command", Errc::server,
       "checking the Functions library: NOPERM this user has no permissions to run the 'fcall' "
       "command"},
  };
  for (const auto& c : cases) {
    Handshake h(e, true, "");
    const auto lost = lost_by(h, error(c.said));
    EXPECT_EQ(lost.code, c.code) << c.said;
    EXPECT_EQ(lost.message, c.message);
  }
  Handshake h(e, true, "");
  h.reply(error("ERR Function not found"));
  const auto lost = lost_by(h, error("ERR Error compiling function"));
  EXPECT_EQ(lost.code, Errc::server);
  EXPECT_EQ(lost.message, "loading the Functions library: ERR Error compiling function");
}

TEST(Handshake, AReplyAfterTheEndIsAProtocolError) {
  const Endpoint e = plain();
  Handshake h(e, false, "");
  EXPECT_EQ(lost_by(h, kOk).code, Errc::protocol);
}

}  // namespace
}  // namespace redisched::redis
