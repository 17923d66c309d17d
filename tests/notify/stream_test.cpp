// The DynamoDB Streams consumer's building blocks (src/notify/stream): the shard reader against
// a scripted stream (what DynamoDB Local cannot do: shard lineage, iterator expiry, trimming),
// lease items through real conditional writes on DynamoDB Local, and the Streams client against
// DynamoDB Local's real stream of shadows written through the DynamoDB store, and the write
// assembler (stream records to change-feed entries) against scripted records and that stream.
#include "aws/client.hpp"
#include "aws/credentials.hpp"
#include "deviceshadow/dynamodb_store.hpp"
#include "deviceshadow/engine.hpp"
#include "deviceshadow/memory_store.hpp"
#include "notify/stream/assembler.hpp"
#include "notify/stream/stream_feed.hpp"
#include "notify/stream/consumer.hpp"
#include "http/server.hpp"
#include "support/forwarding_store.hpp"
#include "support/http_receiver.hpp"
#include "support/stream_records.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

namespace ds = deviceshadow;
namespace st = deviceshadow::notify::stream;
namespace json = boost::json;
namespace srv = deviceshadow::http;
using Step = st::ShardReader::Step;

namespace {

using namespace stream_records;

// ---- a scripted stream ----------------------------------------------------------------

// Shards, their records and their lineage as a test writes them. Iterators are "shard|index";
// expire_iterators() makes every iterator handed out so far fail as expired, trim() drops a
// shard's oldest records as DynamoDB does after 24 hours.
class ScriptedStream final : public st::StreamsApi {
 public:
  static constexpr const char* kArn = "arn:aws:dynamodb:ddblocal:000000000000:table/t/stream/2026-01-01T00:00:00.000";

  void add_shard(const std::string& id, const std::string& parent = {}) {
    std::lock_guard lock(mutex_);
    shards_[id].info = {id, parent, std::to_string(next_sequence_), {}};
  }
  // Appends a record whose NewImage holds {"n": value}; sequence numbers grow by 7 (not contiguous).
  std::string put(const std::string& shard, int value, const std::string& pk = "DS#thing") {
    std::lock_guard lock(mutex_);
    st::StreamRecord r;
    r.event_name = "MODIFY";
    r.sequence_number = std::to_string(next_sequence_ += 7);
    r.keys = json::object{{"PK", json::object{{"S", pk}}}, {"SK", json::object{{"S", shard}}}};
    r.new_image = json::object{{"n", json::object{{"N", std::to_string(value)}}}};
    shards_.at(shard).records.push_back(r);
    return r.sequence_number;
  }
  void close(const std::string& shard) {
    std::lock_guard lock(mutex_);
    shards_.at(shard).info.ending_sequence = std::to_string(next_sequence_);
  }
  void trim(const std::string& shard, std::size_t records) {
    std::lock_guard lock(mutex_);
    shards_.at(shard).trimmed = records;
  }
  void expire_iterators() {
    std::lock_guard lock(mutex_);
    expired_before_ = issued_;
  }
  void fail_next_read(st::StreamErrorKind kind) {
    std::lock_guard lock(mutex_);
    fail_next_ = kind;
  }
  // The next `n` reads of `shard` fail (not retryable).
  void fail_reads_of(const std::string& shard, int n) {
    std::lock_guard lock(mutex_);
    failing_reads_[shard] = n;
  }
  int failing_reads_left(const std::string& shard) {
    std::lock_guard lock(mutex_);
    return failing_reads_[shard];
  }

  st::StreamDescription describe_stream(const std::string& arn) override {
    std::lock_guard lock(mutex_);
    st::StreamDescription d{arn, "ENABLED", {}};
    for (const auto& [id, s] : shards_) d.shards.push_back(s.info);
    return d;
  }

  std::string shard_iterator(const std::string&, const std::string& shard_id, st::IteratorType type,
                             const std::string& sequence) override {
    std::lock_guard lock(mutex_);
    auto it = shards_.find(shard_id);
    if (it == shards_.end()) throw st::StreamError(st::StreamErrorKind::not_found, "no shard " + shard_id);
    const Shard& s = it->second;
    std::size_t index = 0;
    switch (type) {
      case st::IteratorType::trim_horizon: index = s.trimmed; break;
      case st::IteratorType::latest: index = s.records.size(); break;
      case st::IteratorType::at_sequence:
      case st::IteratorType::after_sequence: {
        std::optional<std::size_t> found;
        for (std::size_t i = 0; i < s.records.size(); ++i) {
          if (s.records[i].sequence_number == sequence) found = i;
        }
        if (!found) throw st::StreamError(st::StreamErrorKind::other, "ValidationException: unknown sequence number");
        index = type == st::IteratorType::at_sequence ? *found : *found + 1;
        if (index < s.trimmed) throw st::StreamError(st::StreamErrorKind::trimmed_data, "TrimmedDataAccessException");
      }
    }
    return shard_id + "|" + std::to_string(index) + "|" + std::to_string(issued_++);
  }

  st::RecordsPage records(const std::string& iterator, int limit) override {
    std::lock_guard lock(mutex_);
    ++reads_;
    if (fail_next_) {
      const auto kind = *fail_next_;
      fail_next_.reset();
      throw st::StreamError(kind, "scripted failure");
    }
    const auto bar = iterator.find('|');
    const auto bar2 = iterator.find('|', bar + 1);
    const std::string shard = iterator.substr(0, bar);
    if (int& failing = failing_reads_[shard]; failing > 0) {
      --failing;
      throw st::StreamError(st::StreamErrorKind::other, "scripted failure of " + shard);
    }
    const std::size_t index = std::stoull(iterator.substr(bar + 1, bar2 - bar - 1));
    const std::uint64_t serial = std::stoull(iterator.substr(bar2 + 1));
    if (serial < expired_before_) throw st::StreamError(st::StreamErrorKind::expired_iterator, "ExpiredIteratorException");
    const Shard& s = shards_.at(shard);
    if (index < s.trimmed) throw st::StreamError(st::StreamErrorKind::trimmed_data, "TrimmedDataAccessException");
    st::RecordsPage page;
    std::size_t end = std::min(s.records.size(), index + static_cast<std::size_t>(limit));
    page.records.assign(s.records.begin() + static_cast<std::ptrdiff_t>(index), s.records.begin() + static_cast<std::ptrdiff_t>(end));
    if (!(s.info.closed() && end == s.records.size())) {
      page.next_iterator = shard + "|" + std::to_string(end) + "|" + std::to_string(issued_++);
    }
    return page;
  }

  std::uint64_t reads() {
    std::lock_guard lock(mutex_);
    return reads_;
  }

 private:
  struct Shard {
    st::Shard info;
    std::vector<st::StreamRecord> records;
    std::size_t trimmed = 0;
  };
  std::mutex mutex_;
  std::map<std::string, Shard> shards_;
  std::uint64_t next_sequence_ = 1000;
  std::uint64_t issued_ = 0;
  std::uint64_t expired_before_ = 0;
  std::uint64_t reads_ = 0;
  std::optional<st::StreamErrorKind> fail_next_;
  std::map<std::string, int> failing_reads_;
};

int value_of(const st::StreamRecord& r) { return std::stoi(std::string(r.new_image.at("n").at("N").as_string())); }

// Collects what a handler is given, per shard, and says `accept` of them are done (all by default).
struct Collector {
  std::mutex mutex;
  std::map<std::string, std::vector<int>> values;
  std::vector<std::string> order;  // shard of each record, in the order handed over
  std::optional<std::size_t> accept;

