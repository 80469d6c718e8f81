// Prints the server's route table (src/server/api.cpp), one method and path
// a line, then the query parameters the route takes ("*": any, the
// original servers' routes), for tests/server/openapi_test.py.
#include <boost/beast/http/verb.hpp>
#include <iostream>

#include "server/api.h"

int main() {
  for (const auto& route : redisched::server::api_routes()) {
    for (const auto& m : route.methods) {
      std::cout << boost::beast::http::to_string(m.verb) << ' ' << route.path << ' ';
      if (route.query == nullptr) {
        std::cout << '*';
      } else {
        const char* sep = "";
        for (const auto& q : *route.query) {
          std::cout << sep << q;
          sep = ",";
        }
      }
      std::cout << (route.open ? " open" : " token") << '\n';
    }
  }
}
