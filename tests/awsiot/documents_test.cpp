// AWS's error names and texts for every error code, as botocore maps them to exceptions.
#include "awsiot/documents.hpp"

#include <gtest/gtest.h>

namespace {

namespace ds = deviceshadow;
namespace awsiot = deviceshadow::awsiot;

TEST(AwsErrors, EveryErrorCodeHasAwsStatusAndException) {
  const struct {
    ds::ErrorCode code;
    int status;
    std::string_view type;
  } expected[] = {
      {ds::ErrorCode::invalid_json, 400, "InvalidRequestException"},
      {ds::ErrorCode::invalid_request, 400, "InvalidRequestException"},
      {ds::ErrorCode::invalid_name, 400, "InvalidRequestException"},
      {ds::ErrorCode::invalid_timestamp, 400, "InvalidRequestException"},
      {ds::ErrorCode::too_deep, 400, "InvalidRequestException"},
      {ds::ErrorCode::unauthorized, 401, "UnauthorizedException"},
      {ds::ErrorCode::forbidden, 403, "ForbiddenException"},
      {ds::ErrorCode::not_found, 404, "ResourceNotFoundException"},
      {ds::ErrorCode::method_not_allowed, 405, "MethodNotAllowedException"},
      {ds::ErrorCode::version_conflict, 409, "ConflictException"},
      {ds::ErrorCode::document_too_large, 413, "RequestEntityTooLargeException"},
      {ds::ErrorCode::throttled, 429, "ThrottlingException"},
      {ds::ErrorCode::unavailable, 503, "ServiceUnavailableException"},
      {ds::ErrorCode::internal, 500, "InternalFailureException"},
  };
  for (const auto& e : expected) {
    const awsiot::AwsShadowError aws = awsiot::aws_shadow_error(ds::Error(e.code, "detail"));
    EXPECT_EQ(aws.status, e.status) << ds::code_name(e.code);
    EXPECT_EQ(aws.type, e.type) << ds::code_name(e.code);
    EXPECT_FALSE(aws.message.empty());
  }
}

TEST(AwsErrors, FixedTextsAreAwsOwnAndInternalsStayHidden) {
  EXPECT_EQ(awsiot::aws_shadow_error(ds::Error::version_conflict(7)).message, "Version conflict");
  EXPECT_EQ(awsiot::aws_shadow_error(ds::Error(ds::ErrorCode::invalid_json, "at offset 3")).message,
            "Payload contains invalid json");
  EXPECT_EQ(awsiot::aws_shadow_error(ds::Error(ds::ErrorCode::internal, "sqlite: disk I/O error")).message, "Internal failure");
  EXPECT_EQ(awsiot::render_error_body({409, "ConflictException", "Version \"conflict\""}),
            R"({"code":409,"message":"Version \"conflict\""})");
}

TEST(AwsErrors, APayloadInAnotherEncodingThanUtf8Is415AndMalformedUtf8Json400) {
  auto refusal = [](std::string_view payload) {
    try {
      awsiot::read_update_request(payload, ds::Limits{}, false);
    } catch (const ds::Error& e) {
      return awsiot::aws_shadow_error(e);
    }
    ADD_FAILURE() << "accepted: " << payload;
    return awsiot::AwsShadowError{};
  };
  using namespace std::string_view_literals;
  const std::string_view utf16 = "\xff\xfe{\0\"\0s\0\"\0:\0{\0}\0}\0"sv;  // {"s":{}} in UTF-16LE with its BOM
  const awsiot::AwsShadowError aws = refusal(utf16);
  EXPECT_EQ(aws.status, 415);
  EXPECT_EQ(aws.type, "UnsupportedDocumentEncodingException");
  EXPECT_EQ(refusal("{\"state\":{\"reported\":{\"s\":\"caf\xe9\"}}}").status, 415);  // Latin-1
  EXPECT_EQ(refusal("{\0}\0"sv).status, 415);  // UTF-16LE without its byte order mark
  EXPECT_EQ(refusal("{\"state\":").type, "InvalidRequestException");
  EXPECT_EQ(refusal("{\"state\":{\"reported\":{\"s\":\"caf\xc3\xa9\"}}").status, 400);  // UTF-8, unclosed
}

}  // namespace