  st::RecordHandler handler() {
    return [this](const std::string& shard, std::span<const st::StreamRecord> records) {
      std::lock_guard lock(mutex);
      const std::size_t n = accept ? std::min(*accept, records.size()) : records.size();
      for (std::size_t i = 0; i < n; ++i) {
        values[shard].push_back(value_of(records[i]));
        order.push_back(shard);
      }
      return n;
    };
  }
};

std::vector<int> range(int from, int to) {
  std::vector<int> v;
  for (int i = from; i < to; ++i) v.push_back(i);
  return v;
}

// ---- the write assembler, on scripted records ------------------------------------------

json::value parsed(const std::string& text) { return ds::parse_json(text); }

constexpr std::string_view kBothEvent =
    R"({"id":"00000000000000002000#C2","thing":"lamp","name":"main","op":"update","timestamp":"x","clientToken":"}{\"",)"
    R"("reported":{"version":2,"changes":[{"op":"replace","path":"/on","value":false}]},)"
    R"("desired":{"version":1,"changes":[{"op":"add","path":"/fan","value":"auto"}]}})";

TEST(WriteAssembler, JoinsTheTwoItemsOfAWriteAndPassesOverOtherItems) {
  st::WriteAssembler assembler;
  // The reported item's record: the write names desired too, so the entry waits for it.
  EXPECT_FALSE(assembler.add(record("10", section_image("DSR#main", 2, R"({"on":false,"n":[1,{"a":null}]})", kBothEvent),
                                    section_image("DSR#main", 1, R"({"on":true,"n":[1,{"a":null}]})"))));
  EXPECT_EQ(assembler.waiting(), 1u);
  // Records between them that are no write's part.
  bool part = true;
  EXPECT_FALSE(assembler.add(record("11", image("NL#label", "shard-1", R"({"counter":3,"checkpoint":"10"})")), &part));
  EXPECT_FALSE(part) << "ignored";
  EXPECT_FALSE(assembler.add(record("12", image("DH#lamp#main", "00000000000000002000#C2", R"({"event":"{}","timestamp":2000})"))));
  EXPECT_FALSE(assembler.add(record("13", image("DS#lamp", "T#", R"({"liveCount":2,"GSI1PK":"THINGS#3"})"))));
  EXPECT_FALSE(assembler.add(record("14", image("NR#", "hook", R"({"document":"{}"})"))));
  EXPECT_FALSE(assembler.add(record("15", {}, section_image("DSD#other", 4, "{}", {}, true))))  // TTL removal
      << "removals are no write";
  EXPECT_FALSE(assembler.add(record("16", section_image("DSR#other", 2, R"({"x":1})"), section_image("DSR#other", 1, "{}"))))
      << "an item put while the change feed was off";
  EXPECT_EQ(assembler.waiting(), 1u);
  // The desired item's record completes the write: one entry, as the outbox stores keep it.
  auto entry = assembler.add(record("17", section_image("DSD#main", 1, R"({"fan":"auto"})", kBothEvent)), &part);
  ASSERT_TRUE(entry);
  EXPECT_TRUE(part);
  EXPECT_EQ(assembler.waiting(), 0u);
  EXPECT_EQ(entry->key, (ds::ShadowKey{"lamp", "main"}));
  EXPECT_EQ(entry->sequence_numbers, (std::vector<std::string>{"10", "17"}));
  EXPECT_EQ(parsed(entry->json), parsed(R"({"event":)" + std::string(kBothEvent) +
                                        R"(,"reported":{"old":{"on":true,"n":[1,{"a":null}]},"new":{"on":false,"n":[1,{"a":null}]}},)"
                                        R"("desired":{"old":{},"new":{"fan":"auto"}}})"));
  EXPECT_EQ(entry->json.find(R"({"event":)" + std::string(kBothEvent) + ","), 0u) << "the event text as the engine rendered it";
  EXPECT_EQ(entry->event(), kBothEvent);
}

TEST(WriteAssembler, TakesEitherItemFirstAndAnOldTombstoneIsEmpty) {
  st::WriteAssembler assembler;
  EXPECT_FALSE(assembler.add(record("20", section_image("DSD#main", 1, R"({"fan":"auto"})", kBothEvent))));
  EXPECT_FALSE(assembler.add(record("20", section_image("DSD#main", 1, R"({"fan":"auto"})", kBothEvent))))
      << "a part already taken changes nothing";
  auto entry = assembler.add(record("21", section_image("DSR#main", 2, R"({"on":false})", kBothEvent),
                                    section_image("DSR#main", 1, "{}", {}, /*deleted=*/true)));
  ASSERT_TRUE(entry);
  EXPECT_EQ(entry->sequence_numbers, (std::vector<std::string>{"20", "21"}));
  EXPECT_EQ(parsed(entry->json).at("reported"), parsed(R"({"old":{},"new":{"on":false}})"));
}

TEST(WriteAssembler, AnItemCarryingTheWholeEntryIsTheWholeWrite) {
  const std::string entry = R"({"event":)" + std::string(kBothEvent) +
                            R"(,"reported":{"old":{},"new":{"on":false}},"desired":{"old":{},"new":{"fan":"auto"}}})";
  json::object item = section_image("DSR#main", 2, R"({"on":false})");
  item["feedEntry"] = s_attr(entry);
  st::WriteAssembler assembler;
  bool part = false;
  auto assembled = assembler.add(record("40", item), &part);
  ASSERT_TRUE(assembled);
  EXPECT_TRUE(part);
  EXPECT_EQ(assembled->json, entry) << "as the engine wrote it";
  EXPECT_EQ(assembled->event(), kBothEvent);
  EXPECT_EQ(assembled->sequence_numbers, (std::vector<std::string>{"40"}));
  EXPECT_EQ(assembler.waiting(), 0u);
  // The write's desired item carries nothing: its record is passed over.
  EXPECT_FALSE(assembler.add(record("41", section_image("DSD#main", 1, R"({"fan":"auto"})")), &part));
  EXPECT_FALSE(part);
}

TEST(WriteAssembler, OneCombinedItemIsTheWholeWrite) {
  const std::string event =
      R"({"id":"00000000000000003000#R5","thing":"lamp","name":"main","op":"report","timestamp":"x",)"
      R"("reported":{"version":5,"changes":[{"op":"add","path":"/on","value":true}]}})";
  // Reported was a tombstone (its own metadata), desired live with the item's.
  json::object old_image = image("DS#lamp", "DSC#main", R"({"version":4,"timestamp":2000,"writeId":"w4",
      "reported":{},"reportedMeta":{"timestamp":1000,"writeId":"w1","deleted":true,"expires":9,"ttl":1},"desired":{"fan":"auto"}})");
  json::object new_image = image("DS#lamp", "DSC#main", R"({"version":5,"timestamp":3000,"writeId":"w5",
      "reported":{"on":true},"desired":{"fan":"auto"},"desiredMeta":{"timestamp":2000,"writeId":"w4","deleted":false}})");
  new_image["feedEvent"] = s_attr(event);
  st::WriteAssembler assembler;
  auto entry = assembler.add(record("30", new_image, old_image));
  ASSERT_TRUE(entry);
  EXPECT_EQ(parsed(entry->json), parsed(R"({"event":)" + event + R"(,"reported":{"old":{},"new":{"on":true}}})"))
      << "only the section the event names";
  EXPECT_EQ(assembler.waiting(), 0u);
}

// ---- the stream feed: records in, feed entries out, records done once trimmed ------------

st::StreamRecord other_record(const std::string& seq) {
  return record(seq, image("NL#label", "shard-9", R"({"counter":1})"));
}
std::vector<std::uint64_t> seqs(const std::vector<ds::FeedEntry>& entries) {
  std::vector<std::uint64_t> out;
  for (const auto& e : entries) out.push_back(e.seq);
  return out;
}

TEST(StreamFeed, EntriesInCompletionOrderAndRecordsDoneOnlyOnceEveryRegistrationHasThem) {
  st::StreamFeed feed;
  int woken = 0;
  feed.set_listener([&] { ++woken; });
  // Shard a: an ignored record, the first half of a two-item write, a one-item write.
  std::vector<st::StreamRecord> a{other_record("1"),
                                  record("2", section_image("DSR#main", 2, R"({"on":false})", kBothEvent)),
                                  report_record("3", "x", 1)};
  EXPECT_EQ(feed.take("a", a), 1u) << "only the ignored record at the front is done";
  EXPECT_EQ(seqs(feed.read(0, 10)), (std::vector<std::uint64_t>{1}));
  EXPECT_EQ(feed.end(), 1u);
  EXPECT_EQ(feed.waiting(), 1u);
  EXPECT_EQ(woken, 1);
  // The rest of the two-item write arrives in shard b (another page of a held shard would do the same).
  std::vector<st::StreamRecord> b{record("7", section_image("DSD#main", 1, R"({"fan":"auto"})", kBothEvent))};
  EXPECT_EQ(feed.take("b", b), 0u);
  const std::vector<ds::FeedEntry> entries = feed.read(0, 10);
  ASSERT_EQ(seqs(entries), (std::vector<std::uint64_t>{1, 2}));
  EXPECT_EQ(parsed(entries[0].json).at("reported").at("new"), parsed(R"({"n":1})"));
  EXPECT_EQ(entries[1].key, (ds::ShadowKey{"lamp", "main"}));
  EXPECT_EQ(feed.waiting(), 0u);
  // Offered again (nothing new): not done until trimmed.
  std::span<const st::StreamRecord> rest(a.data() + 1, 2);
  EXPECT_EQ(feed.take("a", rest), 0u);
  EXPECT_THROW(feed.take("a", std::span<const st::StreamRecord>(a.data() + 2, 1)), ds::Error)
      << "a shard's records are offered from its oldest not done";
  feed.trim(1);  // the write of x is everybody's: record 3 waits behind record 2 (its entry is 2)
  EXPECT_EQ(feed.take("a", rest), 0u);
  feed.trim(2);
  EXPECT_EQ(feed.take("a", rest), 2u);
  EXPECT_EQ(feed.take("b", b), 1u);
  EXPECT_TRUE(feed.read(0, 10).empty());
  EXPECT_EQ(feed.end(), 2u);
}

// A record whose feedEvent cannot be read is passed over, counted, so that its shard goes on.
TEST(StreamFeed, ARecordWithAnUnreadableEventIsPassedOver) {
  st::StreamFeed feed;
  std::vector<st::StreamRecord> records{record("1", section_image("DSR#main", 2, R"({"on":false})", "not json")),
                                        record("2", section_image("DSR#main", 3, R"({"on":true})", R"({"no":"id"})")),
                                        report_record("3", "x", 1)};
  EXPECT_EQ(feed.take("a", records), 2u) << "the unreadable records are done; the write waits for its trim";
  EXPECT_EQ(feed.unreadable(), 2u);
  EXPECT_EQ(seqs(feed.read(0, 10)), (std::vector<std::uint64_t>{1}));
}

TEST(StreamFeed, HoldsAtMostItsCapacityAndTakesMoreOnceTrimmed) {
  st::StreamFeed feed({.capacity = 2});
  std::vector<st::StreamRecord> records;
  for (int i = 1; i <= 5; ++i) records.push_back(report_record(std::to_string(i), "s" + std::to_string(i), 1));
  EXPECT_EQ(feed.take("a", records), 0u);
  EXPECT_EQ(feed.size(), 2u);
  EXPECT_EQ(feed.read(0, 10).size(), 2u);
  feed.trim(feed.end());
  EXPECT_EQ(feed.take("a", records), 2u) << "the two trimmed are done; two more taken";
  EXPECT_EQ(seqs(feed.read(0, 10)), (std::vector<std::uint64_t>{3, 4}));
  EXPECT_EQ(seqs(feed.read(3, 10)), (std::vector<std::uint64_t>{4}));
  EXPECT_TRUE(feed.read(4, 10).empty());
}

// Nearly full ("pressed") counts a shard's records not done: those whose entries are trimmed
// no longer count, even before the reader's next take() hands them back as done.
TEST(StreamFeed, IsPressedByRecordsNotDoneOnly) {
  st::StreamFeed feed({.shard_records = 8});  // pressed at 6 records not done
  std::vector<st::StreamRecord> records;
  for (int i = 1; i <= 6; ++i) records.push_back(report_record(std::to_string(i), "s" + std::to_string(i), 1));
  EXPECT_EQ(feed.take("a", std::span(records).first(5)), 0u);
  EXPECT_FALSE(feed.pressed());
  EXPECT_EQ(feed.take("a", records), 0u);
  EXPECT_TRUE(feed.pressed());
  feed.trim(1);
  EXPECT_FALSE(feed.pressed()) << "5 records not done";
  EXPECT_EQ(feed.take("a", records), 1u);
  EXPECT_FALSE(feed.pressed());
}

TEST(StreamFeed, EntriesRefusedByOnEntriesAreOfferedAgainAndNothingElseIsTaken) {
  int calls = 0;
  std::vector<std::string> written;
  st::StreamFeed feed({.capacity = 100, .on_entries = [&](std::span<const st::AssembledEntry> entries) {
                         if (++calls == 1) throw std::runtime_error("history table unavailable");
                         for (const auto& e : entries) written.push_back(e.key.name);
                       }});
  std::vector<st::StreamRecord> records{report_record("1", "p", 1), report_record("2", "q", 1)};
  EXPECT_THROW(feed.take("a", std::span<const st::StreamRecord>(records.data(), 1)), std::runtime_error);
  EXPECT_EQ(feed.end(), 0u) << "not in the feed";
  EXPECT_EQ(feed.take("a", records), 0u);
  EXPECT_EQ(written, (std::vector<std::string>{"p", "q"})) << "in order, the refused first";
  EXPECT_EQ(feed.end(), 2u);
}

TEST(StreamFeed, ForgettingAShardDropsItsHalfWrites) {
  st::StreamFeed feed;
  std::vector<st::StreamRecord> first{record("2", section_image("DSR#main", 2, R"({"on":false})", kBothEvent))};
  EXPECT_EQ(feed.take("a", first), 0u);
  EXPECT_EQ(feed.waiting(), 1u);
  feed.forget("a");  // its lease went elsewhere; the new owner reads from the checkpoint
  EXPECT_EQ(feed.waiting(), 0u);
  // Read again (by this process, after taking the lease back): the write is joined once.
  EXPECT_EQ(feed.take("a", first), 0u);
  std::vector<st::StreamRecord> second{record("3", section_image("DSD#main", 1, R"({"fan":"auto"})", kBothEvent))};
  EXPECT_EQ(feed.take("b", second), 0u);
  EXPECT_EQ(feed.end(), 1u);
  feed.put_checkpoint("hook", 1);
  EXPECT_EQ(feed.checkpoint("hook"), 1u);
  EXPECT_EQ(feed.checkpoint("other"), 0u) << "one it has not seen starts at the first entry it holds";
  feed.trim(1);
  EXPECT_EQ(feed.checkpoint("other"), 1u);
}

// ---- the Streams client's wire format, against a scripted HTTP endpoint ------------------

// Answers DescribeStream in two pages (s1, s2 | s3) and GetShardIterator / GetRecords with
// `error` (a __type) when set; records every request.
class FakeStreamsEndpoint {
 public:
  std::string url() const { return http_.url(); }
  std::vector<srv::HttpRequest> requests() { return http_.requests(); }
  static std::string header(const srv::HttpRequest& r, std::string_view name) { return HttpReceiver::header(r, name); }
  void fail_with(std::string error_type) {
    std::lock_guard lock(mutex_);
    error_ = std::move(error_type);
  }

 private:
  srv::HttpResponse handle(const srv::HttpRequest& r) {
    std::lock_guard lock(mutex_);
    const std::string target = header(r, "X-Amz-Target");
    const json::object body = ds::parse_json(r.body).as_object();
    if (target.ends_with(".DescribeStream")) {
      if (body.contains("ExclusiveStartShardId")) {
        return {200, "application/x-amz-json-1.0", R"({"StreamDescription":{"StreamArn":"arn","StreamStatus":"ENABLED",
          "Shards":[{"ShardId":"s3","ParentShardId":"s2","SequenceNumberRange":{"StartingSequenceNumber":"300"}}]}})", {}};
      }
      return {200, "application/x-amz-json-1.0", R"({"StreamDescription":{"StreamArn":"arn","StreamStatus":"ENABLED",
        "Shards":[{"ShardId":"s1","SequenceNumberRange":{"StartingSequenceNumber":"100","EndingSequenceNumber":"199"}},
                  {"ShardId":"s2","ParentShardId":"s1","SequenceNumberRange":{"StartingSequenceNumber":"200","EndingSequenceNumber":"299"}}],
        "LastEvaluatedShardId":"s2"}})", {}};
    }
    if (!error_.empty()) {
      return {400, "application/x-amz-json-1.0", R"({"__type":"com.amazonaws.dynamodb.v20120810#)" + error_ + R"(","message":"scripted"})", {}};
    }
    if (target.ends_with(".GetShardIterator")) return {200, "application/x-amz-json-1.0", R"({"ShardIterator":"it-1"})", {}};
    return {200, "application/x-amz-json-1.0", R"({"Records":[],"NextShardIterator":"it-2"})", {}};
  }
  std::mutex mutex_;
  std::string error_;
  HttpReceiver http_{[this](const srv::HttpRequest& r) { return handle(r); }};  // last: stopped first
};

