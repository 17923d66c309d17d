#include "awsiot/documents.hpp"

#include "deviceshadow/json.hpp"
#include "deviceshadow/leaf_times.hpp"
#include "deviceshadow/timestamp.hpp"
#include "deviceshadow/validation.hpp"

namespace deviceshadow::awsiot {
namespace {

// Appends "name":value after `{` or a previous member.
void append_member(std::string& out, std::string_view name, std::string_view value) {
  if (out.back() != '{') out += ',';
  out += '"';
  out += name;
  out += "\":";
  out += value;
}

}  // namespace

std::int64_t epoch_seconds(std::int64_t unix_ns) noexcept { return unix_ns / 1'000'000'000; }
std::int64_t now_seconds() { return epoch_seconds(now().unix_nanos()); }

UnsupportedDocumentEncoding::UnsupportedDocumentEncoding()
    : Error(ErrorCode::invalid_json, "the payload is not UTF-8") {}

AwsShadowError aws_shadow_error(const Error& e) {
  switch (e.code()) {
    case ErrorCode::invalid_json:
      if (dynamic_cast<const UnsupportedDocumentEncoding*>(&e)) {
        return {415, "UnsupportedDocumentEncodingException",
                "Unsupported documented encoding; supported encoding is UTF-8"};
      }
      return {400, "InvalidRequestException", "Payload contains invalid json"};
    case ErrorCode::invalid_request:
    case ErrorCode::invalid_name:
    case ErrorCode::invalid_timestamp:
    case ErrorCode::too_deep:
    case ErrorCode::invalid_filter:
    case ErrorCode::query_too_expensive: return {400, "InvalidRequestException", e.what()};
    case ErrorCode::unauthorized: return {401, "UnauthorizedException", e.what()};
    case ErrorCode::forbidden: return {403, "ForbiddenException", e.what()};
    case ErrorCode::not_found:
    case ErrorCode::history_expired: return {404, "ResourceNotFoundException", e.what()};
    case ErrorCode::method_not_allowed: return {405, "MethodNotAllowedException", e.what()};
    case ErrorCode::version_conflict: return {409, "ConflictException", "Version conflict"};
    case ErrorCode::document_too_large:
      return {413, "RequestEntityTooLargeException", "The payload exceeds the maximum size allowed"};
    case ErrorCode::throttled: return {429, "ThrottlingException", "Rate exceeded"};
    case ErrorCode::unavailable: return {503, "ServiceUnavailableException", e.what()};
    case ErrorCode::internal: break;
  }
  return {500, "InternalFailureException", "Internal failure"};
}

Error shadow_not_found(const ShadowKey& key, bool classic) {
  return Error::not_found("No shadow exists with name: '" + (classic ? key.thing : key.name) + "'");
}

std::string render_error_body(const AwsShadowError& error) {
  std::string body = "{\"code\":" + std::to_string(error.status) + ",\"message\":";
  append_json_string(body, error.message);
  return body + '}';
}

UpdateRequestBody read_update_request(std::string_view payload, const Limits& limits, bool acknowledge) {
  if (payload.empty()) throw Error(ErrorCode::invalid_json, "empty body");
  UpdateRequestBody out;
  // {"state":{"desired":{…}}}: two levels above a section's state.
  try {
    out.body = parse_request_json(payload, limits.max_depth, 2);
  } catch (const Error&) {  // JSON is UTF-8: a payload that is not was sent in another encoding
    // (a NUL byte: UTF-16 or UTF-32 without a byte order mark, whose ASCII is also UTF-8)
    if (!is_valid_utf8(payload) || payload.find('\0') != std::string_view::npos) throw UnsupportedDocumentEncoding();
    throw;
  }
  if (!out.body.is_object()) throw Error(ErrorCode::invalid_json, "the body is not a JSON object");
  const json::object& body = out.body.get_object();
  ShadowUpdate& u = out.update;
  u.acknowledge = acknowledge;
  u.replace_arrays = true;  // AWS replaces arrays whole
  u.always_store = true;    // every accepted update moves the version, as on AWS
  for (const json::key_value_pair& m : body) {
    const std::string_view k(m.key().data(), m.key().size());
    if (k != "state" && k != "version" && k != "clientToken") {
      throw Error::invalid_request("Unknown member in the request: " + std::string(k));
    }
  }
  const json::value* state = body.if_contains("state");
  if (!state) throw Error::invalid_request("Missing required node: state");
  if (state->is_null()) {  // empties both sections; the shadow stays
    u.reported = SectionUpdate{{}, MergeMode::client_is_master, false};
    u.desired = SectionUpdate{{}, MergeMode::client_is_master, false};
  } else if (const json::object* o = state->if_object()) {
    for (const json::key_value_pair& m : *o) {
      const std::string_view k(m.key().data(), m.key().size());
      const std::optional<Section> s = parse_section(k);
      if (!s) throw Error::invalid_request("State contains an invalid node: '" + std::string(k) + "'");
      std::optional<SectionUpdate>& part = *s == Section::reported ? u.reported : u.desired;
      if (m.value().is_null()) {
        part = SectionUpdate{{}, MergeMode::server_is_master, true};
      } else if (m.value().is_object()) {
        part = SectionUpdate{m.value().get_object(), MergeMode::server_is_master, false};
      } else {
        throw Error::invalid_request("Invalid " + std::string(k) + " node: it must be an object or null");
      }
    }
    if (!u.reported && !u.desired) throw Error::invalid_request("Missing required node: state.desired or state.reported");
  } else {
    throw Error::invalid_request("State node must be an object or null");
  }
  if (const json::value* v = body.if_contains("version")) {
    if (v->is_int64() && v->get_int64() >= 0) {
      u.version = static_cast<std::uint64_t>(v->get_int64());
    } else if (v->is_uint64()) {
      u.version = v->get_uint64();
    } else {
      throw Error::invalid_request("Invalid version: it must be a non-negative integer");
    }
  }
  if (const json::value* token = body.if_contains("clientToken")) {
    if (!token->is_string()) throw Error::invalid_request("Invalid clientToken: it must be a string");
    u.client_token = std::string(token->get_string());
  }
  return out;
}

namespace {

// "state":{"desired"?,"reported"?[,"delta"?]},"metadata":{…}: the live, non-empty sections.
void append_state_and_metadata(std::string& out, const ShadowRecord& record, const json::object* delta,
                               const TimestampKeys& keys) {
  // A section is shown when it is live and not empty, as AWS omits empty sections.
  auto shown = [&](Section s) {
    const SectionRecord& r = record.section(s);
    return r.exists() && r.state_json != "{}";
  };
  append_member(out, "state", "{");
  for (Section s : {Section::desired, Section::reported}) {
    if (shown(s)) append_member(out, to_string(s), record.section(s).state_json);
  }
  if (delta && !delta->empty()) append_member(out, "delta", to_json(*delta));
  out += '}';
  append_member(out, "metadata", "{");
  for (Section s : {Section::desired, Section::reported}) {
    if (!shown(s)) continue;
    const SectionRecord& r = record.section(s);
    append_member(out, to_string(s), "");
    append_aws_metadata(out, parse_stored_json(r.state_json).as_object(), r.times_json, r.timestamp_ns, keys);
  }
  out += '}';
}

void append_client_token(std::string& out, std::string_view client_token) {
  if (client_token.empty()) return;
  out += ",\"clientToken\":";
  append_json_string(out, client_token);
}

}  // namespace

std::string render_document(const ShadowView& view, bool shared_versions, const TimestampKeys& keys,
                            std::int64_t now_s) {
  std::string out = "{";
  append_state_and_metadata(out, view.record, &view.delta, keys);
  out += ",\"version\":" + std::to_string(shadow_version(view.record, shared_versions));
  out += ",\"timestamp\":" + std::to_string(now_s) + "}";
  return out;
}

std::string render_delta(const ShadowView& view, bool shared_versions, const TimestampKeys& keys,
                         std::int64_t timestamp_s, std::string_view client_token) {
  std::string out = "{\"state\":" + to_json(view.delta) + ",\"metadata\":";
  // The delta's leaves are desired's, dated by desired's leaf times.
  append_aws_metadata(out, view.delta, view.record.desired.times_json, view.record.desired.timestamp_ns, keys);
  out += ",\"version\":" + std::to_string(shadow_version(view.record, shared_versions));
  out += ",\"timestamp\":" + std::to_string(timestamp_s);
  append_client_token(out, client_token);
  return out + '}';
}

std::string render_documents(const std::optional<ShadowRecord>& previous, const ShadowRecord& current,
                             bool shared_versions, const TimestampKeys& keys, std::int64_t timestamp_s,
                             std::string_view client_token) {
  std::string out = "{";
  auto snapshot = [&](std::string_view name, const ShadowRecord& record) {
    append_member(out, name, "{");
    append_state_and_metadata(out, record, nullptr, keys);
    out += ",\"version\":" + std::to_string(shadow_version(record, shared_versions)) + "}";
  };
  if (previous) snapshot("previous", *previous);
  snapshot("current", current);
  out += ",\"timestamp\":" + std::to_string(timestamp_s);
  append_client_token(out, client_token);
  return out + '}';
}

std::string render_accepted(const json::value& state, const ShadowRecord& written, bool shared_versions,
                            const TimestampKeys& keys, std::string_view client_token) {
  const std::int64_t ns = written_ns(written);
  std::string out = "{\"state\":" + to_json(state) + ",\"metadata\":";
  if (state.is_object()) {
    append_aws_metadata(out, state.get_object(), "", ns, keys);  // every leaf it names, at the write's time
  } else {
    out += "{}";
  }
  out += ",\"version\":" + std::to_string(shadow_version(written, shared_versions));
  out += ",\"timestamp\":" + std::to_string(epoch_seconds(ns));
  append_client_token(out, client_token);
  return out + '}';
}

std::string render_deleted(const ShadowRecord& deleted, bool shared_versions, std::int64_t timestamp_s,
                           std::string_view client_token) {
  std::string out = "{\"version\":" + std::to_string(shadow_version(deleted, shared_versions));
  out += ",\"timestamp\":" + std::to_string(timestamp_s);
  append_client_token(out, client_token);
  return out + '}';
}

std::int64_t written_ns(const ShadowRecord& record) noexcept {
  return std::max(record.reported.timestamp_ns, record.desired.timestamp_ns);
}

}  // namespace deviceshadow::awsiot
