// The ceiling for the HTTP benchmark: shadowd's own transport (Beast, same options) with a
// handler that returns a fixed 200. Usage: http_ceiling PORT
#include "http/server.hpp"

#include <cstdio>
#include <string>

int main(int argc, char** argv) {
  deviceshadow::http::HttpServerOptions options;
  options.port = static_cast<unsigned short>(argc > 1 ? std::stoi(argv[1]) : 8090);
  deviceshadow::http::HttpServer server(
      options, [](const deviceshadow::http::HttpRequest&) { return deviceshadow::http::HttpResponse{200, "application/json", "{}", {}}; },
      [](int status, const std::string&) { return deviceshadow::http::HttpResponse{status, "application/json", "{}", {}}; });
  std::fprintf(stderr, "listening address=127.0.0.1:%u\n", server.port());
  server.run();
}
