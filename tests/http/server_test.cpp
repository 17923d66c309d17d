// The HTTP transport on its own: a handler that throws is answered 500 and the server goes on;
// a bodiless status is written without the body a handler gave it.
#include "http/server.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>

namespace srv = deviceshadow::http;

namespace {

// Sends one request on a new connection and returns everything the server answers until it
// closes the connection.
std::string exchange(unsigned short port, const std::string& request) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "connect failed";
  }
  EXPECT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<std::size_t>(n));
  close(fd);
  return out;
}

TEST(HttpServer, HandlerMistakesNeverEndTheServer) {
  srv::HttpServerOptions options;
  options.port = 0;
  options.workers = 2;
  srv::HttpServer server(
      options,
      [](const srv::HttpRequest& r) -> srv::HttpResponse {
        if (r.target == "/throw") throw std::runtime_error("handler bug");
        if (r.target == "/204") return {204, "application/json", "a body a 204 must not have", {}};
        return {200, "application/json", R"({"ok":true})", {}};
      },
      [](int status, const std::string& message) {
        return srv::HttpResponse{status, "application/json", R"({"error":")" + message + R"("})", {}};
      });
  std::thread runner([&] { server.run(); });
  const std::string thrown = exchange(server.port(), "GET /throw HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(thrown.rfind("HTTP/1.1 500", 0), 0u) << thrown;
  EXPECT_NE(thrown.find(R"({"error":"internal error"})"), std::string::npos) << thrown;
  const std::string fine = exchange(server.port(), "GET /fine HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(fine.rfind("HTTP/1.1 200", 0), 0u) << fine;
  const std::string empty = exchange(server.port(), "GET /204 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  EXPECT_EQ(empty.rfind("HTTP/1.1 204", 0), 0u) << empty;
  EXPECT_EQ(empty.find("a body"), std::string::npos) << empty;
  server.stop();
  runner.join();
}

}  // namespace