TEST(StreamsClient, PagesThroughShardsSignsForDynamoDbAndClassifiesErrors) {
  FakeStreamsEndpoint endpoint;
  ds::aws::ClientOptions o;
  o.endpoint = endpoint.url();
  o.max_attempts = 1;
  auto api = st::make_dynamodb_streams_api(o, {"AKID", "secret", ""});
  const st::StreamDescription d = api->describe_stream("arn");
  ASSERT_EQ(d.shards.size(), 3u);
  EXPECT_EQ(d.shards[1].parent_id, "s1");
  EXPECT_TRUE(d.shards[1].closed());
  EXPECT_FALSE(d.shards[2].closed());
  EXPECT_EQ(d.shards[2].starting_sequence, "300");
  const auto requests = endpoint.requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(FakeStreamsEndpoint::header(requests[0], "X-Amz-Target"), "DynamoDBStreams_20120810.DescribeStream");
  EXPECT_NE(FakeStreamsEndpoint::header(requests[0], "Authorization").find("/us-east-1/dynamodb/aws4_request"), std::string::npos);
  EXPECT_EQ(ds::parse_json(requests[1].body).at("ExclusiveStartShardId"), "s2");

  EXPECT_EQ(api->shard_iterator("arn", "s3", st::IteratorType::after_sequence, "301"), "it-1");
  const json::value asked = ds::parse_json(endpoint.requests().back().body);
  EXPECT_EQ(asked.at("ShardIteratorType"), "AFTER_SEQUENCE_NUMBER");
  EXPECT_EQ(asked.at("SequenceNumber"), "301");
  EXPECT_EQ(api->records("it-1").next_iterator, "it-2");

  for (auto [type, kind] : {std::pair{"ExpiredIteratorException", st::StreamErrorKind::expired_iterator},
                            std::pair{"TrimmedDataAccessException", st::StreamErrorKind::trimmed_data},
                            std::pair{"LimitExceededException", st::StreamErrorKind::retryable},
                            std::pair{"ResourceNotFoundException", st::StreamErrorKind::not_found},
                            std::pair{"ValidationException", st::StreamErrorKind::other}}) {
    endpoint.fail_with(type);
    try {
      api->records("it-1");
      ADD_FAILURE() << type;
    } catch (const st::StreamError& e) {
      EXPECT_EQ(e.kind(), kind) << type;
    }
  }
}

