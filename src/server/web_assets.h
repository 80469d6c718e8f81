// The dashboard's files (web/), built into the binary: serve needs no
// files next to it.
#pragma once

#include <string_view>
#include <vector>

namespace redisched::server {

struct WebAsset {
  std::string_view path;  // "/index.html"
  std::string_view content;
};

const std::vector<WebAsset>& web_assets();

}  // namespace redisched::server
