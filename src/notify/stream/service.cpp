#include "notify/stream/service.hpp"

#include "aws/client.hpp"
#include "aws/credentials.hpp"
#include "store/dynamodb_client.hpp"

#include <unistd.h>

#include <algorithm>
#include <random>

namespace deviceshadow::notify::stream {
namespace {

std::string default_owner() {
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  std::random_device random;
  char suffix[16];
  std::snprintf(suffix, sizeof suffix, "%08x", random());
  return std::string(host) + "#" + std::to_string(getpid()) + "#" + suffix;
}

}  // namespace

std::optional<std::string> StreamService::find_stream(DynamoDbOptions table) {
  aws::JsonClient dynamodb(dynamodb_client_options(table), aws::load_credentials(table.profile));
  return latest_stream_arn(dynamodb, table.table);
}

StreamService::StreamService(DynamoDbOptions table, const std::string& stream_arn, StreamServiceOptions options,
                             StreamLog log)
    : owner_(options.owner.empty() ? default_owner() : options.owner),
      options_(std::move(options)),
      log_(log ? std::move(log) : [](bool, std::string_view, std::vector<std::pair<std::string, std::string>>) {}),
      feed_(options_.feed) {
  const aws::ClientOptions client = dynamodb_client_options(table);
  const aws::Credentials credentials = aws::load_credentials(table.profile);
  dynamodb_ = std::make_unique<aws::JsonClient>(client, credentials);
  streams_ = make_dynamodb_streams_api(client, credentials);
  leases_ = std::make_unique<LeaseTable>(*dynamodb_, table.table, stream_arn);
  CoordinatorOptions coordination;
  coordination.owner = owner_;
  coordination.lease_timeout = options_.lease_timeout;
  coordination.renew_interval = options_.lease_timeout / 3;
  // Even at the very first start: a shard begun at LATEST has no sequence number to store
  // until a record is done, and a process dying before then would leave its successor to
  // begin at LATEST too, past what was written meanwhile. Records of writes made while no
  // registration existed carry no change event and are passed over cheaply.
  coordination.initial_position = std::string(kTrimHorizon);
  consumer_ = std::make_unique<StreamConsumer>(
      *streams_, *leases_, stream_arn, std::move(coordination),
      [this](const std::string& shard, std::span<const StreamRecord> records) { return feed_.take(shard, records); },
      log_, /*page_limit=*/1000, [this](const std::string& shard) { feed_.forget(shard); });
  thread_ = std::thread([this] { run(); });
}

StreamService::~StreamService() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  try {
    consumer_->release();
  } catch (const std::exception& e) {
    log_(true, "freeing the stream's shard leases failed; others take them over after the lease timeout",
         {{"error", e.what()}});
  }
}

void StreamService::run() {
  using Clock = std::chrono::steady_clock;
  const auto balance_every = options_.lease_timeout / 3;
  Clock::time_point next_balance{};
  std::chrono::milliseconds failing{0};  // the wait after a failure, doubling up to 5 s
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    lock.unlock();
    bool progressed = false;
    try {
      if (Clock::now() >= next_balance) {
        next_balance = Clock::now() + balance_every;
        consumer_->balance();
      }
      progressed = consumer_->poll();
      failing = std::chrono::milliseconds(0);
    } catch (const std::exception& e) {
      failing = std::clamp(failing * 2, std::chrono::milliseconds(100), std::chrono::milliseconds(5000));
      log_(true, "reading the table's stream failed", {{"error", e.what()}, {"retry_ms", std::to_string(failing.count())}});
    }
    shards_.store(consumer_->shards().size(), std::memory_order_relaxed);
    lock.lock();
    if (!progressed) {
      cv_.wait_for(lock, std::max(failing, options_.idle), [&] { return stopping_; });
    }
  }
}

}  // namespace deviceshadow::notify::stream