// ---- the shard reader on the scripted stream -----------------------------------------

struct ReaderTest : ::testing::Test {
  ScriptedStream stream;
  st::StreamCounters counters;
  std::vector<std::string> checkpoints;
  std::vector<std::string> log_lines;
  bool lease_held = true;
  Collector collected;

  std::unique_ptr<st::ShardReader> reader(const std::string& shard, const std::string& checkpoint, int page = 1000,
                                          std::size_t max_pending = 10000) {
    return std::make_unique<st::ShardReader>(
        stream, ScriptedStream::kArn, shard, checkpoint,
        [this](const std::string& c) {
          if (!lease_held) return false;
          checkpoints.push_back(c);
          return true;
        },
        counters, [this](bool error, std::string_view message, auto) { if (error) log_lines.emplace_back(message); }, page,
        max_pending);
  }
  // Polls until the reader is idle or done; returns the last step.
  Step drain(st::ShardReader& r) {
    for (int i = 0; i < 1000; ++i) {
      const Step s = r.poll(collected.handler());
      if (s != Step::progressed) return s;
    }
    return Step::progressed;
  }
};

TEST(StreamSequence, ComparesAsDecimalNumbers) {
  EXPECT_LT(st::compare_sequence("999", "1000"), 0);
  EXPECT_GT(st::compare_sequence("100000000000000000000000000000000000001", "99999999999999999999999999999999999999"), 0);
  EXPECT_EQ(st::compare_sequence("000123", "123"), 0);
  EXPECT_LT(st::compare_sequence("122", "123"), 0);
}

TEST(StreamWire, ParsesGetRecordsAnswers) {
  const auto page = st::parse_records(ds::parse_json(R"({"Records":[{"eventID":"e","eventName":"INSERT","awsRegion":"ddblocal",
    "dynamodb":{"ApproximateCreationDateTime":1.7632e9,"Keys":{"PK":{"S":"DS#a"},"SK":{"S":"DSR#main"}},
    "NewImage":{"PK":{"S":"DS#a"},"version":{"N":"1"}},"SequenceNumber":"000000000000000000042","SizeBytes":57,
    "StreamViewType":"NEW_AND_OLD_IMAGES"}}],"NextShardIterator":"it-2"})"));
  ASSERT_EQ(page.records.size(), 1u);
  EXPECT_EQ(page.records[0].event_name, "INSERT");
  EXPECT_EQ(page.records[0].sequence_number, "000000000000000000042");
  EXPECT_EQ(page.records[0].keys.at("SK").at("S").as_string(), "DSR#main");
  EXPECT_TRUE(page.records[0].old_image.empty());
  EXPECT_EQ(page.records[0].approximate_creation_s, 1763200000);
  EXPECT_EQ(page.records[0].size_bytes, 57u);
  EXPECT_EQ(page.next_iterator, "it-2");
  EXPECT_FALSE(st::parse_records(ds::parse_json(R"({"Records":[]})")).next_iterator) << "no NextShardIterator: SHARD_END";
}

TEST_F(ReaderTest, HandsRecordsInOrderAndCheckpointsOnlyWhatIsDone) {
  stream.add_shard("s1");
  std::vector<std::string> seqs;
  for (int i = 0; i < 5; ++i) seqs.push_back(stream.put("s1", i));
  auto r = reader("s1", std::string(st::kTrimHorizon), 2);
  collected.accept = 1;  // one record done per offer: the rest is offered again
  EXPECT_EQ(drain(*r), Step::idle);
  EXPECT_EQ(collected.values["s1"], range(0, 5));
  EXPECT_EQ(checkpoints, seqs) << "one checkpoint per record done, never past one not done";
  collected.accept = 0;
  stream.put("s1", 5);
  EXPECT_EQ(drain(*r), Step::idle);
  EXPECT_EQ(r->checkpoint(), seqs.back()) << "a record not done holds the checkpoint";
  EXPECT_EQ(counters.records, 5u);
}

TEST_F(ReaderTest, AHandlerCanWaitForTheRestOfAGroupOnTheNextPageAndMemoryStaysBounded) {
  stream.add_shard("s1");
  std::vector<std::string> seqs;
  for (int i = 0; i < 4; ++i) seqs.push_back(stream.put("s1", i));
  // Records come in pairs (as the items of one transaction); pages hold one record.
  std::size_t largest_offer = 0;
  std::vector<int> taken;
  auto pairs = [&](const std::string&, std::span<const st::StreamRecord> records) {
    largest_offer = std::max(largest_offer, records.size());
    const std::size_t done = records.size() / 2 * 2;
    for (std::size_t i = 0; i < done; ++i) taken.push_back(value_of(records[i]));
    return done;
  };
  auto r = reader("s1", std::string(st::kTrimHorizon), 1, /*max_pending=*/3);
  for (int i = 0; i < 20 && r->poll(pairs) != Step::idle;) ++i;
  EXPECT_EQ(taken, range(0, 4));
  EXPECT_EQ(checkpoints, (std::vector<std::string>{seqs[1], seqs[3]}));
  for (int i = 4; i < 20; ++i) stream.put("s1", i);
  auto none = [&](const std::string&, std::span<const st::StreamRecord> records) {
    largest_offer = std::max(largest_offer, records.size());
    return std::size_t{0};
  };
  for (int i = 0; i < 50; ++i) r->poll(none);
  EXPECT_EQ(largest_offer, 3u) << "no page is read while max_pending records wait";
}

TEST_F(ReaderTest, ResumesAfterTheCheckpointAndEndsAClosedShard) {
  stream.add_shard("s1");
  std::vector<std::string> seqs;
  for (int i = 0; i < 4; ++i) seqs.push_back(stream.put("s1", i));
  stream.close("s1");
  auto r = reader("s1", seqs[1]);
  EXPECT_EQ(drain(*r), Step::shard_end);
  EXPECT_EQ(collected.values["s1"], (std::vector<int>{2, 3}));
  EXPECT_EQ(checkpoints.back(), st::kShardEnd);
}

TEST_F(ReaderTest, PassesOverLeaseItemRecordsWithoutCheckpointingThem) {
  stream.add_shard("s1");
  stream.put("s1", 0, "NL#label");
  stream.put("s1", 1, "NL#label");
  auto r = reader("s1", std::string(st::kTrimHorizon));
  EXPECT_EQ(drain(*r), Step::idle);
  EXPECT_TRUE(collected.values["s1"].empty());
  EXPECT_TRUE(checkpoints.empty()) << "a checkpoint would write a lease item: a new record, without end";
  const std::string seq = stream.put("s1", 2);
  EXPECT_EQ(drain(*r), Step::idle);
  EXPECT_EQ(collected.values["s1"], (std::vector<int>{2}));
  EXPECT_EQ(checkpoints, (std::vector<std::string>{seq}));
}

TEST_F(ReaderTest, RenewsAnExpiredIteratorWithoutLosingOrRepeatingRecords) {
  stream.add_shard("s1");
  for (int i = 0; i < 3; ++i) stream.put("s1", i);
  auto r = reader("s1", std::string(st::kTrimHorizon), 2);
  collected.accept = 0;
  r->poll(collected.handler());  // reads a page of 2, none done
  collected.accept.reset();
  stream.expire_iterators();
  for (int i = 3; i < 6; ++i) stream.put("s1", i);
  EXPECT_EQ(drain(*r), Step::idle);
  EXPECT_EQ(collected.values["s1"], range(0, 6));
  EXPECT_EQ(counters.expired_iterators, 1u);
  EXPECT_EQ(counters.trimmed, 0u);
}

