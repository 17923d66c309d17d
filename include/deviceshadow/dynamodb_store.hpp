// The scale-out store (Store and DeliveryStore): one Amazon DynamoDB table in a single-table
// design (docs/storage.md has every item kind, its attributes and the conditions of each write).
//
// | item                | PK                  | SK                                  |
// |---------------------|---------------------|-------------------------------------|
// | reported (separate) | DS#{thing}          | DSR#{name}                          |
// | desired (separate)  | DS#{thing}          | DSD#{name}                          |
// | both (combined)     | DS#{thing}          | DSC#{name}                          |
// | thing index         | DS#{thing}          | T#   (GSI1: THINGS#{shard}, thing)  |
// | history event       | DH#{thing}#{name}   | {timestamp ns, 20 digits}#{R|D|C|X}{version} (GSI2: HT#{0-3}, the id) |
//
// Every write is conditional on the version read; several items go in one
// TransactWriteItems. Reads are strongly consistent. Thread-safe.
#pragma once

#include "deviceshadow/store_backend.hpp"

#include <chrono>
#include <memory>
#include <optional>
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
std::unique_ptr<StoreBackend> open_dynamodb_store(const DynamoDbOptions& options);

// Creates the table: on-demand billing, PK/SK, GSI1 (GSI1PK, GSI1SK), GSI2 (GSI2PK, GSI2SK),
// TTL on `ttl`, and a stream NEW_AND_OLD_IMAGES unless with_stream is false (tests: DynamoDB
// Local slows down as stream records pile up). Waits until it is active, at most a minute.
void create_dynamodb_table(const DynamoDbOptions& options, bool with_stream = true);

// Deletes the table and everything in it.
void delete_dynamodb_table(const DynamoDbOptions& options);

// A shadow's section item as the table's stream shows it (an image of NEW_AND_OLD_IMAGES, in
// attribute-value JSON): the shadow, the section(s) it holds and, when the write that put it
// ran while the change feed was on, that write's change event (docs/storage.md, "Items").
struct DynamoDbSectionItem {
  ShadowKey key;
  std::optional<Section> section;  // the separate layout's one section; nullopt: a combined item
  ShadowRecord record;             // the section(s) the item holds; the others absent
  std::string feed_event;          // the change event as JSON text; empty when none was put
  std::string feed_entry;          // the write's whole feed entry (FeedEntry json) when the item carries it
};
// nullopt for every other item (thing index, history, registrations, dead letters, leases).
std::optional<DynamoDbSectionItem> decode_dynamodb_section_item(const json::object& image);

// The largest item DynamoDB accepts.
inline constexpr std::size_t kDynamoDbMaxItemBytes = 400 * 1024;

}  // namespace deviceshadow
