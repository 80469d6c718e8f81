// Text checks shared by every face: well-formed UTF-8, and making any bytes
// safe to put in JSON or a log line.
#pragma once

#include <string>
#include <string_view>

namespace redisched::core {

// Well-formed UTF-8 (RFC 3629): no overlong forms, surrogates or code points
// above U+10FFFF.
bool valid_utf8(std::string_view s);

// s with every byte that is not part of well-formed UTF-8 written as \xNN,
// for text that must go into JSON (error messages echo what they refuse).
std::string printable(std::string_view s);

// s with A-Z as a-z (host names, the dashboard's filter of topic names).
std::string ascii_lower(std::string s);

}  // namespace redisched::core