TEST_F(ReaderTest, CountsAndLogsRecordsTrimmedBeforeTheCheckpointWasRead) {
  stream.add_shard("s1");
  std::vector<std::string> seqs;
  for (int i = 0; i < 6; ++i) seqs.push_back(stream.put("s1", i));
  stream.trim("s1", 4);  // records 0..3 are gone; the checkpoint is after record 1
  auto r = reader("s1", seqs[1]);
  EXPECT_EQ(drain(*r), Step::idle);
  EXPECT_EQ(collected.values["s1"], (std::vector<int>{4, 5})) << "reading resumes at the oldest record kept";
  EXPECT_EQ(counters.trimmed, 1u);
  ASSERT_EQ(log_lines.size(), 1u);
  EXPECT_NE(log_lines[0].find("trimmed"), std::string::npos);
}

TEST_F(ReaderTest, CountsRecordsTrimmedUnderAnOpenIterator) {
  stream.add_shard("s1");
  for (int i = 0; i < 4; ++i) stream.put("s1", i);
  auto r = reader("s1", std::string(st::kTrimHorizon), 2);
  EXPECT_EQ(r->poll(collected.handler()), Step::progressed);  // records 0, 1 done; the iterator points at 2
  stream.trim("s1", 3);
  EXPECT_EQ(drain(*r), Step::idle);
  EXPECT_EQ(collected.values["s1"], (std::vector<int>{0, 1, 3}));
  EXPECT_EQ(counters.trimmed, 1u);
}

TEST_F(ReaderTest, ThrottlingIsRetriedLaterAndALostLeaseStopsTheReader) {
  stream.add_shard("s1");
  stream.put("s1", 0);
  auto r = reader("s1", std::string(st::kTrimHorizon));
  stream.fail_next_read(st::StreamErrorKind::retryable);
  EXPECT_EQ(r->poll(collected.handler()), Step::retry_later);
  EXPECT_EQ(counters.throttled, 1u);
  lease_held = false;
  EXPECT_EQ(r->poll(collected.handler()), Step::lease_lost);
  stream.fail_next_read(st::StreamErrorKind::other);
  auto r2 = reader("s1", std::string(st::kTrimHorizon));
  EXPECT_THROW(r2->poll(collected.handler()), st::StreamError);
}

// A checkpoint write that fails (DynamoDB slow under load: the client gives up) comes after the
// handler took the records as done: they are never offered again, and the checkpoint is stored
// at the next poll. (Offering them again stopped a shard for good: the feed refuses records
// offered out of turn.)
TEST_F(ReaderTest, ACheckpointThatFailsToBeStoredIsStoredLaterAndNoRecordIsOfferedTwice) {
  stream.add_shard("s1");
  std::vector<std::string> seqs;
  for (int i = 0; i < 3; ++i) seqs.push_back(stream.put("s1", i));
  int failures = 1;
  std::set<std::string> stored;  // the lease's checkpoints: SHARD_END frees it, so a second write fails
  auto r = std::make_unique<st::ShardReader>(
      stream, ScriptedStream::kArn, "s1", std::string(st::kTrimHorizon),
      [&](const std::string& c) {
        if (failures-- > 0) throw st::StreamError(st::StreamErrorKind::retryable, "UpdateItem timed out");
        if (stored.contains(std::string(st::kShardEnd))) return false;
        stored.insert(c);
        checkpoints.push_back(c);
        return true;
      },
      counters);
  EXPECT_THROW(r->poll(collected.handler()), st::StreamError);
  EXPECT_EQ(drain(*r), Step::idle);
  EXPECT_EQ(collected.values["s1"], range(0, 3)) << "each record offered once";
  EXPECT_EQ(checkpoints, (std::vector<std::string>{seqs[2]}));
  EXPECT_EQ(r->checkpoint(), seqs[2]);
  stream.put("s1", 3);
  stream.close("s1");
  failures = 0;
  EXPECT_EQ(r->poll(collected.handler()), Step::progressed);  // record 3
  failures = 1;
  EXPECT_THROW(r->poll(collected.handler()), st::StreamError) << "storing SHARD_END";
  EXPECT_EQ(r->poll(collected.handler()), Step::shard_end) << "stored once, at the next poll";
  EXPECT_EQ(r->poll(collected.handler()), Step::shard_end);
  EXPECT_EQ(checkpoints.back(), st::kShardEnd);
  EXPECT_EQ(collected.values["s1"], range(0, 4));
}

// ---- leases on DynamoDB Local ----------------------------------------------------------

std::string dynamodb_endpoint() {
  const char* e = std::getenv("DS_DYNAMODB_ENDPOINT");
  return e ? e : "";
}

// A table of its own on DynamoDB Local, dropped afterwards, and a DynamoDB client on it.
class DynamoDbTest : public ::testing::Test {
 protected:
  void open_table(bool with_stream) {
    if (dynamodb_endpoint().empty()) {
      if (std::getenv("DS_REQUIRE_DYNAMODB")) FAIL() << "DS_REQUIRE_DYNAMODB is set but DS_DYNAMODB_ENDPOINT is not";
      GTEST_SKIP() << "no DynamoDB endpoint (run through scripts/test.sh)";
    }
    options_.endpoint = dynamodb_endpoint();
    options_.region = "us-east-1";
    options_.table = "streams" + std::to_string(std::random_device{}()) + std::to_string(std::random_device{}());
    ds::create_dynamodb_table(options_, with_stream);
    created_ = true;
    client_options_.endpoint = options_.endpoint;
    client_options_.region = options_.region;
    client_ = std::make_unique<ds::aws::JsonClient>(client_options_, ds::aws::load_credentials());
  }
  void TearDown() override {
    if (created_) ds::delete_dynamodb_table(options_);
  }

  ds::DynamoDbOptions options_;
  ds::aws::ClientOptions client_options_;
  std::unique_ptr<ds::aws::JsonClient> client_;
  bool created_ = false;
};

// Several consumers on one table's leases and one scripted stream, on one controllable clock.
class LeaseTest : public DynamoDbTest {
 protected:
  void SetUp() override {
    open_table(/*with_stream=*/false);
    if (IsSkipped() || HasFatalFailure()) return;
    leases_ = std::make_unique<st::LeaseTable>(*client_, options_.table, ScriptedStream::kArn);
  }

  st::StreamConsumer& consumer(const std::string& owner, std::string initial = std::string(st::kTrimHorizon)) {
    st::CoordinatorOptions o;
    o.owner = owner;
    o.lease_timeout = std::chrono::milliseconds(10000);
    o.renew_interval = std::chrono::milliseconds(3000);
    o.initial_position = std::move(initial);
    o.clock = [this] { return now_; };
    auto [it, inserted] = consumers_.try_emplace(owner);
    auto log = [this](bool, std::string_view message, const std::vector<std::pair<std::string, std::string>>& fields) {
      std::string line(message);
      for (const auto& [k, v] : fields) line += " " + k + "=" + v;
      logged_.push_back(line);
    };
    it->second = std::make_unique<st::StreamConsumer>(stream_, *leases_, ScriptedStream::kArn, o, collected_[owner].handler(),
                                                      log, 1000,
                                                      [this, owner](const std::string& shard) { stopped_[owner].push_back(shard); });
    return *it->second;
  }
  // One balance and polls until idle for each of `owners`, in order, `rounds` times.
  void rounds(const std::vector<std::string>& owners, int rounds = 1) {
    for (int i = 0; i < rounds; ++i) {
      for (const std::string& o : owners) {
        consumers_.at(o)->balance();
        while (consumers_.at(o)->poll()) {
        }
      }
    }
  }
  std::map<std::string, std::size_t> load() {
    std::map<std::string, std::size_t> out;
    for (const st::Lease& l : leases_->list()) {
      if (!l.owner.empty()) ++out[l.owner];
    }
    return out;
  }
  void advance(std::chrono::milliseconds d) { now_ += d; }

  ScriptedStream stream_;
  std::unique_ptr<st::LeaseTable> leases_;
  std::map<std::string, Collector> collected_;
  std::map<std::string, std::vector<std::string>> stopped_;  // by owner: shards whose reader stopped
  std::vector<std::string> logged_;                          // by every consumer: message, then fields
  std::map<std::string, std::unique_ptr<st::StreamConsumer>> consumers_;
  std::chrono::steady_clock::time_point now_ = std::chrono::steady_clock::time_point(std::chrono::hours(1));
};

