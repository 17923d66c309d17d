// Time travel over the history journal (include/deviceshadow/time_travel.hpp).
//
// A section's state at event t is rebuilt by replaying its changes forward, in the order the
// merge made them, from the last point at or before t where the state is known: right after a
// delete of the section (empty) or right before the write that created it (version 1, empty).
// Replaying forward puts members where the merge put them (new ones last), and the leaf times
// come out of the same update_leaf_times the engine ran. A section no event changed after t is
// read as it is now.
#include "deviceshadow/time_travel.hpp"

#include "deviceshadow/arena.hpp"
#include "deviceshadow/error.hpp"
#include "deviceshadow/event_id.hpp"
#include "deviceshadow/json.hpp"
#include "deviceshadow/json_builder.hpp"
#include "deviceshadow/leaf_times.hpp"
#include "deviceshadow/timestamp.hpp"

#include <boost/json/basic_parser_impl.hpp>

#include <algorithm>
#include <array>
#include <cctype>

namespace deviceshadow {
namespace {

// invalid_request on a server that keeps no history.
void require_history(const EngineOptions& options) {
  if (!options.keeps_history()) throw Error::invalid_request("history is off on this server: no past states are kept");
}

// One history event as replay needs it.
struct PastEvent {
  struct Part {
    bool present = false;  // the event stored this section
    std::uint64_t version = 0;
    std::string tz;
    std::vector<Change> changes;
  };
  std::string id;
  std::int64_t timestamp_ns = 0;
  bool is_delete = false;
  std::string client_token;
  std::array<Part, 2> parts;  // [0] reported, [1] desired

  const Part& part(Section s) const { return parts[s == Section::reported ? 0 : 1]; }
};

// A state image (encode_image) read back: the shadow's record without the sections' state text,
// and their states as documents.
struct PastImage {
  ShadowRecord record;
  std::array<json::value, 2> states;  // [0] reported, [1] desired

  json::value& state(Section s) { return states[s == Section::reported ? 0 : 1]; }
  const json::value& state(Section s) const { return states[s == Section::reported ? 0 : 1]; }
};

// Reads a stored change event (render_change_event) straight into a PastEvent, with no
// document of the event: the members replay needs are taken as the parser passes them, the
// changes' "new" values (and "old" ones when asked) are built in the given storage, and
// everything else is parsed past: three fifths of the instructions that parsing the event into a
// document and picking from it took.
class EventParser {
 public:
  static constexpr std::size_t max_object_size = ValueBuilder::max_object_size;
  static constexpr std::size_t max_array_size = ValueBuilder::max_array_size;
  static constexpr std::size_t max_key_size = ValueBuilder::max_key_size;
  static constexpr std::size_t max_string_size = ValueBuilder::max_string_size;

  EventParser(std::string_view input, PastEvent& event, json::storage_ptr sp, bool with_old, unsigned char* scratch,
              std::size_t size)
      : input_(input), event_(event), sp_(std::move(sp)), with_old_(with_old), values_(scratch, size) {}

  // Whether the document was an object.
  bool read_event() const { return read_event_; }

  bool on_document_begin(json::error_code&) { return true; }
  bool on_document_end(json::error_code&) { return true; }
  bool on_object_begin(json::error_code&) { return open(true); }
  bool on_object_end(std::size_t n, json::error_code& ec) { return close(true, n, ec); }
  bool on_array_begin(json::error_code&) { return open(false); }
  bool on_array_end(std::size_t n, json::error_code& ec) { return close(false, n, ec); }
  bool on_key_part(json::string_view s, std::size_t n, json::error_code& ec) {
    if (building_) return values_.on_key_part(s, n, ec);
    if (!skipping_) text_.append(s.data(), s.size());
    return true;
  }
  bool on_key(json::string_view s, std::size_t n, json::error_code& ec) {
    if (building_) return values_.on_key(s, n, ec);
    if (skipping_) return true;
    if (text_.empty() && s.data() >= input_.data() && s.data() + s.size() <= input_.data() + input_.size()) {
      key_ = std::string_view(s.data(), s.size());  // not escaped: in the text parsed
    } else {
      own_key_.assign(text_).append(s.data(), s.size());
      key_ = own_key_;
      text_.clear();
    }
    return true;
  }
  bool on_string_part(json::string_view s, std::size_t n, json::error_code& ec) {
    if (building_) return values_.on_string_part(s, n, ec);
    if (!skipping_) text_.append(s.data(), s.size());
    return true;
  }
  bool on_string(json::string_view s, std::size_t n, json::error_code& ec) {
    if (building_) return values_.on_string(s, n, ec);
    if (skipping_) return true;
    std::string_view text(s.data(), s.size());
    if (!text_.empty()) text = text_.append(text);
    if (!scalar([&] { return values_.on_string(text, text.size(), ec); })) {
      const std::string_view key = key_;
      if (at_ == Where::change && key == "path") {
        change().path = text;
      } else if (at_ == Where::change && key == "op") {
        change().op = text == "add" ? ChangeOp::add : text == "update" ? ChangeOp::update : ChangeOp::remove;
      } else if (at_ == Where::event && key == "op") {
        event_.is_delete = text == "delete";
      } else if (at_ == Where::event && key == "clientToken") {
        event_.client_token = text;
      } else if (at_ == Where::section && key == "tz") {
        part().tz = text;
      }
    }
    text_.clear();
    return !ec;
  }
  bool on_number_part(json::string_view s, json::error_code& ec) { return skipping_ || values_.on_number_part(s, ec); }
  bool on_int64(std::int64_t i, json::string_view s, json::error_code& ec) {
    if (building_) return values_.on_int64(i, s, ec);
    if (!skipping_ && !scalar([&] { return values_.on_int64(i, s, ec); })) version(json::value(i));
    return true;
  }
  bool on_uint64(std::uint64_t u, json::string_view s, json::error_code& ec) {
    if (building_) return values_.on_uint64(u, s, ec);
    if (!skipping_ && !scalar([&] { return values_.on_uint64(u, s, ec); })) version(json::value(u));
    return true;
  }
  bool on_double(double d, json::string_view s, json::error_code& ec) {
    if (building_) return values_.on_double(d, s, ec);
    if (!skipping_ && !scalar([&] { return values_.on_double(d, s, ec); })) version(json::value(d));
    return !ec;
  }
  bool on_bool(bool b, json::error_code& ec) {
    if (building_) return values_.on_bool(b, ec);
    if (!skipping_) scalar([&] { return values_.on_bool(b, ec); });
    return true;
  }
  bool on_null(json::error_code& ec) {
    if (building_) return values_.on_null(ec);
    if (!skipping_) scalar([&] { return values_.on_null(ec); });
    return true;
  }
  bool on_comment_part(json::string_view, json::error_code&) { return true; }
  bool on_comment(json::string_view, json::error_code&) { return true; }

