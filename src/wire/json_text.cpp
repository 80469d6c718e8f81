#include "wire/json_text.h"

#include <boost/json/basic_parser_impl.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>
#include <charconv>
#include <cmath>
#include <set>
#include <vector>

namespace redisched::wire {
namespace json = boost::json;

namespace {

// boost::json::basic_parser's handler: checks the keys of each object and
// the range of each number, and writes the value it is asked for (a
// top-level member, or the whole text) back as compact JSON, each number
// as its text spells it.
class Scanner {
 public:
  static constexpr std::size_t max_array_size = -1;
  static constexpr std::size_t max_object_size = -1;
  static constexpr std::size_t max_string_size = -1;
  static constexpr std::size_t max_key_size = -1;

  Scanner(std::string_view member, bool whole) : member_(member), whole_(whole) {}
  JsonScan result;

  using ec_t = boost::system::error_code;
  bool on_document_begin(ec_t&) { return true; }
  bool on_document_end(ec_t&) { return true; }
  bool on_array_begin(ec_t&) { return open('['); }
  bool on_array_end(std::size_t, ec_t&) { return close(']'); }
  bool on_object_begin(ec_t&) {
    keys_.emplace_back();
    return open('{');
  }
  bool on_object_end(std::size_t, ec_t&) {
    keys_.pop_back();
    return close('}');
  }
  bool on_string_part(json::string_view s, std::size_t, ec_t&) {
    return !kept() || append(text_, s);
  }
  bool on_string(json::string_view s, std::size_t, ec_t&) {
    if (kept()) append(text_, s);
    begin_value();
    if (capturing_) out_ += json::serialize(json::string_view(text_));
    end_value();
    text_.clear();
    return true;
  }
  bool on_key_part(json::string_view s, std::size_t, ec_t&) { return append(text_, s); }
  bool on_key(json::string_view s, std::size_t, ec_t& ec) {
    append(text_, s);
    if (!keys_.back().insert(text_).second) {
      result.duplicate = text_;
      ec = json::error::syntax;
      return false;
    }
    if (capturing_) {
      separate();
      out_ += json::serialize(json::string_view(text_));
      out_ += ':';
      after_key_ = true;
    } else {
      take_ = !member_.empty() && depth_ == 1 && text_ == member_;
    }
    text_.clear();
    return true;
  }
  bool on_number_part(json::string_view s, ec_t&) { return !kept() || append(text_, s); }
  bool on_int64(std::int64_t, json::string_view s, ec_t&) { return number(s); }
  bool on_uint64(std::uint64_t, json::string_view s, ec_t&) { return number(s); }
  bool on_double(double d, json::string_view s, ec_t& ec) {
    if (!std::isfinite(d)) {
      result.out_of_range = true;
      ec = json::error::exponent_overflow;
      return false;
    }
    return number(s);
  }
  bool on_bool(bool b, ec_t&) { return scalar(b ? "true" : "false"); }
  bool on_null(ec_t&) { return scalar("null"); }
  bool on_comment_part(json::string_view, ec_t&) { return true; }
  bool on_comment(json::string_view, ec_t&) { return true; }

 private:
  // Whether the value being read is written out (a string's or number's
  // text is kept only then: a put's body may be a MiB).
  bool kept() const { return capturing_ || (take_ && depth_ == 1) || (whole_ && depth_ == 0); }
  static bool append(std::string& to, json::string_view s) {
    to.append(s.data(), s.size());
    return true;
  }
  // Before a value: starts the capture at the value asked for, or writes
  // the comma that separates it from the one before.
  void begin_value() {
    if (capturing_) {
      if (after_key_) {
        after_key_ = false;
      } else {
        separate();
      }
    } else if ((whole_ && depth_ == 0) || (take_ && depth_ == 1)) {
      capturing_ = true;
      take_ = false;
      out_.clear();
    }
  }
  void separate() {
    if (!first_.empty()) {
      if (!first_.back()) out_ += ',';
      first_.back() = false;
    }
  }
  // After a value: the capture ends with the value it began with.
  void end_value() {
    if (capturing_ && depth_ == (whole_ ? 0U : 1U)) {
      capturing_ = false;
      result.member = std::move(out_);
    }
  }
  bool open(char c) {
    begin_value();
    if (capturing_) {
      out_ += c;
      first_.push_back(true);
    }
    ++depth_;
    return true;
  }
  bool close(char c) {
    --depth_;
    if (capturing_) {
      out_ += c;
      first_.pop_back();
    }
    end_value();
    return true;
  }
  // text: the value as written back (it may be text_, cleared after).
  bool scalar(std::string_view text) {
    begin_value();
    if (capturing_) out_ += text;
    end_value();
    text_.clear();
    return true;
  }
  bool number(json::string_view s) {
    if (kept()) append(text_, s);
    return scalar(text_);
  }

