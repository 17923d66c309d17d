// The memory store's bulk jobs (JobStore): job records and their target pages.
#include "store/memory_store.hpp"

#include "deviceshadow/error.hpp"

#include <algorithm>
#include <mutex>

namespace deviceshadow {

void MemoryStore::create_job(const JobRecord& job, std::size_t max_active) {
  std::unique_lock lock(mutex_);
  JobRecord stored = job;
  stored.revision = 1;
  if (auto it = jobs_.find(job.id); it != jobs_.end()) {
    if (it->second != stored) throw Error::version_conflict(0, "job " + job.id + " exists");
    return;  // a resent request
  }
  if (job.active && static_cast<std::size_t>(std::count_if(jobs_.begin(), jobs_.end(), [](const auto& j) {
                      return j.second.active;
                    })) >= max_active) {
    throw TooManyJobs(max_active);
  }
  jobs_.emplace(job.id, std::move(stored));
}

bool MemoryStore::update_job(const JobRecord& job, std::uint64_t expected_revision) {
  std::unique_lock lock(mutex_);
  auto it = jobs_.find(job.id);
  if (it == jobs_.end() || it->second.revision != expected_revision) return false;
  it->second = job;
  it->second.revision = expected_revision + 1;
  return true;
}

std::optional<JobRecord> MemoryStore::job(std::string_view id) {
  std::shared_lock lock(mutex_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) return std::nullopt;
  return it->second;
}

std::vector<JobRecord> MemoryStore::jobs(std::string_view before, std::size_t limit) {
  std::shared_lock lock(mutex_);
  std::vector<JobRecord> out;
  for (auto it = before.empty() ? jobs_.begin() : jobs_.upper_bound(before); it != jobs_.end() && out.size() < limit; ++it) {
    out.push_back(it->second);
  }
  return out;
}

std::vector<JobRecord> MemoryStore::active_jobs() {
  std::shared_lock lock(mutex_);
  std::vector<JobRecord> out;
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) {
    if (it->second.active) out.push_back(it->second);
  }
  return out;
}

void MemoryStore::remove_job(std::string_view id) {
  remove_targets(id);
  std::unique_lock lock(mutex_);
  if (auto it = jobs_.find(id); it != jobs_.end()) jobs_.erase(it);
}

void MemoryStore::put_targets(std::string_view job, std::uint64_t page, std::span<const ShadowKey> targets) {
  std::unique_lock lock(mutex_);
  job_targets_[{std::string(job), page}].assign(targets.begin(), targets.end());
}

std::vector<ShadowKey> MemoryStore::targets(std::string_view job, std::uint64_t page) {
  std::shared_lock lock(mutex_);
  auto it = job_targets_.find({std::string(job), page});
  return it == job_targets_.end() ? std::vector<ShadowKey>() : it->second;
}

void MemoryStore::remove_targets(std::string_view job) {
  std::unique_lock lock(mutex_);
  auto it = job_targets_.lower_bound({std::string(job), 0});
  while (it != job_targets_.end() && it->first.first == job) it = job_targets_.erase(it);
}

void MemoryStore::remove_orphan_targets(std::string_view before) {
  std::unique_lock lock(mutex_);
  for (auto it = job_targets_.begin(); it != job_targets_.end() && it->first.first < before;) {
    it = jobs_.contains(it->first.first) ? std::next(it) : job_targets_.erase(it);
  }
}

}  // namespace deviceshadow