// A shard whose reads keep failing waits on its own, longer each time (100 ms, 200 ms, …):
// the consumer's other shards are read meanwhile, and the failure is logged with its shard.
TEST_F(LeaseTest, AShardThatFailsWaitsOnItsOwnWhileTheOthersAreRead) {
  stream_.add_shard("s1");
  stream_.add_shard("s2");
  for (int i = 0; i < 3; ++i) stream_.put("s1", i), stream_.put("s2", 100 + i);
  stream_.fail_reads_of("s1", 2);
  st::StreamConsumer& a = consumer("a");
  a.balance();
  ASSERT_EQ(a.shards().size(), 2u);
  while (a.poll()) {
  }
  EXPECT_EQ(collected_["a"].values["s2"], range(100, 103));
  EXPECT_TRUE(collected_["a"].values["s1"].empty());
  EXPECT_EQ(stream_.failing_reads_left("s1"), 1);
  ASSERT_FALSE(logged_.empty());
  EXPECT_NE(logged_.back().find("shard=s1"), std::string::npos) << logged_.back();
  auto polled_after = [&](std::chrono::milliseconds d) {
    advance(d);
    while (a.poll()) {
    }
  };
  polled_after(std::chrono::milliseconds(99));
  EXPECT_EQ(stream_.failing_reads_left("s1"), 1) << "s1 waits 100 ms after its first failure";
  polled_after(std::chrono::milliseconds(1));
  EXPECT_EQ(stream_.failing_reads_left("s1"), 0);
  stream_.put("s2", 103);
  polled_after(std::chrono::milliseconds(199));
  EXPECT_TRUE(collected_["a"].values["s1"].empty()) << "and 200 ms after its second";
  EXPECT_EQ(collected_["a"].values["s2"], range(100, 104));
  polled_after(std::chrono::milliseconds(1));
  EXPECT_EQ(collected_["a"].values["s1"], range(0, 3));
}

// Forwards DynamoDB requests to DynamoDB Local; loses the answer of the next UpdateItem whose
// body holds a text (answering 500 after it was applied), so that the client sends it again.
class AnswerLosingProxy {
 public:
  explicit AnswerLosingProxy(const ds::aws::ClientOptions& target) : dynamodb_(target, ds::aws::load_credentials()) {}
  std::string url() const { return http_.url(); }
  void lose_next_update_with(std::string text) {
    std::lock_guard lock(mutex_);
    lose_ = std::move(text);
  }
  int lost() {
    std::lock_guard lock(mutex_);
    return lost_;
  }

