// docs/http-api.md's table of errors ("Behind the 409 `conflict`...") against
// the code it quotes: core::kErrorWords (a reply's word -> Errc) and
// server::http_error (Errc -> status and code). Every word of the table and
// every Errc appears in the docs, and each row says what the code does.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/codec.h"
#include "server/fields.h"

namespace redisched {
namespace {

const std::map<std::string, Errc>& errc_names() {
  static const std::map<std::string, Errc> names = {
      {"invalid_argument", Errc::invalid_argument},
      {"connection", Errc::connection},
      {"auth", Errc::auth},
      {"timeout", Errc::timeout},
      {"protocol", Errc::protocol},
      {"server", Errc::server},
      {"closed", Errc::closed},
      {"bad_format", Errc::bad_format},
      {"conflict", Errc::conflict},
  };
  return names;
}

struct Row {
  std::vector<std::string> words;  // the upper-case words in backticks
  std::string errc, status, code;
};

std::string unquote(std::string s) {
  s = std::regex_replace(s, std::regex(R"(^\s*`?|`?\s*$)"), "");
  return s;
}

std::vector<Row> documented_rows() {
  std::ifstream in(REDISCHED_DOCS_DIR "/http-api.md");
  EXPECT_TRUE(in) << "cannot read docs/http-api.md";
  std::string line;
  bool inside = false;
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    if (line.find("| Redis answers | the Client's `Errc` | status | code |") != std::string::npos) {
      inside = true;
      continue;
    }
    if (!inside) continue;
    if (line.find("|---") != std::string::npos) continue;
    if (line.find('|') == std::string::npos) break;
    std::vector<std::string> cells;
    std::stringstream ss(line);
    std::string cell;
    while (std::getline(ss, cell, '|')) cells.push_back(cell);
    // "  | a | b | c | d |" splits into "  ", a, b, c, d
    if (cells.size() < 5) break;
    Row r;
    static const std::regex word(R"(`([A-Z][A-Z_]+)`)");
    for (std::sregex_iterator it(cells[1].begin(), cells[1].end(), word), end; it != end; ++it) {
      r.words.push_back((*it)[1]);
    }
    r.errc = unquote(cells[2]);
    r.status = unquote(cells[3]);
    r.code = unquote(cells[4]);
    rows.push_back(r);
  }
  return rows;
}

TEST(ErrorTableTest, TheDocsQuoteTheWordsTheCodesAndTheStatuses) {
  const auto rows = documented_rows();
  ASSERT_GE(rows.size(), 8u) << "the table was not found in docs/http-api.md";
  std::set<std::string> words_seen;
  std::set<Errc> errcs_seen;
  for (const auto& r : rows) {
    ASSERT_EQ(errc_names().count(r.errc), 1u) << "not an Errc: " << r.errc;
    const Errc errc = errc_names().at(r.errc);
    errcs_seen.insert(errc);
    for (const auto& w : r.words) {
      words_seen.insert(w);
      EXPECT_EQ(core::error_from_reply(w + " why").code(), errc) << w;
    }
    const auto http = server::http_error(Error(errc, "why"));
    EXPECT_EQ(std::to_string(static_cast<unsigned>(http.status)), r.status) << r.errc;
    EXPECT_EQ(http.code, r.code) << r.errc;
  }
  for (const auto& w : core::kErrorWords)
    EXPECT_EQ(words_seen.count(std::string(w.word)), 1u) << w.word;
  for (const auto& [name, errc] : errc_names()) EXPECT_EQ(errcs_seen.count(errc), 1u) << name;
}

}  // namespace
}  // namespace redisched
