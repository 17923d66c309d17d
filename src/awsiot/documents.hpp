// AWS IoT Device Shadow documents and errors, independent of the transport (HTTP facade, MQTT):
// reading an update request, rendering the shadow document, the accepted document of an update
// and AWS's error codes and texts (docs/aws-iot.md).
#pragma once

#include "deviceshadow/engine.hpp"
#include "deviceshadow/error.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace deviceshadow::awsiot {

// An error as AWS names it: HTTP status (also MQTT's "code"), exception name and message.
struct AwsShadowError {
  int status = 500;
  std::string_view type;  // "ConflictException", …
  std::string message;
};
AwsShadowError aws_shadow_error(const Error& error);

// A payload that is not UTF-8, the one encoding AWS accepts: 415 UnsupportedDocumentEncodingException.
class UnsupportedDocumentEncoding final : public Error {
 public:
  UnsupportedDocumentEncoding();
};

// {"code":<status>,"message":"…"} (+ "clientToken" and "timestamp" on MQTT's rejected topics).
std::string render_error_body(const AwsShadowError& error);

// AWS's not-found error of a shadow: it names the shadow, or the thing for the classic shadow.
Error shadow_not_found(const ShadowKey& key, bool classic);

// What an update request asks, read from its JSON text. `body` keeps the parsed request, whose
// `state` the accepted document echoes.
struct UpdateRequestBody {
  json::value body;
  ShadowUpdate update;  // key left empty: the transport knows it
};
// Throws Error(invalid_json / invalid_request) with AWS's texts, UnsupportedDocumentEncoding for a
// payload that is not JSON for not being UTF-8: a missing `state`, a member of
// `state` other than desired and reported, a top-level member other than state, version and
// clientToken, a bad version or clientToken. Arrays replace whole and every accepted update
// stores (see ShadowUpdate); acknowledgement as given.
UpdateRequestBody read_update_request(std::string_view payload, const Limits& limits, bool acknowledge);

// The shadow document: {"state":{"desired"?,"reported"?,"delta"?},"metadata":{…},"version",
// "timestamp"} with empty sections and an empty delta left out.
std::string render_document(const ShadowView& view, bool shared_versions, const TimestampKeys& keys,
                            std::int64_t now_seconds);
// The accepted document of an update: `state` (the request's, echoed), the metadata of the
// leaves it names, the version and time of `written` (the shadow after the write) and the
// clientToken.
std::string render_accepted(const json::value& state, const ShadowRecord& written, bool shared_versions,
                            const TimestampKeys& keys, std::string_view client_token);

// update/delta over MQTT: {"state":<delta>,"metadata":<its leaves, at desired's time>,"version",
// "timestamp","clientToken"?}.
std::string render_delta(const ShadowView& view, bool shared_versions, const TimestampKeys& keys,
                         std::int64_t timestamp_s, std::string_view client_token);
// update/documents over MQTT: {"previous"?:{"state","metadata","version"},"current":{…},
// "timestamp","clientToken"?}; "previous" is left out when the shadow did not exist before.
std::string render_documents(const std::optional<ShadowRecord>& previous, const ShadowRecord& current,
                             bool shared_versions, const TimestampKeys& keys, std::int64_t timestamp_s,
                             std::string_view client_token);

// The answer to a delete: {"version","timestamp","clientToken"?}.
std::string render_deleted(const ShadowRecord& deleted, bool shared_versions, std::int64_t timestamp_s,
                           std::string_view client_token);

// The time of a shadow's last write: the later of its sections' times, in Unix nanoseconds.
std::int64_t written_ns(const ShadowRecord& record) noexcept;

// Epoch seconds of a time in Unix nanoseconds; of now.
std::int64_t epoch_seconds(std::int64_t unix_ns) noexcept;
std::int64_t now_seconds();

}  // namespace deviceshadow::awsiot