 private:
  srv::HttpResponse handle(const srv::HttpRequest& r) {
    const std::string target = HttpReceiver::header(r, "X-Amz-Target");
    const std::string operation = target.substr(target.find('.') + 1);
    bool lose = false;
    {
      std::lock_guard lock(mutex_);
      lose = !lose_.empty() && operation == "UpdateItem" && r.body.find(lose_) != std::string::npos;
      if (lose) lose_.clear(), ++lost_;
    }
    constexpr const char* kType = "application/x-amz-json-1.0";
    try {
      const json::value answer = dynamodb_.call(operation, r.body, false);
      if (lose) return {500, kType, R"({"__type":"com.amazonaws.dynamodb.v20120810#InternalServerError","message":"lost"})", {}};
      return {200, kType, ds::to_json(answer), {}};
    } catch (const ds::aws::AwsError& e) {
      return {400, kType, R"({"__type":"com.amazonaws.dynamodb.v20120810#)" + e.type() + R"(","message":"forwarded"})", {}};
    }
  }

  ds::aws::JsonClient dynamodb_;
  std::mutex mutex_;
  std::string lose_;
  int lost_ = 0;
  HttpReceiver http_{[this](const srv::HttpRequest& r) { return handle(r); }};  // last: stopped first
};

// A lease write whose answer is lost is sent again; the resend fails its condition (the first
// was applied), and the write is found done: the lease is still held, no record read again.
TEST_F(LeaseTest, AWriteSentAgainAfterItsAnswerWasLostKeepsTheLease) {
  AnswerLosingProxy proxy(client_options_);
  ds::aws::ClientOptions via = client_options_;
  via.endpoint = proxy.url();
  via.backoff_base = std::chrono::milliseconds(1);
  ds::aws::JsonClient client(via, ds::aws::load_credentials());
  st::LeaseTable leases(client, options_.table, ScriptedStream::kArn);
  ASSERT_TRUE(leases.create({"s1", "", 0, std::string(st::kTrimHorizon), {}, 0}));
  std::optional<st::Lease> held = leases.take(leases.list().at(0), "a");
  ASSERT_TRUE(held);
  proxy.lose_next_update_with("\"1007\"");
  EXPECT_TRUE(leases.checkpoint(*held, "1007"));
  EXPECT_EQ(proxy.lost(), 1);
  EXPECT_EQ(held->checkpoint, "1007");
  proxy.lose_next_update_with(":hb");  // a renewal
  EXPECT_TRUE(leases.renew(*held));
  EXPECT_EQ(proxy.lost(), 2);
  const st::Lease stored = leases.list().at(0);
  EXPECT_EQ(stored.counter, held->counter);
  EXPECT_EQ(stored.owner, "a");
  EXPECT_EQ(stored.checkpoint, "1007");
  st::Lease stale = *held;
  --stale.counter;  // another instance's write came between: its condition fails, and it was not written
  EXPECT_FALSE(leases.renew(stale));
}

TEST_F(LeaseTest, ConditionalWritesLetExactlyOneInstanceTakeALease) {
  ASSERT_TRUE(leases_->create({"s1", "", 0, std::string(st::kTrimHorizon), {}, 0}));
  EXPECT_FALSE(leases_->create({"s1", "", 0, std::string(st::kLatest), {}, 0})) << "creation never overwrites";
  const st::Lease seen = leases_->list().at(0);
  auto a = leases_->take(seen, "a");
  auto b = leases_->take(seen, "b");
  ASSERT_TRUE(a);
  EXPECT_FALSE(b) << "b saw the same counter: its condition fails";
  EXPECT_EQ(a->owner, "a");
  EXPECT_EQ(a->counter, 1u);
  st::Lease held = *a;
  ASSERT_TRUE(leases_->renew(held));
  EXPECT_EQ(held.counter, 2u);
  st::Lease stale = *a;  // counter 1: a renewal since makes it stale
  EXPECT_FALSE(leases_->checkpoint(stale, "1234"));
  ASSERT_TRUE(leases_->checkpoint(held, "1234"));
  auto stolen = leases_->take(leases_->list().at(0), "b");
  ASSERT_TRUE(stolen);
  EXPECT_EQ(stolen->checkpoint, "1234") << "the checkpoint stays with the lease";
  EXPECT_FALSE(leases_->renew(held)) << "a stolen lease cannot be renewed";
  EXPECT_FALSE(leases_->release(held));
  ASSERT_TRUE(leases_->checkpoint(*stolen, std::string(st::kShardEnd)));
  const st::Lease done = leases_->list().at(0);
  EXPECT_TRUE(done.finished());
  EXPECT_TRUE(done.owner.empty()) << "SHARD_END frees the lease";
}

TEST_F(LeaseTest, ChildShardsWaitForTheirParentToBeReadToItsEnd) {
  stream_.add_shard("a-parent");
  for (int i = 0; i < 3; ++i) stream_.put("a-parent", i);
  stream_.close("a-parent");
  stream_.add_shard("b-child1", "a-parent");
  stream_.add_shard("c-child2", "a-parent");
  for (int i = 10; i < 13; ++i) stream_.put("b-child1", i);
  for (int i = 20; i < 23; ++i) stream_.put("c-child2", i);
  consumer("x");
  rounds({"x"});
  Collector& got = collected_["x"];
  EXPECT_EQ(got.values["a-parent"], range(0, 3));
  EXPECT_TRUE(got.values["b-child1"].empty()) << "a child is not taken before its parent's SHARD_END is stored";
  EXPECT_EQ(stopped_["x"], std::vector<std::string>{"a-parent"}) << "read to its end";
  rounds({"x"});
  EXPECT_EQ(got.values["b-child1"], range(10, 13));
  EXPECT_EQ(got.values["c-child2"], range(20, 23));
  for (const st::Lease& l : leases_->list()) {
    if (l.shard_id == "a-parent") {
      EXPECT_TRUE(l.finished());
    } else {
      EXPECT_EQ(l.parents, std::vector<std::string>{"a-parent"});
    }
  }
}

TEST_F(LeaseTest, FirstStartBeginsAtLatestAndShardsSeenLaterAtTrimHorizon) {
  stream_.add_shard("a-old");
  stream_.put("a-old", 0);
  stream_.close("a-old");
  stream_.add_shard("b-open", "a-old");
  stream_.put("b-open", 1);  // written before the consumer's first start: not owed
  consumer("x", std::string(st::kLatest));
  rounds({"x"});
  stream_.put("b-open", 2);
  rounds({"x"});
  stream_.close("b-open");
  stream_.add_shard("c-new", "b-open");
  stream_.put("c-new", 3);  // before the consumer sees the shard: read from TRIM_HORIZON
  rounds({"x"}, 3);
  Collector& got = collected_["x"];
  EXPECT_TRUE(got.values["a-old"].empty());
  EXPECT_EQ(got.values["b-open"], std::vector<int>{2});
  EXPECT_EQ(got.values["c-new"], std::vector<int>{3});
}

TEST_F(LeaseTest, TwoAndThreeInstancesShareTheShardsEvenly) {
  for (int i = 0; i < 6; ++i) stream_.add_shard("s" + std::to_string(i));
  consumer("a");
  rounds({"a"});
  EXPECT_EQ(load(), (std::map<std::string, std::size_t>{{"a", 6}})) << "alone, it takes every shard";
  consumer("b");
  for (int round = 1; round <= 3; ++round) {
    rounds({"b", "a"});
    EXPECT_EQ(load()["b"], static_cast<std::size_t>(round)) << "at most one steal per round";
  }
  rounds({"b", "a"}, 2);
  EXPECT_EQ(load(), (std::map<std::string, std::size_t>{{"a", 3}, {"b", 3}}));
  consumer("c");
  rounds({"c", "a", "b"}, 4);
  EXPECT_EQ(load(), (std::map<std::string, std::size_t>{{"a", 2}, {"b", 2}, {"c", 2}}));
  // Every instance reads exactly the shards it holds.
  for (const auto& [owner, c] : consumers_) EXPECT_EQ(c->shards().size(), 2u) << owner;
}

TEST_F(LeaseTest, LeasesOfAStoppedInstanceExpireAndOthersResumeAtItsCheckpoint) {
  for (int i = 0; i < 4; ++i) stream_.add_shard("s" + std::to_string(i));
  for (int i = 0; i < 4; ++i) stream_.put("s" + std::to_string(i), i * 10);
  consumer("a");
  consumer("b");
  rounds({"a", "b"}, 4);
  ASSERT_EQ(load(), (std::map<std::string, std::size_t>{{"a", 2}, {"b", 2}}));
  // a stops renewing (as after kill -9); records keep coming.
  for (int i = 0; i < 4; ++i) stream_.put("s" + std::to_string(i), i * 10 + 1);
  advance(std::chrono::milliseconds(9000));
  rounds({"b"});
  EXPECT_EQ(load()["a"], 2u) << "not expired before lease_timeout";
  advance(std::chrono::milliseconds(1500));
  rounds({"b"});
  EXPECT_EQ(load(), (std::map<std::string, std::size_t>{{"b", 4}}));
  // Together they saw every record once: a up to its checkpoint, b after it.
  std::map<std::string, std::vector<int>> all;
  for (auto& [owner, c] : collected_) {
    for (auto& [shard, values] : c.values) all[shard].insert(all[shard].end(), values.begin(), values.end());
  }
  for (int i = 0; i < 4; ++i) EXPECT_EQ(all["s" + std::to_string(i)], (std::vector<int>{i * 10, i * 10 + 1}));
  // a comes back: its first round finds its leases taken and drops their readers (stealing
  // at most one back), then the shards are shared again.
  stopped_["a"].clear();
  consumers_.at("a")->balance();
  EXPECT_LE(consumers_.at("a")->shards().size(), 1u);
  EXPECT_EQ(stopped_["a"].size(), 2u) << "the readers of both leases taken over stopped";
  rounds({"a", "b"}, 3);
  EXPECT_EQ(load(), (std::map<std::string, std::size_t>{{"a", 2}, {"b", 2}}));
}

TEST_F(LeaseTest, ReleasedLeasesAreTakenWithoutWaiting) {
  for (int i = 0; i < 2; ++i) stream_.add_shard("s" + std::to_string(i));
  consumer("a");
  rounds({"a"});
  consumer("b");
  consumers_.at("a")->release();
  rounds({"b"});
  EXPECT_EQ(load(), (std::map<std::string, std::size_t>{{"b", 2}}));
}

// ---- DynamoDB Local's real stream ------------------------------------------------------

class RealStreamTest : public DynamoDbTest {
 protected:
  void SetUp() override { open_table(/*with_stream=*/true); }
  // A consumer of the table's stream from its oldest record, as the instance `owner`.
  std::unique_ptr<st::StreamConsumer> stream_consumer(const std::string& owner, st::RecordHandler handler) {
    if (!streams_) {
      arn_ = st::latest_stream_arn(*client_, options_.table).value();
      streams_ = st::make_dynamodb_streams_api(client_options_, ds::aws::load_credentials());
      leases_ = std::make_unique<st::LeaseTable>(*client_, options_.table, arn_);
    }
    st::CoordinatorOptions o;
    o.owner = owner;
    o.initial_position = std::string(st::kTrimHorizon);
    return std::make_unique<st::StreamConsumer>(*streams_, *leases_, arn_, std::move(o), std::move(handler));
  }

  std::string arn_;
  std::unique_ptr<st::StreamsApi> streams_;
  std::unique_ptr<st::LeaseTable> leases_;
};

TEST_F(RealStreamTest, ReadsShadowWritesOfTheDynamoDbStoreFromTheTablesStream) {
  auto arn = st::latest_stream_arn(*client_, options_.table);
  ASSERT_TRUE(arn) << "create-table enables the stream";
  EXPECT_NE(arn->find("/stream/"), std::string::npos);

  auto store = ds::open_dynamodb_store(options_);
  ds::Engine engine(*store);
  auto report = [&](const std::string& thing, const char* state) {
    ds::UpdateRequest r;
    r.key = {thing, "main"};
    r.section = ds::Section::reported;
    r.state = ds::parse_json(state).as_object();
    engine.update(r);
  };
  report("lamp", R"({"on":true})");
  report("lamp", R"({"on":false})");

  std::vector<st::StreamRecord> got;
  std::mutex mutex;
  auto collect = [&](const std::string&, std::span<const st::StreamRecord> records) {
    std::lock_guard lock(mutex);
    got.insert(got.end(), records.begin(), records.end());
    return records.size();
  };
  auto first = stream_consumer("only", collect);
  st::StreamConsumer& consumer = *first;
  consumer.balance();
  ASSERT_EQ(consumer.shards().size(), 1u) << "DynamoDB Local's stream has one shard";
  auto sections = [&] {
    std::vector<st::StreamRecord> out;
    for (const auto& r : got) {
      if (r.keys.at("SK").at("S").as_string() == "DSR#main") out.push_back(r);
    }
    return out;
  };
  for (int i = 0; i < 100 && sections().size() < 2; ++i) {
    if (!consumer.poll()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const auto records = sections();
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0].event_name, "INSERT");
  EXPECT_EQ(records[1].event_name, "MODIFY");
  EXPECT_EQ(records[0].keys.at("PK").at("S").as_string(), "DS#lamp");
  EXPECT_EQ(records[1].old_image.at("state"), records[0].new_image.at("state"));
  EXPECT_EQ(records[1].new_image.at("state").at("M").at("on").at("BOOL"), false);
  EXPECT_LT(st::compare_sequence(records[0].sequence_number, records[1].sequence_number), 0);
  for (const auto& r : got) EXPECT_FALSE(st::is_lease_record(r)) << "lease items are passed over";

  // The checkpoint is stored in the lease: a second consumer resumes after it.
  const std::string checkpoint = leases_->list().at(0).checkpoint;
  EXPECT_EQ(checkpoint, got.back().sequence_number);
  consumer.release();
  report("lamp", R"({"on":true})");
  got.clear();
  auto second_consumer = stream_consumer("second", collect);
  st::StreamConsumer& second = *second_consumer;
  second.balance();
  for (int i = 0; i < 100 && sections().empty(); ++i) {
    if (!second.poll()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(sections().size(), 1u) << "only the write after the checkpoint";
  EXPECT_EQ(sections()[0].new_image.at("state").at("M").at("on").at("BOOL"), true);
}

// A write of both sections whose whole entry could take its reported item past DynamoDB's item
// limit carries the event on both items instead; the assembler joins their two records.
TEST_F(RealStreamTest, AWriteOfBothSectionsTooLargeForOneItemIsJoinedFromItsTwoRecords) {
  auto store = ds::open_dynamodb_store(options_);
  ds::Engine engine(*store);
  engine.set_change_feed(true);
  const std::string big(50000, 'x');
  ds::ShadowUpdate both;
  both.key = {"big", "main"};
  both.reported = ds::SectionUpdate{json::object{{"r", big}}};
  both.desired = ds::SectionUpdate{json::object{{"d", big}}};
  engine.update(both);

  std::mutex mutex;
  std::vector<st::AssembledEntry> entries;
  std::size_t events = 0, whole = 0;
  st::WriteAssembler assembler;
  auto reader = stream_consumer("only", [&](const std::string&, std::span<const st::StreamRecord> page) {
    std::lock_guard lock(mutex);
    for (const st::StreamRecord& r : page) {
      events += r.new_image.contains("feedEvent");
      whole += r.new_image.contains("feedEntry");
      if (auto entry = assembler.add(r)) entries.push_back(std::move(*entry));
    }
    return page.size();
  });
  reader->balance();
  for (int i = 0; i < 200 && entries.empty(); ++i) {
    if (!reader->poll()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  reader->release();
  std::lock_guard lock(mutex);
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].sequence_numbers.size(), 2u);
  EXPECT_EQ(events, 2u);
  EXPECT_EQ(whole, 0u);
  const json::value entry = parsed(entries[0].json);
  EXPECT_EQ(entry.at("reported").at("new").at("r").as_string(), big);
  EXPECT_EQ(entry.at("desired").at("new").at("d").as_string(), big);
}

// ---- the write assembler on DynamoDB Local's stream --------------------------------------

// Keeps each write's change-feed entry as the engine hands it to the store: what an outbox
// store (SQLite, memory) appends for that very write.
class FeedCapture final : public ForwardingStore {
 public:
  using ForwardingStore::ForwardingStore;
  void write(const ds::ShadowWrite& w) override {
    inner_.write(w);
    if (w.feed) feeds.push_back(*w.feed);
  }
  std::vector<std::string> feeds;
};

// One write of each kind, the change feed off for the first one only.
void write_sequence(ds::Engine& engine) {
  const ds::ShadowKey lamp{"lamp", "main"};
  auto update = [&](const ds::ShadowKey& key, ds::Section section, const char* state) {
    ds::UpdateRequest r;
    r.key = key;
    r.section = section;
    r.state = ds::parse_json(state).as_object();
    return engine.update(r);
  };
  update({"lamp", "aux"}, ds::Section::reported, R"({"off":true})");  // before any registration: no entry
  engine.set_change_feed(true);
  update(lamp, ds::Section::reported, R"({"on":true,"temp":21,"modes":["eco","boost"],"cfg":{"label":"kitchen","level":3}})");
  update(lamp, ds::Section::desired, R"({"temp":23,"on":false})");
  const ds::UpdateResult ack = update(lamp, ds::Section::reported, R"({"on":false})");  // acknowledges desired "on"
  EXPECT_EQ(ack.acknowledged.size(), 1u);
  ds::ShadowUpdate both;
  both.key = lamp;
  both.client_token = R"(tok}"{\)";
  both.reported = ds::SectionUpdate{ds::parse_json(R"({"temp":23,"cfg":{"level":null}})").as_object()};
  both.desired = ds::SectionUpdate{ds::parse_json(R"({"fan":"auto"})").as_object()};
  const ds::UpdateResult two = engine.update(both);
  EXPECT_EQ(two.acknowledged.size(), 1u) << "reported temp 23 acknowledges desired temp";
  EXPECT_FALSE(update(lamp, ds::Section::reported, R"({"temp":23})").changed) << "a write with no change";
  engine.remove(lamp, ds::Section::desired);
  update(lamp, ds::Section::desired, R"({"fan":"low"})");
  engine.remove(lamp);  // both sections
  update(lamp, ds::Section::reported, R"({"on":true})");  // over a tombstone
}

// An entry as compared with the memory store's for the same writes. DynamoDB keeps a state's
// members in an order of its own, and a delete lists the removal of each leaf of the stored
// state in that order: the changes are compared as a set. The combined layout's event ids and
// versions differ too (its sections share one version): `versions` false drops them.
json::value comparable(json::value entry, bool versions) {
  json::object& event = entry.at("event").as_object();
  if (!versions) event.erase("id");
  for (const char* section : {"reported", "desired"}) {
    json::value* s = event.if_contains(section);
    if (!s) continue;
    if (!versions) s->as_object().erase("version");
    json::array& changes = s->at("changes").as_array();
    std::sort(changes.begin(), changes.end(), [](const json::value& a, const json::value& b) { return ds::to_json(a) < ds::to_json(b); });
  }
  return entry;
}

struct AssemblyCase {
  ds::DynamoDbLayout layout;
  bool history;
};
std::string name_of(const AssemblyCase& c) {
  return std::string(c.layout == ds::DynamoDbLayout::combined ? "Combined" : "Separate") +
         (c.history ? "WithHistory" : "WithoutHistory");
}
void PrintTo(const AssemblyCase& c, std::ostream* os) { *os << name_of(c); }

class AssemblyTest : public RealStreamTest, public ::testing::WithParamInterface<AssemblyCase> {
 protected:
  void SetUp() override {
    options_.layout = GetParam().layout;
    RealStreamTest::SetUp();
  }
  // A fixed clock (each write takes the next nanosecond), so that both engines' events have the
  // same ids and times; now, so that nothing has expired for DynamoDB's TTL.
  ds::EngineOptions engine_options() const {
    ds::EngineOptions o;
    o.history = GetParam().history;
    o.clock = [t = start_ns_] { return t; };
    return o;
  }
  const std::int64_t start_ns_ =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
};

TEST_P(AssemblyTest, TheRecordsOfEachWriteBecomeTheEntryAnOutboxStoreKeeps) {
  // The same writes through an engine on the DynamoDB store and on the memory store.
  auto dynamodb = ds::open_dynamodb_store(options_);
  FeedCapture captured(*dynamodb);
  ds::Engine engine(captured, engine_options());
  write_sequence(engine);
  auto memory = ds::make_memory_store();
  ds::Engine memory_engine(*memory, engine_options());
  write_sequence(memory_engine);
  const std::vector<ds::FeedEntry> outbox = memory->read_feed(0, 100);
  ASSERT_EQ(outbox.size(), 8u);
  ASSERT_EQ(captured.feeds.size(), outbox.size());

  // Read the table's stream from its start and assemble.
  std::mutex mutex;
  std::vector<st::StreamRecord> records;
  std::vector<st::AssembledEntry> entries;
  st::WriteAssembler assembler;
  auto reader = stream_consumer("only", [&](const std::string&, std::span<const st::StreamRecord> page) {
    std::lock_guard lock(mutex);
    for (const st::StreamRecord& r : page) {
      records.push_back(r);
      if (auto entry = assembler.add(r)) entries.push_back(std::move(*entry));
    }
    return page.size();
  });
  reader->balance();
  for (int i = 0; i < 200 && entries.size() < outbox.size(); ++i) {
    if (!reader->poll()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  reader->release();
  ASSERT_EQ(entries.size(), outbox.size());
  EXPECT_EQ(assembler.waiting(), 0u);

  const bool combined = GetParam().layout == ds::DynamoDbLayout::combined;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    SCOPED_TRACE("write " + std::to_string(i) + ": " + captured.feeds[i]);
    EXPECT_EQ(entries[i].key, outbox[i].key);
    // Exactly the entry an outbox store appends for this very write…
    EXPECT_EQ(parsed(entries[i].json), parsed(captured.feeds[i]));
    // …and the memory store's for the same writes (see comparable()).
    EXPECT_EQ(comparable(parsed(entries[i].json), !combined), comparable(parsed(outbox[i].json), !combined));
  }
  EXPECT_EQ(parsed(entries[3].json).at("event").at("clientToken"), R"(tok}"{\)");
  // Both layouts: every write is one record, a write of both sections too (the separate
  // layout puts its whole entry on its reported item).
  for (const st::AssembledEntry& entry : entries) EXPECT_EQ(entry.sequence_numbers.size(), 1u);

  std::size_t history = 0, events = 0, whole = 0;
  for (const st::StreamRecord& r : records) {
    const std::string pk(r.keys.at("PK").at("S").as_string());
    history += pk.starts_with("DH#");
    if (r.keys.at("SK").at("S").as_string().ends_with("#aux")) {
      EXPECT_FALSE(r.new_image.contains("feedEvent") || r.new_image.contains("feedEntry"))
          << "nothing extra while the change feed is off";
    }
    events += r.new_image.contains("feedEvent");
    whole += r.new_image.contains("feedEntry");
  }
  // Writes of both sections: the acknowledging report, the update of both, the delete.
  EXPECT_EQ(whole, combined ? 0u : 3u);
  EXPECT_EQ(events, combined ? 8u : 5u);
  EXPECT_EQ(history, GetParam().history ? 9u : 0u) << "history items are on the stream and passed over";
}

INSTANTIATE_TEST_SUITE_P(LayoutsAndHistory, AssemblyTest,
                         ::testing::Values(AssemblyCase{ds::DynamoDbLayout::separate, false},
                                           AssemblyCase{ds::DynamoDbLayout::separate, true},
                                           AssemblyCase{ds::DynamoDbLayout::combined, false},
                                           AssemblyCase{ds::DynamoDbLayout::combined, true}),
                         [](const auto& info) { return name_of(info.param); });

class StreamlessTableTest : public DynamoDbTest {
 protected:
  void SetUp() override { open_table(/*with_stream=*/false); }
};

TEST_F(StreamlessTableTest, HasNoStreamArnAndAMissingTableIsNotFound) {
  EXPECT_FALSE(st::latest_stream_arn(*client_, options_.table));
  try {
    st::latest_stream_arn(*client_, options_.table + "-missing");
    ADD_FAILURE() << "no such table";
  } catch (const st::StreamError& e) {
    EXPECT_EQ(e.kind(), st::StreamErrorKind::not_found);
  }
}

}  // namespace