  std::string_view member_;
  bool whole_;
  std::vector<std::set<std::string>> keys_;  // the keys of each object being read
  std::size_t depth_ = 0;                    // the containers open
  bool take_ = false;                        // the next value at depth 1 is the member asked for
  bool capturing_ = false;                   // writing into out_
  std::vector<bool> first_;                  // for each container open in out_: nothing in it yet
  bool after_key_ = false;                   // out_ ends with a key's colon
  std::string out_, text_;                   // text_: the string, key or number being read
};

JsonScan run(std::string_view text, std::string_view member, bool whole) {
  json::basic_parser<Scanner> p{json::parse_options{}, member, whole};
  boost::system::error_code ec;
  const auto n = p.write_some(false, text.data(), text.size(), ec);
  if (!ec && n < text.size()) ec = json::error::extra_data;
  JsonScan r = std::move(p.handler().result);
  if (ec) r.member.reset();
  return r;
}

void append_double(std::string& out, double d) {
  if (!std::isfinite(d)) {
    out += "null";
    return;
  }
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, d);
  out.append(buf, end);
  // 5.0 as "5.0", not "5": read back, it stays a double.
  if (std::string_view(buf, static_cast<std::size_t>(end - buf)).find_first_of(".e") ==
      std::string_view::npos) {
    out += ".0";
  }
}

template <class N>
void append_integer(std::string& out, N n) {
  char buf[24];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, n);
  out.append(buf, end);
}

void write(std::string& out, const json::value& v);

void write_members(std::string& out, const json::object& o) {
  bool first = true;
  for (const auto& [key, value] : o) {
    if (!first) out += ',';
    first = false;
    out += json::serialize(key);
    out += ':';
    write(out, value);
  }
}

void write(std::string& out, const json::value& v) {
  switch (v.kind()) {
    case json::kind::null:
      out += "null";
      return;
    case json::kind::bool_:
      out += v.get_bool() ? "true" : "false";
      return;
    case json::kind::int64:
      append_integer(out, v.get_int64());
      return;
    case json::kind::uint64:
      append_integer(out, v.get_uint64());
      return;
    case json::kind::double_:
      append_double(out, v.get_double());
      return;
    case json::kind::string:
      out += json::serialize(v.get_string());
      return;
    case json::kind::array: {
      out += '[';
      bool first = true;
      for (const auto& e : v.get_array()) {
        if (!first) out += ',';
        first = false;
        write(out, e);
      }
      out += ']';
      return;
    }
    case json::kind::object:
      out += '{';
      write_members(out, v.get_object());
      out += '}';
      return;
  }
}

}  // namespace

JsonScan scan_json(std::string_view text, std::string_view member) {
  return run(text, member, false);
}

std::optional<std::string> compact_json(std::string_view text) {
  auto r = run(text, {}, true);
  return std::move(r.member);
}

std::string to_text(const json::value& v) {
  std::string out;
  write(out, v);
  return out;
}

std::string to_text_with(const json::object& o, std::string_view name, std::string_view raw) {
  std::string out = "{";
  write_members(out, o);
  if (!o.empty()) out += ',';
  out += json::serialize(json::string_view(name));
  out += ':';
  out += raw;
  out += '}';
  return out;
}

}  // namespace redisched::wire
