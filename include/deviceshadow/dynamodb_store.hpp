// The scale-out Store: one Amazon DynamoDB table in a single-table design (docs/storage.md has
// every item kind, its attributes and the conditions of each write).
//
// | item                | PK                  | SK                                  |
// |---------------------|---------------------|-------------------------------------|
// | reported (separate) | DS#{thing}          | DSR#{name}                          |
// | desired (separate)  | DS#{thing}          | DSD#{name}                          |
// | both (combined)     | DS#{thing}          | DSC#{name}                          |
// | thing index         | DS#{thing}          | T#   (GSI1: THINGS#{shard}, thing)  |
// | history event       | DH#{thing}#{name}   | {timestamp ns, 20 digits}#{R|D|C|X}{version} |
//
// Every write is conditional on the version read; several items go in one
// TransactWriteItems. Reads are strongly consistent. Thread-safe.
#pragma once

#include "deviceshadow/store.hpp"

#include <chrono>
#include <memory>
#include <string>

namespace deviceshadow {

enum class DynamoDbLayout { separate, combined };

struct DynamoDbOptions {
  std::string table;
  std::string endpoint;  // empty: https://dynamodb.{region}.amazonaws.com
  std::string region;    // empty: AWS_REGION, AWS_DEFAULT_REGION, the profile's, else us-east-1
  std::string profile;   // empty: AWS_PROFILE or "default"
  DynamoDbLayout layout = DynamoDbLayout::separate;
  std::size_t max_read_batch = 100;  // keys per BatchGetItem
  std::chrono::milliseconds request_timeout{5000};
  int max_attempts = 6;  // per request, for throttling, 5xx and connection failures
};

// Throws Error(unavailable) without credentials.
std::unique_ptr<Store> open_dynamodb_store(const DynamoDbOptions& options);

// Creates the table: on-demand billing, PK/SK, GSI1 (GSI1PK, GSI1SK), TTL on `ttl`, and a
// stream NEW_AND_OLD_IMAGES unless with_stream is false (tests: DynamoDB Local slows down as
// stream records pile up). Waits until it is active.
void create_dynamodb_table(const DynamoDbOptions& options, bool with_stream = true);

// Deletes the table and everything in it.
void delete_dynamodb_table(const DynamoDbOptions& options);

// The largest item DynamoDB accepts.
inline constexpr std::size_t kDynamoDbMaxItemBytes = 400 * 1024;

}  // namespace deviceshadow
