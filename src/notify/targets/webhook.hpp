// The webhook target's two clients (make_webhook_target picks one per registration): plain
// http:// goes over this project's own HTTP/1.1 client on non-blocking sockets
// (plain_webhook.cpp), which halves the CPU that delivering an event takes; https://, a proxy
// or credentials in the URL go through libcurl (webhook.cpp). Both behave as
// make_webhook_target says.
#pragma once

#include "notify/target.hpp"

#include <memory>
#include <string_view>

namespace deviceshadow::notify {

// The outcome of an HTTP answer: 2xx is delivered; 408, 429 and 5xx are retried; any other
// status is rejected. Failures carry the status and the start of the body.
DeliveryResult webhook_answer(long status, std::string_view body);

std::unique_ptr<Target> make_curl_webhook(const WebhookTarget& target);
// Null when the registration needs libcurl: a URL other than http:// without credentials, a
// proxy set in the environment (http_proxy, all_proxy, ALL_PROXY), or a header of its own
// that the client writes itself (Host, Content-Length, Transfer-Encoding, Connection, Expect).
std::unique_ptr<Target> make_plain_webhook(const WebhookTarget& target);

}  // namespace deviceshadow::notify
