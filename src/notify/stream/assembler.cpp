#include "notify/stream/assembler.hpp"

#include "deviceshadow/dynamodb_store.hpp"
#include "deviceshadow/error.hpp"

namespace deviceshadow::notify::stream {

std::optional<AssembledEntry> WriteAssembler::add(const StreamRecord& record) {
  if (record.new_image.empty()) return std::nullopt;  // a removal: no write of the engine deletes items
  std::optional<DynamoDbSectionItem> now = decode_dynamodb_section_item(record.new_image);
  if (!now || now->feed_event.empty()) return std::nullopt;
  const json::value event = parse_json(now->feed_event);
  const json::string* id = event.is_object() ? event.as_object().at("id").if_string() : nullptr;
  if (!id) throw Error(ErrorCode::internal, "stream: a feedEvent without an id");
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
  for (int i = 0; i < 2; ++i) {
    if (p.expected[i] && !p.parts[i].seen) return std::nullopt;  // the other item's record is still to come
  }

  AssembledEntry entry{now->key, "{\"event\":" + p.event, std::move(p.sequence_numbers)};
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

std::size_t WriteAssembler::waiting() const {
  std::lock_guard lock(mutex_);
  return pending_.size();
}

}  // namespace deviceshadow::notify::stream
