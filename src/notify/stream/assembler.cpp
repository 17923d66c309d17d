#include "notify/stream/assembler.hpp"

#include "deviceshadow/dynamodb_store.hpp"
#include "deviceshadow/error.hpp"

#include <algorithm>

namespace deviceshadow::notify::stream {

std::optional<AssembledEntry> WriteAssembler::add(const StreamRecord& record, bool* part) {
  if (part) *part = false;
  if (record.new_image.empty()) return std::nullopt;  // a removal: no write of the engine deletes items
  std::optional<DynamoDbSectionItem> now = decode_dynamodb_section_item(record.new_image);
  if (!now || now->feed_event.empty()) return std::nullopt;
  if (!now->feed_entry.empty()) {  // the whole write on one item
    if (part) *part = true;
    const std::size_t event_bytes = now->feed_event.size();
    return AssembledEntry{now->key, std::move(now->feed_entry), {record.sequence_number}, event_bytes};
  }
  json::value event;
  try {
    event = parse_json(now->feed_event, kStoredDepthBound);
  } catch (const Error&) {
  }
  const json::value* member = event.is_object() ? event.as_object().if_contains("id") : nullptr;
  const json::string* id = member ? member->if_string() : nullptr;
  if (!id) {  // never written so: passed over, as an unreadable outbox entry is, not retried forever
    ++unreadable_;
    return std::nullopt;
  }
  std::optional<DynamoDbSectionItem> before;
  if (!record.old_image.empty()) before = decode_dynamodb_section_item(record.old_image);

  std::lock_guard lock(mutex_);
  auto [it, inserted] = pending_.try_emplace({now->key, std::string(*id)});
  Pending& p = it->second;
  if (inserted) {
    p.event = std::move(now->feed_event);
    for (Section s : {Section::reported, Section::desired}) {
      p.expected[s == Section::reported ? 0 : 1] = event.as_object().contains(to_string(s));
    }
  }
  bool took = false;
  for (Section s : {Section::reported, Section::desired}) {
    const int i = s == Section::reported ? 0 : 1;
    if (!p.expected[i] || p.parts[i].seen || (now->section && *now->section != s)) continue;
    const SectionRecord* old = before ? &before->record.section(s) : nullptr;
    p.parts[i] = {true, old && old->exists() ? old->state_json : "{}", now->record.section(s).state_json};
    took = true;
  }
  if (took) p.sequence_numbers.push_back(record.sequence_number);
  if (part) *part = took;
  if (inserted && !took) {  // an item of a section its own event does not name: no write of the engine
    pending_.erase(it);
    return std::nullopt;
  }
  for (int i = 0; i < 2; ++i) {
    if (p.expected[i] && !p.parts[i].seen) return std::nullopt;  // the other item's record is still to come
  }

  AssembledEntry entry{now->key, "{\"event\":" + p.event, std::move(p.sequence_numbers), p.event.size()};
  for (Section s : {Section::reported, Section::desired}) {
    const int i = s == Section::reported ? 0 : 1;
    if (!p.expected[i]) continue;
    entry.json += ",\"";
    entry.json += to_string(s);
    entry.json += "\":{\"old\":" + p.parts[i].old_state + ",\"new\":" + p.parts[i].new_state + '}';
  }
  entry.json += '}';
  pending_.erase(it);
  return entry;
}

void WriteAssembler::drop(std::string_view sequence_number) {
  std::lock_guard lock(mutex_);
  std::erase_if(pending_, [&](const auto& p) {
    const auto& numbers = p.second.sequence_numbers;
    return std::find(numbers.begin(), numbers.end(), sequence_number) != numbers.end();
  });
}

std::size_t WriteAssembler::waiting() const {
  std::lock_guard lock(mutex_);
  return pending_.size();
}

}  // namespace deviceshadow::notify::stream
