// DynamoDB store behaviour that needs no DynamoDB: what is refused before a request is sent.
#include "deviceshadow/dynamodb_store.hpp"
#include "deviceshadow/error.hpp"

#include <gtest/gtest.h>

#include <cstdlib>

namespace ds = deviceshadow;

namespace {

// A store whose endpoint refuses connections: any request it sends fails as `unavailable`.
std::unique_ptr<ds::StoreBackend> unreachable_store(ds::DynamoDbLayout layout) {
  setenv("AWS_ACCESS_KEY_ID", "test", 0);
  setenv("AWS_SECRET_ACCESS_KEY", "test", 0);
  ds::DynamoDbOptions o;
  o.table = "unused";
  o.endpoint = "http://127.0.0.1:1";
  o.region = "us-east-1";
  o.layout = layout;
  o.max_attempts = 1;
  return ds::open_dynamodb_store(o);
}

// A first write of a shadow, as the engine makes it (the unwritten section as read: absent).
ds::ShadowWrite big_write(std::size_t bytes) {
  static const ds::SectionRecord absent;
  ds::SectionRecord r;
  r.version = 1;
  r.write_id = "w-big";
  r.state_json = R"({"blob":")" + std::string(bytes, 'x') + R"("})";
  return {{"t", "main"}, {{ds::Section::reported, 0, r, false}}, std::nullopt, {}, &absent};
}

ds::ErrorCode code_of(ds::Store& store, const ds::ShadowWrite& w) {
  try {
    store.write(w);
  } catch (const ds::Error& e) {
    return e.code();
  }
  return ds::ErrorCode::internal;
}

TEST(DynamoDb, AnItemOver400KiBIsRefusedBeforeAnyRequest) {
  for (auto layout : {ds::DynamoDbLayout::separate, ds::DynamoDbLayout::combined}) {
    auto store = unreachable_store(layout);
    EXPECT_EQ(code_of(*store, big_write(410 * 1024)), ds::ErrorCode::document_too_large);
    EXPECT_EQ(code_of(*store, big_write(1024)), ds::ErrorCode::unavailable);  // small ones are sent (and fail)
  }
}

TEST(DynamoDb, ATableNameIsRequired) {
  ds::DynamoDbOptions o;
  o.endpoint = "http://127.0.0.1:1";
  EXPECT_THROW(ds::open_dynamodb_store(o), ds::Error);
}

}  // namespace
