// The API's OpenAPI document: docs/openapi.yaml as compact JSON, generated into the build at
// build time (scripts/embed-openapi.py) and served at GET /v1/openapi.json.
#pragma once

#include <string_view>

namespace deviceshadow::api {

std::string_view openapi_json() noexcept;

}  // namespace deviceshadow::api