 private:
  // What the innermost open container is to the event.
  enum class Where { top, event, section, changes, change };

  PastEvent::Part& part() { return event_.parts[section_ == Section::reported ? 0 : 1]; }
  Change& change() { return part().changes.back(); }

  // Where the value starting here is to be built: a change's new value, or its old one.
  std::optional<json::value>* target() {
    if (at_ != Where::change) return nullptr;
    if (key_ == "new") return &change().new_value;
    if (key_ == "old" && with_old_) return &change().old_value;
    return nullptr;
  }

  // Builds the scalar starting here when it is a change's value; false when it is not.
  template <class Push>
  bool scalar(Push push) {
    std::optional<json::value>* into = target();
    if (!into) return false;
    values_.stack.reset(sp_);
    if (push()) *into = values_.stack.release();
    return true;
  }

  // A number no change holds: the section's version, or nothing.
  void version(const json::value& number) {
    values_.number_text.clear();  // the number's text, if it came in parts
    if (at_ == Where::section && key_ == "version") part().version = number.to_number<std::uint64_t>();
  }

  bool open(bool object) {
    if (building_ || skipping_) {
      ++(building_ ? building_ : skipping_);
      return true;
    }
    if ((into_ = target())) {
      values_.stack.reset(sp_);
      building_ = 1;
      return true;
    }
    Where next = at_;
    if (object && at_ == Where::top) {
      next = Where::event;
      read_event_ = true;
    } else if (object && at_ == Where::event && (key_ == "reported" || key_ == "desired")) {
      next = Where::section;
      section_ = key_ == "reported" ? Section::reported : Section::desired;
      part().present = true;
      part().changes.reserve(4);
    } else if (!object && at_ == Where::section && key_ == "changes") {
      next = Where::changes;
    } else if (object && at_ == Where::changes) {
      next = Where::change;
      part().changes.emplace_back().section = section_;
    } else {
      skipping_ = 1;
      return true;
    }
    outer_[depth_++] = at_;
    at_ = next;
    return true;
  }

  bool close(bool object, std::size_t n, json::error_code& ec) {
    if (building_) {
      if (!(object ? values_.on_object_end(n, ec) : values_.on_array_end(n, ec))) return false;
      if (--building_ == 0) *into_ = values_.stack.release();
      return true;
    }
    if (skipping_) {
      --skipping_;
      return true;
    }
    at_ = outer_[--depth_];
    return true;
  }

  std::string_view input_;  // the text parsed
  PastEvent& event_;
  json::storage_ptr sp_;
  bool with_old_;
  ValueBuilder values_;
  bool read_event_ = false;
  Where at_ = Where::top;
  std::array<Where, 4> outer_{};  // the containers around at_, outermost first
  std::size_t depth_ = 0;
  Section section_ = Section::reported;
  std::string_view key_;  // the last key read in at_: in input_ or own_key_
  std::string own_key_;
  std::string text_;  // a key or string arriving in parts
  int building_ = 0;  // the depth within the change value being built into into_, or 0
  std::optional<json::value>* into_ = nullptr;
  int skipping_ = 0;  // the depth within a container nothing is taken from, or 0
};

// The event's values are built in `sp`: give events replayed together one arena. Old values
// are read only `with_old` (replaying forward needs the new ones alone).
PastEvent parse_event(const HistoryEvent& stored, const json::storage_ptr& sp = {}, bool with_old = false) {
  PastEvent e;
  e.id = stored.id;
  e.timestamp_ns = stored.timestamp_ns;
  json::parse_options options;
  options.max_depth = 512;
  unsigned char scratch[2048];
  json::basic_parser<EventParser> parser(options, stored.json, e, sp, with_old, scratch, sizeof scratch);
  json::error_code ec;
  const std::size_t consumed = parser.write_some(false, stored.json.data(), stored.json.size(), ec);
  if (ec || consumed < stored.json.size() || !parser.handler().read_event()) {
    throw Error(ErrorCode::internal, "history event " + stored.id + " is not a change event");
  }
  return e;
}

// The shadow's current record and every history event kept, oldest first. The record is read
// first, so every write it shows has its event in the list (history inline).
struct Journal {
  json::storage_ptr arena = json::make_shared_resource<Arena>();  // the events' values and replayed states
  ShadowRecord current;
  std::vector<PastEvent> events;
  bool shared = false;  // the sections share one version (DynamoDB's combined layout)
  // A window of the history from an image on: the shadow right after events.front(). Then
  // `events` ends at the moment read and `current` is not read.
  std::optional<PastImage> base;
  bool leaf_times = true;  // rebuild the leaf times of replayed sections (else they are "")

  // The event index that first stored section s, or nullopt.
  std::optional<std::size_t> first_of(Section s) const {
    for (std::size_t i = 0; i < events.size(); ++i) {
      if (events[i].part(s).present) return i;
    }
    return std::nullopt;
  }
  // Whether the state of section s before the oldest event kept is known to be absent.
  bool known_from_start(Section s) const {
    if (events.empty()) return false;
    if (shared) {
      for (const PastEvent::Part& p : events.front().parts) {
        if (p.present && p.version == 1) return true;
      }
      return false;
    }
    auto first = first_of(s);
    return first ? events[*first].part(s).version == 1 : current.section(s).version == 0;
  }
  // Whether the current record shows the last event kept of section s (a write can land
  // between reading the record and reading the history).
  bool current_matches(Section s) const {
    if (shared) {
      std::uint64_t newest = 0;
      for (const PastEvent::Part& p : events.back().parts) newest = std::max(newest, p.version);
      return newest == std::max(current.reported.version, current.desired.version);
    }
    for (std::size_t i = events.size(); i-- > 0;) {
      if (events[i].part(s).present) return events[i].part(s).version == current.section(s).version;
    }
    return true;
  }
  bool complete() const { return known_from_start(Section::reported) && known_from_start(Section::desired); }
  // Whether event i is the write that created section s (so the state before it was empty).
  bool creates(std::size_t i, Section s) const;

