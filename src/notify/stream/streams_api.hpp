// The DynamoDB Streams API (DescribeStream, GetShardIterator, GetRecords) as an interface, so
// that the consumer's logic can be tested against a scripted stream, and its implementation
// over the project's SigV4 JSON client (src/aws). The change feed of a DynamoDB store is its
// table's stream (docs/notifications.md, "DynamoDB: the stream consumer").
#pragma once

#include "deviceshadow/json.hpp"

#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace deviceshadow::aws {
class AwsError;
class JsonClient;
struct ClientOptions;
struct Credentials;
}  // namespace deviceshadow::aws

namespace deviceshadow::notify::stream {

// A shard as DescribeStream lists it.
struct Shard {
  std::string id;
  std::string parent_id;             // empty for a shard without a parent
  std::string starting_sequence;     // SequenceNumberRange.StartingSequenceNumber
  std::string ending_sequence;       // empty while the shard is open (still written to)

  bool closed() const { return !ending_sequence.empty(); }
};

struct StreamDescription {
  std::string arn;
  std::string status;  // ENABLING, ENABLED, DISABLING, DISABLED
  std::vector<Shard> shards;  // every shard, all pages
};

enum class IteratorType { trim_horizon, latest, at_sequence, after_sequence };

// One stream record. Keys and images are kept in DynamoDB's attribute-value JSON
// ({"PK":{"S":"…"}, …}); an image is empty when the record has none (INSERT has no old
// image, REMOVE no new one).
struct StreamRecord {
  std::string event_name;  // INSERT, MODIFY, REMOVE
  std::string sequence_number;
  json::object keys;
  json::object new_image;
  json::object old_image;
  std::int64_t approximate_creation_s = 0;  // epoch seconds
  std::uint64_t size_bytes = 0;
};

struct RecordsPage {
  std::vector<StreamRecord> records;
  std::optional<std::string> next_iterator;  // absent: the shard is closed and read to its end
};

// A failed Streams call, classified for the consumer.
enum class StreamErrorKind {
  expired_iterator,  // ExpiredIteratorException: get a new iterator from the checkpoint
  trimmed_data,      // TrimmedDataAccessException: the position is older than the stream keeps
  retryable,         // throttling (LimitExceededException …), 5xx, connection failures
  not_found,         // ResourceNotFoundException: no such stream or shard
  other,             // anything else (validation, access denied): a bug or a misconfiguration
};

class StreamError : public std::runtime_error {
 public:
  StreamError(StreamErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  StreamErrorKind kind() const { return kind_; }

 private:
  StreamErrorKind kind_;
};

// The three calls the consumer makes. Implementations are thread-safe; every call throws
// StreamError on failure.
class StreamsApi {
 public:
  virtual ~StreamsApi() = default;
  // The stream and all its shards (pages through ExclusiveStartShardId).
  virtual StreamDescription describe_stream(const std::string& stream_arn) = 0;
  // `sequence` is required for at_sequence and after_sequence, ignored otherwise.
  virtual std::string shard_iterator(const std::string& stream_arn, const std::string& shard_id, IteratorType type,
                                     const std::string& sequence = {}) = 0;
  virtual RecordsPage records(const std::string& iterator, int limit = 1000) = 0;
};

// The StreamError of a failed AWS call (the lease items' DynamoDB calls fail the same way).
StreamError classify(const aws::AwsError& e);

// Sequence numbers are decimal integers of up to 40 digits, increasing within a shard but not
// contiguous: compare them as numbers, never expect "previous + 1". <0, 0, >0 like strcmp.
int compare_sequence(std::string_view a, std::string_view b);

// The Streams API over a SigV4 JSON client whose target prefix is "DynamoDBStreams_20120810."
// (signing service "dynamodb"; DynamoDB Local serves it on the DynamoDB port).
std::unique_ptr<StreamsApi> make_dynamodb_streams_api(const aws::ClientOptions& dynamodb_options,
                                                      const aws::Credentials& credentials);

// Parses a GetRecords answer (exposed for tests of the wire format).
RecordsPage parse_records(const json::value& answer);

// The table's LatestStreamArn (DescribeTable on a DynamoDB client), or nullopt when the table
// has no stream enabled. Throws StreamError (not_found when there is no such table).
std::optional<std::string> latest_stream_arn(aws::JsonClient& dynamodb, const std::string& table);

}  // namespace deviceshadow::notify::stream
