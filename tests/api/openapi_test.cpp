// docs/openapi.yaml, as built into shadowd, documents exactly the routes the API serves: every
// path and method of Api::routes() (the table routing takes its methods from) and no other.
#include "api/api.hpp"
#include "api/openapi.hpp"

#include "deviceshadow/json.hpp"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <utility>

namespace api = deviceshadow::api;
namespace json = deviceshadow::json;

namespace {

using Operations = std::set<std::pair<std::string, std::string>>;  // path template, method

const json::object& document() {
  static const json::value doc = deviceshadow::parse_json(api::openapi_json());
  return doc.as_object();
}

TEST(OpenApi, IsAnOpenApi31Document) {
  EXPECT_EQ(document().at("openapi").as_string(), "3.1.0");
  EXPECT_TRUE(document().at("paths").as_object().contains("/v1/openapi.json"));
}

TEST(OpenApi, DocumentsExactlyTheServedRoutes) {
  static constexpr std::string_view kMethods[] = {"get", "put", "post", "delete", "patch", "head", "options", "trace"};
  Operations documented;
  for (const auto& [path, item] : document().at("paths").as_object()) {
    for (std::string_view method : kMethods) {
      if (!item.as_object().contains(method)) continue;
      std::string upper(method);
      for (char& c : upper) c = static_cast<char>(c - 'a' + 'A');
      documented.emplace(std::string(path), upper);
    }
  }
  Operations served;
  for (const api::Route& route : api::Api::routes()) {
    std::string_view methods = route.methods;
    while (!methods.empty()) {
      std::size_t comma = methods.find(',');
      served.emplace(std::string(route.path), std::string(methods.substr(0, comma)));
      methods = comma == std::string_view::npos ? std::string_view() : methods.substr(comma + 2);
    }
  }
  for (const auto& [path, method] : served) {
    EXPECT_TRUE(documented.contains({path, method})) << method << " " << path << " is served but not in docs/openapi.yaml";
  }
  for (const auto& [path, method] : documented) {
    EXPECT_TRUE(served.contains({path, method})) << method << " " << path << " is in docs/openapi.yaml but not served";
  }
}

}  // namespace