  [[noreturn]] void expired(const std::string& what) const {
    throw Error::history_expired(what + " needs history events that retention removed", events.front().id,
                                 events.front().timestamp_ns);
  }
};

// Whether event e is the write that created section s (so the state before it was empty).
bool creates(const PastEvent& e, Section s, bool shared) {
  if (!shared) return e.part(s).present && e.part(s).version == 1;
  return std::any_of(e.parts.begin(), e.parts.end(), [](const PastEvent::Part& q) { return q.present && q.version == 1; });
}

// An id after every event of times up to time_ns and before every later one.
std::string id_after_time(std::int64_t time_ns) {
  std::string digits = std::to_string(time_ns);
  return std::string(20 - std::min<std::size_t>(20, digits.size()), '0') + digits + "#~";
}

// A shadow's history kept, oldest first, read a page at a time as it is consumed.
class EventReader {
 public:
  // From the start, or from the first event after `after_id` (at or after since_ns); the
  // changes' old values too when `with_old`.
  EventReader(Store& store, const ShadowKey& key, std::string after_id = {}, std::int64_t since_ns = INT64_MIN,
              bool with_old = false)
      : store_(store), key_(key), with_old_(with_old) {
    query_.limit = 1000;
    query_.descending = false;
    query_.since_ns = since_ns;
    query_.after_id = std::move(after_id);
  }
  // The next event, or nullptr past the last.
  const PastEvent* next() {
    if (next_ == page_.size()) {
      if (done_) return nullptr;
      std::vector<HistoryEvent> stored = store_.history(key_, query_);
      done_ = stored.size() < query_.limit;
      if (!stored.empty()) query_.after_id = stored.back().id;
      page_.clear();
      next_ = 0;
      const json::storage_ptr arena = json::make_shared_resource<Arena>();  // one a page
      for (const HistoryEvent& e : stored) page_.push_back(parse_event(e, arena, with_old_));
      if (page_.empty()) return nullptr;
    }
    return &page_[next_++];
  }

