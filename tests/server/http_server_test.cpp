// The HTTP transport on its own: a handler that throws is answered 500 and the server goes on.
#include "server/http.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>

namespace srv = deviceshadow::server;

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

TEST(HttpServer, AHandlerThatThrowsIsAnswered500AndTheServerGoesOn) {
  srv::HttpServerOptions options;
  options.port = 0;
  options.workers = 2;
  srv::HttpServer server(
      options,
      [](const srv::HttpRequest& r) -> srv::HttpResponse {
        if (r.target == "/throw") throw std::runtime_error("handler bug");
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
  server.stop();
  runner.join();
}

}  // namespace
