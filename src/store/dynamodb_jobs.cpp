// The DynamoDB store's bulk jobs (JobStore): job items in one partition, each job's target pages
// in a partition of its own (docs/storage.md, "Job items"). Several shadowd on one table share
// them; the runner claims a job by a write conditional on its revision (jobs/runner.cpp).
#include "store/dynamodb.hpp"
#include "store/target_pages.hpp"

#include <algorithm>
#include <cstdio>

namespace deviceshadow {

using namespace dynamodb;

namespace {

// Every job is one item of this partition, its id (which sorts by creation) the sort key, so
// listing newest first is one Query read backwards.
constexpr std::string_view kJobsPk = "JB#";
// An active job also carries GSI1PK = this and GSI1SK = its id; a finished job has neither, so
// the index lists only the active (a sparse index).
constexpr std::string_view kActiveJobsGsiPk = "JOBS#active";
// The running jobs: one item whose string set `ids` holds the id of every active job, changed in
// the transaction that creates a job or finishes it, so that --max-jobs holds across every
// shadowd on the table (GSI1 would count a moment late).
constexpr std::string_view kRunningJobsPk = "JR#";
constexpr std::string_view kRunningJobsSk = "ids";
// A job's target pages: one partition per job, the page number (20 digits) the sort key.
constexpr std::string_view kTargetsPkPrefix = "JT#";
std::string targets_pk(std::string_view job) { return std::string(kTargetsPkPrefix) + std::string(job); }
std::string page_sk(std::uint64_t page) {
  char sk[21];
  std::snprintf(sk, sizeof sk, "%020llu", static_cast<unsigned long long>(page));
  return sk;
}

// A page's targets encoded in parts of at most kTargetPartBytes each, halved until each fits.
constexpr std::size_t kTargetPartBytes = 300 << 10;
void encode_parts(std::span<const ShadowKey> targets, std::vector<std::string>& out) {
  std::string list = encode_target_page(targets);
  if (list.size() <= kTargetPartBytes || targets.size() < 2) return out.push_back(std::move(list));
  encode_parts(targets.first(targets.size() / 2), out);
  encode_parts(targets.subspan(targets.size() / 2), out);
}

json::object job_item(const JobRecord& job, std::uint64_t revision) {
  json::object item{{"PK", S(kJobsPk)},
                    {"SK", S(job.id)},
                    {"spec", S(job.spec)},
                    {"progress", S(job.progress)},
                    {"active", json::object{{"BOOL", job.active}}},
                    {"revision", N(static_cast<std::int64_t>(revision))},
                    {"leaseExpires", N(job.lease_expires_ns)}};
  if (!job.owner.empty()) item["owner"] = S(job.owner);
  if (job.active) {
    item["GSI1PK"] = S(kActiveJobsGsiPk);
    item["GSI1SK"] = S(job.id);
  }
  return item;
}

JobRecord job_of(const json::object& item) {
  return {get_s(item, "SK"),
          get_s(item, "spec"),
          get_s(item, "progress"),
          get_bool(item, "active"),
          static_cast<std::uint64_t>(get_n(item, "revision")),
          item.contains("owner") ? get_s(item, "owner") : std::string(),
          get_n(item, "leaseExpires")};
}

// A conditional PutItem: false when its condition failed.
bool put_if(JsonClient& client, json::object request) {
  try {
    client.call("PutItem", to_json(request), true);
    return true;
  } catch (const AwsError& e) {
    if (e.type() == "ConditionalCheckFailedException") return false;
    throw translate(e);
  }
}

// An update of the running jobs' item adding (ADD) or removing (DELETE) `id`.
json::object running_jobs_update(const std::string& table, std::string_view action, std::string_view id) {
  return {{"TableName", table},
          {"Key", json::object{{"PK", S(kRunningJobsPk)}, {"SK", S(kRunningJobsSk)}}},
          {"UpdateExpression", std::string(action) + " ids :id"},
          {"ExpressionAttributeValues", json::object{{":id", json::object{{"SS", json::array{json::string(id)}}}}}}};
}

}  // namespace

// An active job is created with its id added to the running jobs' item, on the condition that it
// holds fewer than max_active; a finished one (no targets) is one PutItem. A creation whose
// condition fails finds the job stored as it writes it when a resend's first attempt landed.
void DynamoDbStore::create_job(const JobRecord& job, std::size_t max_active) {
  json::object put{{"TableName", options_.table}, {"Item", job_item(job, 1)}, {"ConditionExpression", "attribute_not_exists(PK)"}};
  const auto exists = [&] { return Error::version_conflict(0, "job " + job.id + " exists"); };
  if (!job.active) {
    if (!put_if(*client_, std::move(put)) && !stored_as_created(job)) throw exists();
    return;
  }
  json::object running = running_jobs_update(options_.table, "ADD", job.id);
  running["ConditionExpression"] = "attribute_not_exists(ids) OR size(ids) < :max";
  running["ExpressionAttributeValues"].as_object()[":max"] = N(static_cast<std::int64_t>(max_active));
  const std::string request =
      transaction({json::object{{"Put", std::move(put)}}, json::object{{"Update", std::move(running)}}});
  for (bool repaired = false;; repaired = true) {
    const std::vector<std::string> failed = transact(request, true, options_.max_attempts);
    if (failed.empty()) return;
    if (failed.front() == "ConditionalCheckFailed") {
      if (stored_as_created(job)) return;
      throw exists();
    }
    if (repaired || !repair_running_jobs()) throw TooManyJobs(max_active);
  }
}

bool DynamoDbStore::stored_as_created(const JobRecord& job) {
  JobRecord created = job;
  created.revision = 1;
  const std::optional<JobRecord> stored = this->job(job.id);
  return stored && *stored == created;
}

bool DynamoDbStore::repair_running_jobs() {
  const json::value r = call("GetItem",
                             {{"TableName", options_.table},
                              {"Key", json::object{{"PK", S(kRunningJobsPk)}, {"SK", S(kRunningJobsSk)}}},
                              {"ConsistentRead", true}},
                             true);
  const json::value* item = r.as_object().if_contains("Item");
  const json::value* ids = item ? item->as_object().if_contains("ids") : nullptr;
  if (!ids) return false;
  bool dropped = false;
  for (const json::value& id : ids->as_object().at("SS").as_array()) {
    // An id enters the set with its job's item, in one transaction: a missing job was removed.
    const std::optional<JobRecord> j = job(id.as_string());
    if (j && j->active) continue;
    call("UpdateItem", running_jobs_update(options_.table, "DELETE", id.as_string()), true);
    dropped = true;
  }
  return dropped;
}

// A resent write whose first attempt landed fails its condition and answers false: the caller
// reads the job again, finds it at the revision it wrote, and goes on from there. A job written
// finished leaves the running jobs' item in the same transaction.
bool DynamoDbStore::update_job(const JobRecord& job, std::uint64_t expected_revision) {
  json::object put{{"TableName", options_.table},
                   {"Item", job_item(job, expected_revision + 1)},
                   {"ConditionExpression", "revision = :expected"},
                   {"ExpressionAttributeValues", json::object{{":expected", N(static_cast<std::int64_t>(expected_revision))}}}};
  if (job.active) return put_if(*client_, std::move(put));
  return transact(transaction({json::object{{"Put", std::move(put)}},
                               json::object{{"Update", running_jobs_update(options_.table, "DELETE", job.id)}}}),
                  true, options_.max_attempts)
      .empty();
}

std::optional<JobRecord> DynamoDbStore::job(std::string_view id) {
  json::value r = call("GetItem",
                       {{"TableName", options_.table},
                        {"Key", json::object{{"PK", S(kJobsPk)}, {"SK", S(id)}}},
                        {"ConsistentRead", true}},
                       true);
  const json::value* item = r.as_object().if_contains("Item");
  if (!item) return std::nullopt;
  return job_of(item->as_object());
}

std::vector<JobRecord> DynamoDbStore::jobs(std::string_view before, std::size_t limit) {
  json::object q = base_query(std::string(kJobsPk));
  q["KeyConditionExpression"] = "PK = :pk";
  if (!before.empty()) {  // a key condition may not compare with an empty string
    q["KeyConditionExpression"] = "PK = :pk AND SK < :before";
    q["ExpressionAttributeValues"].as_object()[":before"] = S(before);
  }
  q["ScanIndexForward"] = false;
  std::vector<JobRecord> out;
  while (out.size() < limit) {
    q["Limit"] = static_cast<std::int64_t>(std::min<std::size_t>(limit - out.size(), 100));
    json::value page = call("Query", q, true);
    for (const json::value& v : page.at("Items").as_array()) out.push_back(job_of(v.as_object()));
    const json::value* last = page.as_object().if_contains("LastEvaluatedKey");
    if (!last) break;
    q["ExclusiveStartKey"] = *last;
  }
  return out;
}

// The index (eventually consistent, keys only) names the active jobs; each is then read
// consistently, and one finished meanwhile is left out.
std::vector<JobRecord> DynamoDbStore::active_jobs() {
  json::object q{{"TableName", options_.table},
                 {"IndexName", "GSI1"},
                 {"KeyConditionExpression", "GSI1PK = :pk"},
                 {"ExpressionAttributeValues", json::object{{":pk", S(kActiveJobsGsiPk)}}}};
  std::vector<std::string> ids;
  for (;;) {
    json::value page = call("Query", q, true);
    for (const json::value& v : page.at("Items").as_array()) ids.push_back(get_s(v.as_object(), "SK"));
    const json::value* last = page.as_object().if_contains("LastEvaluatedKey");
    if (!last) break;
    q["ExclusiveStartKey"] = *last;
  }
  std::map<std::pair<std::string, std::string>, json::object> items;  // in id order
  for (std::size_t start = 0; start < ids.size(); start += options_.max_read_batch) {
    json::array keys;
    for (std::size_t i = start; i < std::min(ids.size(), start + options_.max_read_batch); ++i) {
      keys.push_back(json::object{{"PK", S(kJobsPk)}, {"SK", S(ids[i])}});
    }
    batch_get(std::move(keys), items);
  }
  std::vector<JobRecord> out;
  for (const auto& [key, item] : items) {
    if (get_bool(item, "active")) out.push_back(job_of(item));
  }
  return out;
}

void DynamoDbStore::remove_job(std::string_view id) {
  remove_targets(id);
  transact(transaction({json::object{{"Delete", json::object{{"TableName", options_.table},
                                                             {"Key", json::object{{"PK", S(kJobsPk)}, {"SK", S(id)}}}}}},
                        json::object{{"Update", running_jobs_update(options_.table, "DELETE", id)}}}),
           true, options_.max_attempts);
}

// A page of targets past kTargetPartBytes (1,000 things of up to 512 bytes, more when escaped)
// is stored as several items: the first (the page's own key) names how many, the others follow
// it as "PAGE#PART". The later parts are written first.
void DynamoDbStore::put_targets(std::string_view job, std::uint64_t page, std::span<const ShadowKey> targets) {
  std::vector<std::string> parts;
  encode_parts(targets, parts);
  for (std::size_t i = parts.size(); i-- > 0;) {
    check_size(parts[i].size() + 64);
    json::object item{{"PK", S(targets_pk(job))},
                      {"SK", S(i == 0 ? page_sk(page) : page_sk(page) + "#" + std::to_string(i))},
                      {"targets", S(parts[i])}};
    if (i == 0 && parts.size() > 1) item["parts"] = N(static_cast<std::int64_t>(parts.size()));
    call("PutItem", {{"TableName", options_.table}, {"Item", std::move(item)}}, true);
  }
}

std::vector<ShadowKey> DynamoDbStore::targets(std::string_view job, std::uint64_t page) {
  std::vector<ShadowKey> out;
  for (std::int64_t part = 0, parts = 1; part < parts; ++part) {
    const std::string sk = part == 0 ? page_sk(page) : page_sk(page) + "#" + std::to_string(part);
    json::value r = call("GetItem",
                         {{"TableName", options_.table},
                          {"Key", json::object{{"PK", S(targets_pk(job))}, {"SK", S(sk)}}},
                          {"ConsistentRead", true}},
                         true);
    const json::value* item = r.as_object().if_contains("Item");
    if (!item) return {};  // the page, or a part of it, is gone: the runner ends the job as lost
    if (part == 0 && item->as_object().contains("parts")) parts = get_n(item->as_object(), "parts");
    std::vector<ShadowKey> keys = decode_target_page(get_s(item->as_object(), "targets"));
    out.insert(out.end(), std::make_move_iterator(keys.begin()), std::make_move_iterator(keys.end()));
  }
  return out;
}

void DynamoDbStore::remove_targets(std::string_view job) { delete_partition(targets_pk(job), "job targets"); }

// Each job's pages are a partition of their own, found only by scanning the table: kept (they
// cost storage alone; docs/jobs.md).
void DynamoDbStore::remove_orphan_targets(std::string_view) {}

}  // namespace deviceshadow
