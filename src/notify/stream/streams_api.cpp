#include "notify/stream/streams_api.hpp"

#include "aws/client.hpp"

#include <cmath>

namespace deviceshadow::notify::stream {

StreamError classify(const aws::AwsError& e) {
  const std::string message = e.type() + ": " + e.what();
  if (e.type() == "ExpiredIteratorException") return {StreamErrorKind::expired_iterator, message};
  if (e.type() == "TrimmedDataAccessException") return {StreamErrorKind::trimmed_data, message};
  if (e.type() == "ResourceNotFoundException") return {StreamErrorKind::not_found, message};
  // LimitExceededException is the Streams API's throttling answer (HTTP 400).
  if (e.retryable() || e.type() == "LimitExceededException") return {StreamErrorKind::retryable, message};
  return {StreamErrorKind::other, message};
}

namespace {

const char* iterator_type_name(IteratorType type) {
  switch (type) {
    case IteratorType::trim_horizon: return "TRIM_HORIZON";
    case IteratorType::latest: return "LATEST";
    case IteratorType::at_sequence: return "AT_SEQUENCE_NUMBER";
    case IteratorType::after_sequence: return "AFTER_SEQUENCE_NUMBER";
  }
  return "";
}

std::string string_or_empty(const json::object& o, std::string_view name) {
  const json::value* v = o.if_contains(name);
  return v && v->is_string() ? std::string(v->get_string()) : std::string();
}

json::object object_or_empty(const json::object& o, std::string_view name) {
  const json::value* v = o.if_contains(name);
  return v && v->is_object() ? v->get_object() : json::object();
}

class DynamoDbStreamsApi final : public StreamsApi {
 public:
  DynamoDbStreamsApi(aws::ClientOptions options, const aws::Credentials& credentials)
      : client_(with_streams_prefix(std::move(options)), credentials) {}

  StreamDescription describe_stream(const std::string& stream_arn) override {
    StreamDescription out;
    json::object request{{"StreamArn", stream_arn}};
    for (;;) {
      const json::value answer = call("DescribeStream", request);
      const json::object& d = answer.at("StreamDescription").as_object();
      out.arn = string_or_empty(d, "StreamArn");
      out.status = string_or_empty(d, "StreamStatus");
      if (const json::value* shards = d.if_contains("Shards")) {
        for (const json::value& s : shards->as_array()) {
          const json::object& o = s.as_object();
          const json::object range = object_or_empty(o, "SequenceNumberRange");
          out.shards.push_back({string_or_empty(o, "ShardId"), string_or_empty(o, "ParentShardId"),
                                string_or_empty(range, "StartingSequenceNumber"),
                                string_or_empty(range, "EndingSequenceNumber")});
        }
      }
      const std::string last = string_or_empty(d, "LastEvaluatedShardId");
      if (last.empty()) return out;
      request["ExclusiveStartShardId"] = last;
    }
  }

  std::string shard_iterator(const std::string& stream_arn, const std::string& shard_id, IteratorType type,
                             const std::string& sequence) override {
    json::object request{{"StreamArn", stream_arn}, {"ShardId", shard_id}, {"ShardIteratorType", iterator_type_name(type)}};
    if (type == IteratorType::at_sequence || type == IteratorType::after_sequence) request["SequenceNumber"] = sequence;
    return std::string(call("GetShardIterator", request).at("ShardIterator").as_string());
  }

  RecordsPage records(const std::string& iterator, int limit) override {
    return parse_records(call("GetRecords", json::object{{"ShardIterator", iterator}, {"Limit", limit}}));
  }

 private:
  static aws::ClientOptions with_streams_prefix(aws::ClientOptions options) {
    options.target_prefix = "DynamoDBStreams_20120810.";
    options.service = "dynamodb";
    return options;
  }

  json::value call(std::string_view operation, const json::object& request) {
    try {
      return client_.call(operation, to_json(request), /*idempotent=*/true);  // all three only read
    } catch (const aws::AwsError& e) {
      throw classify(e);
    }
  }

  aws::JsonClient client_;
};

}  // namespace

int compare_sequence(std::string_view a, std::string_view b) {
  auto strip = [](std::string_view s) {
    while (s.size() > 1 && s.front() == '0') s.remove_prefix(1);
    return s;
  };
  a = strip(a);
  b = strip(b);
  if (a.size() != b.size()) return a.size() < b.size() ? -1 : 1;
  const int c = a.compare(b);
  return c < 0 ? -1 : (c > 0 ? 1 : 0);
}

RecordsPage parse_records(const json::value& answer) {
  RecordsPage page;
  const json::object& o = answer.as_object();
  if (const json::value* next = o.if_contains("NextShardIterator"); next && next->is_string()) {
    page.next_iterator = std::string(next->get_string());
  }
  if (const json::value* records = o.if_contains("Records")) {
    for (const json::value& r : records->as_array()) {
      const json::object& record = r.as_object();
      const json::object d = object_or_empty(record, "dynamodb");
      StreamRecord out;
      out.event_name = string_or_empty(record, "eventName");
      out.sequence_number = string_or_empty(d, "SequenceNumber");
      out.keys = object_or_empty(d, "Keys");
      out.new_image = object_or_empty(d, "NewImage");
      out.old_image = object_or_empty(d, "OldImage");
      if (const json::value* t = d.if_contains("ApproximateCreationDateTime"); t && t->is_number()) {
        out.approximate_creation_s = static_cast<std::int64_t>(std::floor(t->to_number<double>()));
      }
      if (const json::value* s = d.if_contains("SizeBytes"); s && s->is_number()) {
        out.size_bytes = s->to_number<std::uint64_t>();
      }
      page.records.push_back(std::move(out));
    }
  }
  return page;
}

std::unique_ptr<StreamsApi> make_dynamodb_streams_api(const aws::ClientOptions& dynamodb_options,
                                                      const aws::Credentials& credentials) {
  return std::make_unique<DynamoDbStreamsApi>(dynamodb_options, credentials);
}

std::optional<std::string> latest_stream_arn(aws::JsonClient& dynamodb, const std::string& table) {
  json::value answer;
  try {
    answer = dynamodb.call("DescribeTable", to_json(json::object{{"TableName", table}}), /*idempotent=*/true);
  } catch (const aws::AwsError& e) {
    throw classify(e);
  }
  const json::object& t = answer.at("Table").as_object();
  const json::object spec = object_or_empty(t, "StreamSpecification");
  const json::value* enabled = spec.if_contains("StreamEnabled");
  const std::string arn = string_or_empty(t, "LatestStreamArn");
  // A disabled stream keeps its ARN in LatestStreamArn: only an enabled one counts.
  if (arn.empty() || !enabled || !enabled->is_bool() || !enabled->get_bool()) return std::nullopt;
  return arn;
}

}  // namespace deviceshadow::notify::stream