 private:
  Store& store_;
  const ShadowKey& key_;
  bool with_old_;
  HistoryQuery query_;
  std::vector<PastEvent> page_;
  std::size_t next_ = 0;
  bool done_ = false;
};

// The oldest and newest history events kept, with nothing between them read.
std::optional<HistoryEvent> end_event(Store& store, const ShadowKey& key, bool newest) {
  HistoryQuery q;
  q.limit = 1;
  q.descending = newest;
  std::vector<HistoryEvent> page = store.history(key, q);
  if (page.empty()) return std::nullopt;
  return std::move(page.front());
}

[[noreturn]] void history_expired_at(Store& store, const ShadowKey& key, const std::string& what) {
  std::optional<HistoryEvent> oldest = end_event(store, key, false);
  if (!oldest) throw Error::not_found("shadow " + key.name + " of thing " + key.thing + " has no history");
  throw Error::history_expired(what + " needs history events that retention removed", oldest->id, oldest->timestamp_ns);
}

bool Journal::creates(std::size_t i, Section s) const { return deviceshadow::creates(events[i], s, shared); }

// not_found when the shadow has no history, unless `may_be_empty`.
Journal read_journal(Engine& engine, const ShadowKey& key, bool may_be_empty = false) {
  require_history(engine.options());
  validate_key(key);
  Journal j;
  j.shared = engine.store().shares_versions();
  j.current = engine.store().read(key);
  HistoryQuery q;
  q.limit = 1000;
  q.descending = false;
  for (;;) {
    std::vector<HistoryEvent> page = engine.store().history(key, q);
    for (const HistoryEvent& e : page) j.events.push_back(parse_event(e, j.arena));
    if (page.size() < q.limit) break;
    q.after_id = page.back().id;
  }
  if (j.events.empty() && !may_be_empty) throw Error::not_found("shadow " + key.name + " of thing " + key.thing + " has no history");
  return j;
}

// JSON Pointer tokens, unescaped.
std::vector<std::string> pointer_tokens(std::string_view path) {
  std::vector<std::string> tokens;
  if (path.empty() || path[0] != '/') throw Error(ErrorCode::internal, "a history change has a malformed path");
  std::size_t i = 1;
  for (;;) {
    std::size_t end = path.find('/', i);
    std::string token;
    for (std::size_t k = i; k < (end == std::string_view::npos ? path.size() : end); ++k) {
      if (path[k] == '~' && k + 1 < path.size()) {
        token += path[k + 1] == '1' ? '/' : '~';
        ++k;
      } else {
        token += path[k];
      }
    }
    tokens.push_back(std::move(token));
    if (end == std::string_view::npos) break;
    i = end + 1;
  }
  return tokens;
}

std::optional<std::size_t> array_index(const std::string& token) {
  if (token.empty() || token.size() > 18 || !std::all_of(token.begin(), token.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    return std::nullopt;
  }
  return static_cast<std::size_t>(std::stoull(token));
}

// The value at `tokens` below `root`, or null.
const json::value* lookup(const json::value& root, const std::vector<std::string>& tokens) {
  const json::value* node = &root;
  for (const std::string& token : tokens) {
    if (const json::object* o = node->if_object()) {
      node = o->if_contains(token);
    } else if (const json::array* a = node->if_array()) {
      auto i = array_index(token);
      node = i && *i < a->size() ? &(*a)[*i] : nullptr;
    } else {
      node = nullptr;
    }
    if (!node) break;
  }
  return node;
}

// Applies one section's changes of one event to its state, as the merge made them. Objects a
// remove leaves empty go with it (a delete, a null, client_is_master and an acknowledgement all
// remove them so), unless the event keeps them: the merge then lists the emptied object as an
// add of {} (docs/semantics.md, "Merge"). In an array merged element by element the merge first
// removes the elements it drops, naming stored indices, then changes the others, naming result
// indices: a dropped element becomes a null place holder (such arrays never hold null) until a
// change that is not part of dropping a whole element reaches the array, which is then compacted.
class Replayer {
 public:
  Replayer(json::value& root, const std::vector<Change>& changes) : root_(root), changes_(changes) {
    for (const Change& c : changes) {
      if (c.op == ChangeOp::add && c.new_value && c.new_value->is_object() && c.new_value->get_object().empty()) {
        kept_.push_back(c.path);
      }
    }
  }

  void run() {
    for (next_ = 0; next_ < changes_.size(); ++next_) apply(changes_[next_]);
    // Objects still empty go, deepest first, and so do the objects that leaves empty.
    auto deepest_first = [](const std::string& l, const std::string& r) { return l.size() > r.size(); };
    std::sort(emptied_.begin(), emptied_.end(), deepest_first);
    for (std::size_t i = 0; i < emptied_.size(); ++i) {
      const std::string at = emptied_[i];
      std::vector<std::string> tokens = pointer_tokens(at);
      const std::string key = std::move(tokens.back());
      tokens.pop_back();
      const std::string_view parent_at = std::string_view(at).substr(0, at.rfind('/'));
      json::value* parent = resolve(tokens);
      json::value* node = parent ? child(*parent, key, false) : nullptr;
      if (!node || !node->is_object() || !node->get_object().empty() || is_kept(at)) continue;
      erase(*parent, key, parent_at);
      if (parent->is_object() && parent->get_object().empty() && !parent_at.empty()) {
        emptied_.insert(std::upper_bound(emptied_.begin() + static_cast<std::ptrdiff_t>(i) + 1, emptied_.end(),
                                         std::string(parent_at), deepest_first),
                        std::string(parent_at));
      }
    }
    // Inner arrays first: compacting an outer one would move them.
    std::sort(holders_.begin(), holders_.end(), deepest_first);
    while (!holders_.empty()) {
      const std::string at = holders_.front();
      json::value* node = resolve(pointer_tokens(at));
      if (json::array* a = node ? node->if_array() : nullptr) {
        compact(*a, at);
      } else {
        holders_.erase(holders_.begin());
      }
    }
  }

 private:
  void apply(const Change& c) {
    const std::vector<std::string> tokens = pointer_tokens(c.path);
    const bool remove = c.op == ChangeOp::remove;
    std::vector<json::value*> nodes{&root_};
    std::vector<std::size_t> ends;  // where each node's pointer ends in c.path
    const std::string_view path = c.path;
    std::size_t end = 0;
    for (std::size_t k = 0; k + 1 < tokens.size(); ++k) {
      const std::size_t start = end;
      end = path.find('/', end + 1);
      json::array* a = nodes.back()->if_array();
      if (a && !dropping_element(path.substr(0, end), *a, tokens[k])) compact(*a, path.substr(0, start));
      json::value* next = child(*nodes.back(), tokens[k], !remove);
      if (!next) return;  // a remove below something already gone
      nodes.push_back(next);
      ends.push_back(end);
    }
    json::value& parent = *nodes.back();
    const std::string& last = tokens.back();
    if (json::array* a = parent.if_array(); a && !(remove && dropping_element(path, *a, last))) {
      compact(*a, path.substr(0, end));
    }
    if (!remove) {
      set(parent, last, c.new_value ? *c.new_value : json::value(json::object()));
      return;
    }
    erase(parent, last, path.substr(0, end));
    // Objects left empty go at once inside an element being dropped (it must become a place
    // holder), else at the end: a later change of the event may fill them again.
    const bool dropping = next_ < dropping_until_ && path.starts_with(dropping_);
    for (std::size_t k = nodes.size() - 1; k > 0; --k) {
      const json::object* o = nodes[k]->if_object();
      const std::string_view at = path.substr(0, ends[k - 1]);
      if (!o || !o->empty() || is_kept(at)) break;
      if (!dropping) {
        emptied_.emplace_back(at);
        break;
      }
      erase(*nodes[k - 1], tokens[k - 1], path.substr(0, k > 1 ? ends[k - 2] : 0));
    }
  }

  json::value* resolve(const std::vector<std::string>& tokens) { return const_cast<json::value*>(lookup(root_, tokens)); }

  bool is_kept(std::string_view path) const { return std::find(kept_.begin(), kept_.end(), path) != kept_.end(); }

  // Whether the change being applied is one of the removes that drop element `token` of `a`
  // (pointer `element`) whole: the run of removes at or below it from here empties it.
  bool dropping_element(std::string_view element, json::array& a, const std::string& token) {
    if (changes_[next_].op != ChangeOp::remove) return false;
    if (element == dropping_ && next_ < dropping_until_) return true;
    auto i = array_index(token);
    if (!i || *i >= a.size() || is_kept(element)) return false;
    json::value copy = a[*i];
    std::size_t j = next_;
    for (; j < changes_.size() && changes_[j].op == ChangeOp::remove; ++j) {
      const std::string& path = changes_[j].path;
      if (path == element) {
        copy = json::object();
      } else if (path.size() > element.size() && path.starts_with(element) && path[element.size()] == '/') {
        remove_within(copy, pointer_tokens(std::string_view(path).substr(element.size())));
      } else {
        break;
      }
    }
    const bool whole = copy.is_object() && copy.get_object().empty();
    if (whole) {
      dropping_ = std::string(element);
      dropping_until_ = j;
    }
    return whole;
  }

  // Removes the member at `tokens` of an element being dropped and the objects it leaves empty.
  static void remove_within(json::value& node, const std::vector<std::string>& tokens, std::size_t k = 0) {
    json::object* o = node.if_object();
    if (!o) return;
    auto it = o->find(tokens[k]);
    if (it == o->end()) return;
    if (k + 1 < tokens.size()) {
      remove_within(it->value(), tokens, k + 1);
      const json::object* inner = it->value().if_object();
      if (!inner || !inner->empty()) return;
    }
    o->stable_erase(it);
  }

  static json::value* child(json::value& node, const std::string& token, bool create) {
    if (json::object* o = node.if_object()) {
      if (auto it = o->find(token); it != o->end()) return &it->value();
      if (!create) return nullptr;
      return &o->emplace(token, json::object()).first->value();
    }
    if (json::array* a = node.if_array()) {
      auto i = array_index(token);
      if (!i || *i > a->size() || (*i == a->size() && !create)) return nullptr;
      if (*i == a->size()) a->emplace_back(json::object());
      return &(*a)[*i];
    }
    return nullptr;
  }

  static void set(json::value& parent, const std::string& token, const json::value& value) {
    if (json::object* o = parent.if_object()) {
      (*o)[token] = value;  // in place when present, else appended: where the merge put it
    } else if (json::array* a = parent.if_array()) {
      auto i = array_index(token);
      if (i && *i < a->size()) {
        (*a)[*i] = value;
      } else if (i && *i == a->size()) {
        a->push_back(value);
      }
    }
  }

  // Removes member or element `token` of `parent` (pointer `at`); an element leaves a place
  // holder.
  void erase(json::value& parent, const std::string& token, std::string_view at) {
    if (json::object* o = parent.if_object()) {
      if (auto it = o->find(token); it != o->end()) o->stable_erase(it);
    } else if (json::array* a = parent.if_array()) {
      auto i = array_index(token);
      if (i && *i < a->size()) {
        (*a)[*i] = nullptr;
        if (std::find(holders_.begin(), holders_.end(), at) == holders_.end()) holders_.emplace_back(at);
      }
    }
  }

  // Drops the place holders of the elements dropped from `a` (pointer `at`).
  void compact(json::array& a, std::string_view at) {
    auto it = std::find(holders_.begin(), holders_.end(), at);
    if (it == holders_.end()) return;
    holders_.erase(it);
    for (std::size_t i = a.size(); i-- > 0;) {
      if (a[i].is_null()) a.erase(a.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  json::value& root_;
  const std::vector<Change>& changes_;
  std::vector<std::string> kept_;     // objects the event empties and keeps
  std::vector<std::string> emptied_;  // objects removes left empty, to go at the end
  std::vector<std::string> holders_;  // the arrays holding place holders
  std::size_t next_ = 0;              // the change being applied
  std::string dropping_;              // the element the removes up to dropping_until_ drop
  std::size_t dropping_until_ = 0;
};

// Section s right after event t.
SectionRecord section_at(const Journal& j, std::size_t t, Section s) {
  const std::vector<PastEvent>& ev = j.events;
  std::optional<std::size_t> last_at_or_before;
  bool changed_after = false;
  for (std::size_t i = 0; i < ev.size(); ++i) {
    if (!ev[i].part(s).present) continue;
    if (i <= t) {
      last_at_or_before = i;
    } else {
      changed_after = true;
    }
  }
  if (!j.base && !changed_after) {  // nothing changed it since: as it is now, unless a write came after the read
    if (!last_at_or_before) return j.known_from_start(s) ? SectionRecord{} : j.current.section(s);
    if (j.current_matches(s)) return j.current.section(s);
  }
  // The last point at or before t where the section is known: after a delete of it, or before
  // the write that created it.
  std::optional<std::size_t> start;
  SectionRecord r;
  for (std::size_t i = t + 1; i-- > (j.base ? 1 : 0);) {
    const PastEvent::Part& p = ev[i].part(s);
    if (p.present && ev[i].is_delete) {
      start = i + 1;
      r.version = p.version;
      r.deleted = true;
      r.timestamp_ns = ev[i].timestamp_ns;
      break;
    }
    if (j.creates(i, s)) {
      start = i;
      break;
    }
  }
  json::value state = json::object(j.arena);
  if (!start && j.base) {  // the image is the nearest known state
    start = 1;
    r = j.base->record.section(s);
    if (r.exists()) state = j.base->state(s);
  }
  if (!start) {
    if (!last_at_or_before && j.known_from_start(s)) return {};
    j.expired(std::string("the state of ") + std::string(to_string(s)) + " then");
  }
  for (std::size_t i = *start; i <= t; ++i) {
    const PastEvent::Part& p = ev[i].part(s);
    if (!p.present) continue;
    if (ev[i].is_delete) {
      r = {};
      r.version = p.version;
      r.deleted = true;
      r.timestamp_ns = ev[i].timestamp_ns;
      state = json::object(j.arena);
      continue;
    }
    Replayer(state, p.changes).run();
    const bool existed = r.exists();
    if (j.leaf_times) {
      r.times_json = update_leaf_times(existed ? std::string_view(r.times_json) : "{}", r.timestamp_ns,
                                       state.get_object(), p.changes, s, ev[i].timestamp_ns);
    } else {
      r.times_json.clear();
    }
    r.tz = !p.tz.empty() ? p.tz : existed ? r.tz : "";
    r.version = p.version;
    r.deleted = false;
    r.timestamp_ns = ev[i].timestamp_ns;
    r.client_token = ev[i].client_token;
  }
  if (r.exists()) r.state_json = to_json(state);
  return r;
}

// The shadow right after event t.
ShadowRecord record_at(const Journal& j, std::size_t t) {
  ShadowRecord r{section_at(j, t, Section::reported), section_at(j, t, Section::desired)};
  if (j.shared) {  // both sections show the one version, as the store reads them back
    std::uint64_t version = 0;
    for (std::size_t i = 0; i <= t; ++i) {
      for (const PastEvent::Part& p : j.events[i].parts) version = std::max(version, p.version);
    }
    for (Section s : {Section::reported, Section::desired}) {
      SectionRecord& sr = r.section(s);
      if (sr.version == 0) sr.deleted = true;
      sr.version = version;
    }
  }
  return r;
}

// The version of section s right after event t (0: it never existed then).
std::uint64_t version_at(const Journal& j, std::size_t t, Section s) {
  if (j.shared) {
    std::uint64_t version = 0;
    for (std::size_t i = 0; i <= t; ++i) {
      for (const PastEvent::Part& p : j.events[i].parts) version = std::max(version, p.version);
    }
    return version;
  }
  for (std::size_t i = t + 1; i-- > 0;) {
    if (j.events[i].part(s).present) return j.events[i].part(s).version;
  }
  if (j.base) return j.base->record.section(s).version;
  for (std::size_t i = t + 1; i < j.events.size(); ++i) {
    if (j.events[i].part(s).present) return j.events[i].part(s).version - 1;
  }
  return j.current.section(s).version;
}

EventMark mark(const Journal& j, std::size_t t) {
  return {j.events[t].id, j.events[t].timestamp_ns, version_at(j, t, Section::reported), version_at(j, t, Section::desired)};
}

// The index of the event a moment names.
std::size_t find_moment(const Journal& j, const Moment& m) {
  const std::vector<PastEvent>& ev = j.events;
  const bool complete = j.complete();
  switch (m.kind) {
    case Moment::Kind::time: {
      auto it = std::upper_bound(ev.begin(), ev.end(), m.time_ns,
                                 [](std::int64_t t, const PastEvent& e) { return t < e.timestamp_ns; });
      if (it == ev.begin()) {
        if (complete) throw Error::not_found("the shadow did not exist at that moment");
        j.expired("that moment");
      }
      return static_cast<std::size_t>(it - ev.begin()) - 1;
    }
    case Moment::Kind::event: {
      if (!is_event_id(m.event_id)) throw Error::invalid_request("not an event id: " + m.event_id, "asOfEvent");
      for (std::size_t i = 0; i < ev.size(); ++i) {
        if (ev[i].id == m.event_id) return i;
      }
      if (!complete && m.event_id < ev.front().id) j.expired("event " + m.event_id);
      throw Error::not_found("this shadow has no event " + m.event_id);
    }
    case Moment::Kind::reported_version:
    case Moment::Kind::desired_version: {
      const Section s = m.kind == Moment::Kind::reported_version ? Section::reported : Section::desired;
      const char* field = s == Section::reported ? "reportedVersion" : "desiredVersion";
      std::uint64_t lowest = UINT64_MAX;
      for (std::size_t i = 0; i < ev.size(); ++i) {
        const PastEvent::Part& p = ev[i].part(s);
        if (!p.present) continue;
        if (p.version == m.version && !ev[i].is_delete) return i;
        lowest = std::min(lowest, p.version);
      }
      if (!complete && m.version > 0 && m.version < std::min(lowest, j.current.section(s).version + 1)) {
        j.expired(std::string(field) + " " + std::to_string(m.version));
      }
      throw Error::not_found(std::string("this shadow never had ") + field + " " + std::to_string(m.version));
    }
  }
  throw Error(ErrorCode::internal, "unknown moment");
}

// The leaves that differ between two states of a section, in the order of `from` then `to`;
// equal as the merge compares (numbers numerically, a timestamped value by its payload) is no
// difference.
void diff_members(const json::object* from, const json::object* to, Section s, const TimestampKeys& keys,
                  std::string& path, std::vector<Change>& out) {
  auto is_branch = [&](const json::value* v) {
    return v && v->is_object() && !v->get_object().empty() && !keys.find(v->get_object());
  };
  auto visit = [&](std::string_view key, const json::value* a, const json::value* b) {
    const std::size_t mark = path.size();
    append_pointer_token(path, key);
    if (is_branch(a) || is_branch(b)) {
      if (is_branch(a) && is_branch(b)) {
        diff_members(&a->get_object(), &b->get_object(), s, keys, path, out);
      } else {  // a branch on one side only: its leaves against the other side's one leaf
        if (!is_branch(a) && a) out.push_back({s, ChangeOp::remove, path, *a, std::nullopt});
        diff_members(is_branch(a) ? &a->get_object() : nullptr, is_branch(b) ? &b->get_object() : nullptr, s, keys,
                     path, out);
        if (!is_branch(b) && b) out.push_back({s, ChangeOp::add, path, std::nullopt, *b});
      }
    } else if (a && b) {
      if (!values_equal(*a, *b, keys)) out.push_back({s, ChangeOp::update, path, *a, *b});
    } else if (a) {
      out.push_back({s, ChangeOp::remove, path, *a, std::nullopt});
    } else if (b) {
      out.push_back({s, ChangeOp::add, path, std::nullopt, *b});
    }
    path.resize(mark);
  };
  if (from) {
    for (const json::key_value_pair& m : *from) {
      visit(std::string_view(m.key().data(), m.key().size()), &m.value(), to ? to->if_contains(m.key()) : nullptr);
    }
  }
  if (to) {
    for (const json::key_value_pair& m : *to) {
      if (from && from->contains(m.key())) continue;
      visit(std::string_view(m.key().data(), m.key().size()), nullptr, &m.value());
    }
  }
}

PastImage decode_image(std::string_view text, const json::storage_ptr& sp = {}) {
  json::value v = parse_stored_json(text, sp);
  PastImage image{{}, {json::value(sp), json::value(sp)}};  // the states are moved, not copied, into it
  for (Section s : {Section::reported, Section::desired}) {
    json::object& o = v.at(to_string(s)).as_object();
    SectionRecord& r = image.record.section(s);
    r.version = o.at("version").to_number<std::uint64_t>();
    r.deleted = o.at("deleted").as_bool();
    r.timestamp_ns = o.at("timestamp").to_number<std::int64_t>();
    r.client_token = o.at("clientToken").as_string();
    r.tz = o.at("tz").as_string();
    image.state(s) = std::move(o.at("state"));
    r.times_json = o.at("times").as_string();
  }
  return image;
}

// The event that gave section s version `version`, found without reading the whole history:
// the newest image whose version of s is lower is searched for by bisecting the history's time
// span (one image lookup a step), and the events after it read up to the version. Nothing when
// the version is not found so (a delete's, one never reached, one older than every image and
// the events kept): the whole history then tells why.
std::optional<HistoryEvent> locate_version(Store& store, const ShadowKey& key, Section s, std::uint64_t version) {
  const std::optional<HistoryEvent> oldest = end_event(store, key, false), newest = end_event(store, key, true);
  if (version == 0 || !oldest || !newest) return std::nullopt;
  auto version_of = [&](const StateImage& image) { return decode_image(image.json).record.section(s).version; };
  auto image_time = [](const StateImage& image) { return *event_id_time(image.event_id); };
  std::optional<StateImage> below;  // the newest image found whose version of s is below `version`
  std::int64_t lo = oldest->timestamp_ns, hi = newest->timestamp_ns;
  for (int probes = 0; lo <= hi && probes < 64; ++probes) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    std::optional<StateImage> image = store.image_before(key, id_after_time(mid));
    if (image && !is_event_id(image->event_id)) return std::nullopt;
    if (image && version_of(*image) >= version) {
      hi = image_time(*image) - 1;  // a lower image is older than this one
    } else {
      if (image && (!below || image->event_id > below->event_id)) below = std::move(image);
      lo = mid + 1;  // no image between this one and mid
    }
  }
  EventReader events(store, key, below ? below->event_id : "", below ? image_time(*below) : INT64_MIN);
  while (const PastEvent* e = events.next()) {
    const PastEvent::Part& p = e->part(s);
    if (!p.present || p.version < version) continue;
    if (p.version > version || e->is_delete) return std::nullopt;
    return HistoryEvent{e->id, e->timestamp_ns, 0, {}};
  }
  return std::nullopt;
}

// The event a moment (not in the future) names, read alone; nothing when finding it, or telling
// why there is none, needs the whole history (no event at or before the time, a version not
// found so).
std::optional<HistoryEvent> locate(Store& store, const ShadowKey& key, const Moment& m) {
  if (m.kind == Moment::Kind::reported_version || m.kind == Moment::Kind::desired_version) {
    return locate_version(store, key, m.kind == Moment::Kind::reported_version ? Section::reported : Section::desired,
                          m.version);
  }
  HistoryQuery q;
  if (m.kind == Moment::Kind::time) {
    q.limit = 1;
    q.until_ns = m.time_ns;
  } else if (m.kind == Moment::Kind::event && is_event_id(m.event_id)) {
    q.limit = 1000;
    q.since_ns = q.until_ns = *event_id_time(m.event_id);
  } else {
    return std::nullopt;
  }
  for (HistoryEvent& e : store.history(key, q)) {
    if (m.kind == Moment::Kind::time || e.id == m.event_id) return std::move(e);
  }
  return std::nullopt;
}

// The history from the newest image at or before `target` to `target`, with the image as its
// base; nothing when there is no image or its event is no longer kept.
std::optional<Journal> read_window(Store& store, const ShadowKey& key, const HistoryEvent& target) {
  std::optional<StateImage> image = store.image_before(key, target.id);
  if (!image || !is_event_id(image->event_id)) return std::nullopt;
  Journal j;
  j.shared = store.shares_versions();
  HistoryQuery q;
  q.limit = 1000;
  q.descending = false;
  q.since_ns = *event_id_time(image->event_id);
  q.until_ns = target.timestamp_ns;
  for (;;) {
    std::vector<HistoryEvent> page = store.history(key, q);
    for (const HistoryEvent& e : page) {
      if (e.id >= image->event_id && e.id <= target.id) j.events.push_back(parse_event(e, j.arena));
    }
    if (page.size() < q.limit) break;
    q.after_id = page.back().id;
  }
  if (j.events.empty() || j.events.front().id != image->event_id || j.events.back().id != target.id) return std::nullopt;
  j.base = decode_image(image->json, j.arena);
  return j;
}

// The shadow right after the event a moment names, that event, and how many events it took:
// from the nearest image when there is one, else from the whole history kept.
struct PastRecord {
  ShadowRecord record;
  EventMark event;
  std::size_t events_read = 0;
};

// invalid_request when a moment is a time later than now, naming the parameter that gave it.
void refuse_future(const Engine& engine, const Moment& moment) {
  if (moment.kind == Moment::Kind::time && moment.time_ns > engine.options().clock()) {
    throw Error::invalid_request("the moment asked for is in the future", moment.field);
  }
}

PastRecord past_record(Engine& engine, const ShadowKey& key, const Moment& moment, bool leaf_times) {
  require_history(engine.options());
  validate_key(key);
  refuse_future(engine, moment);
  if (std::optional<HistoryEvent> target = locate(engine.store(), key, moment)) {
    if (std::optional<Journal> j = read_window(engine.store(), key, *target)) {
      j->leaf_times = leaf_times;
      const std::size_t t = j->events.size() - 1;
      return {record_at(*j, t), mark(*j, t), j->events.size()};
    }
  }
  Journal j = read_journal(engine, key);
  j.leaf_times = leaf_times;
  const std::size_t t = find_moment(j, moment);
  return {record_at(j, t), mark(j, t), j.events.size()};
}

// The tokens of a series path: a JSON Pointer below the root; invalid_request otherwise.
std::vector<std::string> series_path_tokens(std::string_view path, std::size_t max_depth) {
  bool valid = !path.empty() && path[0] == '/';
  for (std::size_t i = 0; valid && i < path.size(); ++i) {
    if (path[i] == '~') valid = i + 1 < path.size() && (path[i + 1] == '0' || path[i + 1] == '1');
  }
  if (!valid) throw Error::invalid_request("path must be a JSON Pointer into the state, like /temp (~0 for ~, ~1 for /)", "path");
  std::vector<std::string> tokens = pointer_tokens(path);
  if (tokens.size() > max_depth) throw Error::invalid_request("path is deeper than a state may be", "path");
  return tokens;
}

// Whether `change` is at or below `path`.
bool at_or_below(std::string_view change, std::string_view path) {
  return change.starts_with(path) && (change.size() == path.size() || change[path.size()] == '/');
}

// The bounds from the record, the newest event and a window of the oldest events (with the
// nearest image after them): nothing when those cannot tell a version (a write landed between
// the reads, history lags the record, no image near the oldest event).
std::optional<HistoryBounds> bounds_from_ends(Engine& engine, const ShadowKey& key) {
  require_history(engine.options());
  validate_key(key);
  Store& store = engine.store();
  const bool shared = store.shares_versions();
  const ShadowRecord current = store.read(key);
  std::optional<HistoryEvent> newest_stored = end_event(store, key, true);
  if (!newest_stored) throw Error::not_found("shadow " + key.name + " of thing " + key.thing + " has no history");
  const PastEvent newest = parse_event(*newest_stored);
  auto max_part = [](const PastEvent& e) {
    return std::max(e.parts[0].present ? e.parts[0].version : 0, e.parts[1].present ? e.parts[1].version : 0);
  };
  for (Section s : {Section::reported, Section::desired}) {
    const std::uint64_t now = shared ? std::max(current.reported.version, current.desired.version) : current.section(s).version;
    const PastEvent::Part& p = newest.part(s);
    if ((shared ? max_part(newest) : p.present ? p.version : now) != now) return std::nullopt;
  }
  HistoryBounds bounds;
  auto section_version = [&](Section s) {
    return shared ? std::max(current.reported.version, current.desired.version) : current.section(s).version;
  };
  bounds.newest = {newest.id, newest.timestamp_ns, section_version(Section::reported), section_version(Section::desired)};

  constexpr std::size_t kWindow = 64;
  HistoryQuery q;
  q.limit = kWindow;
  q.descending = false;
  std::vector<PastEvent> window;
  for (const HistoryEvent& e : store.history(key, q)) window.push_back(parse_event(e));
  if (window.empty()) return std::nullopt;  // retention removed it all since
  const PastEvent& oldest = window.front();
  std::optional<StateImage> image;
  std::uint64_t at_oldest[2], before_oldest[2];
  for (Section s : {Section::reported, Section::desired}) {
    const int i = s == Section::reported ? 0 : 1;
    if (shared) {
      at_oldest[i] = max_part(oldest);
      before_oldest[i] = at_oldest[i] - 1;
      continue;
    }
    if (oldest.part(s).present) {
      at_oldest[i] = oldest.part(s).version;
      before_oldest[i] = at_oldest[i] - 1;
      continue;
    }
    auto touching = std::find_if(window.begin(), window.end(), [&](const PastEvent& e) { return e.part(s).present; });
    if (touching != window.end()) {
      at_oldest[i] = touching->part(s).version - 1;
    } else if (window.size() < kWindow) {  // the whole history: nothing changed s since
      at_oldest[i] = current.section(s).version;
    } else {
      if (!image) image = store.image_before(key, window.back().id);
      if (!image || image->event_id < oldest.id) return std::nullopt;
      at_oldest[i] = decode_image(image->json).record.section(s).version;
    }
    before_oldest[i] = at_oldest[i];
  }
  bounds.oldest = {oldest.id, oldest.timestamp_ns, at_oldest[0], at_oldest[1]};
  bounds.complete = before_oldest[0] == 0 && before_oldest[1] == 0;
  return bounds;
}

}  // namespace

std::string encode_image(const ShadowRecord& record) {
  std::string out = "{";
  for (Section s : {Section::reported, Section::desired}) {
    const SectionRecord& r = record.section(s);
    out += s == Section::reported ? "\"reported\":{\"version\":" : ",\"desired\":{\"version\":";
    out += std::to_string(r.version);
    out += r.deleted ? ",\"deleted\":true" : ",\"deleted\":false";
    out += ",\"timestamp\":" + std::to_string(r.timestamp_ns);
    out += ",\"clientToken\":";
    append_json_string(out, r.client_token);
    out += ",\"tz\":";
    append_json_string(out, r.tz);
    out += ",\"state\":";
    out += r.exists() ? r.state_json : "{}";
    out += ",\"times\":";
    append_json_string(out, r.exists() ? r.times_json : "");
    out += '}';
  }
  out += '}';
  return out;
}

Moment parse_moment(std::string_view text, const char* field) {
  Moment m;
  m.field = field;
  if (is_event_id(text)) {
    m.kind = Moment::Kind::event;
    m.event_id = std::string(text);
    return m;
  }
  std::optional<Timestamp> t = parse_rfc3339(text);
  if (!t) throw Error::invalid_request(std::string(field) + " must be an RFC 3339 time or an event id", field);
  m.time_ns = t->unix_nanos();
  return m;
}

PastShadow shadow_as_of(Engine& engine, const ShadowKey& key, const Moment& moment, bool leaf_times) {
  PastRecord at = past_record(engine, key, moment, leaf_times);
  const DocumentOptions& doc = engine.options().document;
  PastShadow past{{key, std::move(at.record), {}}, std::move(at.event), at.events_read};
  if (!past.view.record.exists()) throw Error::not_found("shadow " + key.name + " of thing " + key.thing + " did not exist at that moment");
  past.view.delta = compute_delta(section_state(past.view.record.desired), section_state(past.view.record.reported),
                                  doc.timestamp_keys);
  return past;
}

HistoryBounds history_bounds(Engine& engine, const ShadowKey& key) {
  if (std::optional<HistoryBounds> bounds = bounds_from_ends(engine, key)) return std::move(*bounds);
  const Journal j = read_journal(engine, key);
  return {mark(j, 0), mark(j, j.events.size() - 1), j.complete()};
}

ShadowDiff shadow_diff(Engine& engine, const ShadowKey& key, const Moment& from, const std::optional<Moment>& to) {
  require_history(engine.options());
  validate_key(key);
  refuse_future(engine, from);
  if (to) refuse_future(engine, *to);
  Moment now;
  now.time_ns = engine.options().clock();
  const PastRecord before = past_record(engine, key, from, false), after = past_record(engine, key, to ? *to : now, false);
  const DocumentOptions& doc = engine.options().document;
  ShadowDiff diff{before.event, after.event, {}};
  for (Section s : {Section::reported, Section::desired}) {
    const json::object x = section_state(before.record.section(s)), y = section_state(after.record.section(s));
    std::string path;
    std::vector<Change> changes;
    diff_members(&x, &y, s, doc.timestamp_keys, path, changes);
    std::stable_sort(changes.begin(), changes.end(), [](const Change& l, const Change& r) { return l.path < r.path; });
    for (Change& c : changes) diff.changes.push_back(std::move(c));
  }
  return diff;
}

// Replays the section forward from the first point its state is known (the nearest image at or
// before the page's start, the start of a complete history, a delete, the write that created
// it), taking the value at the path after each event that changed it, something below it or a
// leaf holding it; events are read a page at a time, up to the page's last point. Before such a
// point an event whose only such changes are of the path itself or of leaves holding it still
// tells the value (its last change's new value; no array index on the way, where the merge names
// stored indices first); anything else there is history_expired.
Series shadow_series(Engine& engine, const ShadowKey& key, const SeriesRequest& request) {
  const EngineOptions& options = engine.options();
  require_history(options);
  validate_key(key);
  const std::vector<std::string> tokens = series_path_tokens(request.path, options.document.limits.max_depth);
  if (request.limit < 1 || request.limit > kMaxPageLimit) {
    throw Error::invalid_request("limit must be between 1 and " + std::to_string(kMaxPageLimit), "limit");
  }
  const std::string after = request.cursor.empty() ? "" : decode_cursor(request.cursor);
  if (!request.cursor.empty() && !is_event_id(after)) throw Error::invalid_request("malformed cursor", "cursor");
  Store& store = engine.store();
  const bool shared = store.shares_versions();
  const Section s = request.section;
  const bool through_index = std::any_of(tokens.begin(), tokens.end(), [](const std::string& t) { return array_index(t).has_value(); });
  json::value state = json::object();
  bool known = false;
  // The page's first point comes after `after` and at or after since: start from the newest
  // image before that, if any.
  std::string start = after;
  if (request.since_ns && *request.since_ns > INT64_MIN) start = std::max(start, id_after_time(*request.since_ns - 1));
  std::optional<StateImage> image = start.empty() ? std::nullopt : store.image_before(key, start);
  if (image && !is_event_id(image->event_id)) image.reset();
  if (image) {
    PastImage base = decode_image(image->json);
    if (base.record.section(s).exists()) state = std::move(base.state(s));
    known = true;
  }
  EventReader events(store, key, image ? image->event_id : "", image ? *event_id_time(image->event_id) : INT64_MIN, true);
  Series series;
  std::size_t bytes = 0;
  bool first = true;
  while (const PastEvent* next = events.next()) {
    const PastEvent& e = *next;
    // In the combined layout a history starting with a version 1 starts with the shadow's first
    // write: every section was empty before it.
    if (first && shared && !image && creates(e, s, true)) known = true;
    first = false;
    const PastEvent::Part& p = e.part(s);
    if (!p.present) continue;
    if (request.until_ns && e.timestamp_ns > *request.until_ns) break;
    if (e.is_delete || creates(e, s, shared)) {
      state = json::object();
      known = true;
    }
    if (known && !e.is_delete) Replayer(state, p.changes).run();
    // The changes at or below the path, and those of a leaf holding it (a node whose kind
    // changed, a whole array, a timestamped value) with something at the path before or after.
    const Change* last = nullptr;
    const json::value* last_value = nullptr;  // the value at the path the last one leaves
    bool below = false;
    for (const Change& c : p.changes) {
      if (at_or_below(c.path, request.path)) {
        below = below || c.path.size() != request.path.size();
        last_value = c.new_value ? &*c.new_value : nullptr;
      } else if (at_or_below(request.path, c.path)) {
        const std::vector<std::string> rest(tokens.begin() + static_cast<std::ptrdiff_t>(pointer_tokens(c.path).size()), tokens.end());
        const json::value* before = c.old_value ? lookup(*c.old_value, rest) : nullptr;
        last_value = c.new_value ? lookup(*c.new_value, rest) : nullptr;
        if (!before && !last_value) continue;
      } else {
        continue;
      }
      last = &c;
    }
    if (!last || e.id <= after || (request.since_ns && e.timestamp_ns < *request.since_ns)) continue;
    if (series.points.size() == request.limit || bytes > options.max_page_bytes) {
      series.cursor = encode_cursor(series.points.back().event_id);
      break;
    }
    SeriesPoint point{e.id, e.timestamp_ns, p.version, std::nullopt, std::nullopt};
    if (shared) {
      for (const PastEvent::Part& q : e.parts) point.version = std::max(point.version, q.version);
    }
    if (known) {
      if (const json::value* v = lookup(state, tokens)) point.value = *v;
    } else if (!below && !through_index) {
      if (last_value) point.value = *last_value;
    } else {
      history_expired_at(store, key, "the value of " + request.path + " after event " + e.id);
    }
    if (const json::object* o = point.value ? point.value->if_object() : nullptr) {
      if (const json::value* ts = options.document.timestamp_keys.find(*o)) point.ts = parse_timestamp(*ts);
    }
    bytes += 96 + (point.value ? to_json(*point.value).size() : 0);
    series.points.push_back(std::move(point));
  }
  return series;
}

}  // namespace deviceshadow
