// The prepared statement registry, the per-server cache and DEALLOCATE recognition.
#include "pooler/core/prepared_statements.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace pgsluice {

std::string PreparedRegistry::key_of(std::string_view query, const std::vector<uint32_t>& types) {
  std::string key;
  key.reserve(query.size() + 1 + types.size() * 4);
  for (uint32_t t : types) {
    key.append(reinterpret_cast<const char*>(&t), sizeof(t));
  }
  key.push_back('\0');
  key.append(query);
  return key;
}

PreparedStatementRef PreparedRegistry::get_or_create(
    std::string_view query, const std::vector<uint32_t>& types,
    std::vector<SqlStatementRef> sql_dependencies) {
  std::string key = key_of(query, types);
  std::lock_guard lock(mutex_);
  auto it = index_.find(key);
  if (it != index_.end()) {
    if (auto live = it->second.lock()) return live;
  }
  auto stmt = std::make_shared<PreparedStatement>();
  stmt->id = ++next_id_;
  stmt->server_name = fmt::format("PGSLUICE_{}", stmt->id);
  stmt->query = std::string(query);
  stmt->parameter_types = types;
  stmt->sql_dependencies = std::move(sql_dependencies);
  index_[std::move(key)] = stmt;
  return stmt;
}

size_t PreparedRegistry::size() {
  std::lock_guard lock(mutex_);
  for (auto it = index_.begin(); it != index_.end();) {
    it = it->second.expired() ? index_.erase(it) : std::next(it);
  }
  return index_.size();
}

std::vector<PreparedStatementRef> PreparedRegistry::entries() {
  std::vector<PreparedStatementRef> out;
  std::lock_guard lock(mutex_);
  for (auto& [key, weak] : index_) {
    if (auto live = weak.lock()) out.push_back(std::move(live));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a->id < b->id; });
  return out;
}

void ServerStatementCache::touch(uint64_t id) {
  auto it = index_.find(id);
  if (it != index_.end()) lru_.splice(lru_.begin(), lru_, it->second);
}

size_t ServerStatementCache::add(uint64_t id, const std::string& server_name, uint64_t generation,
                                 std::vector<std::string>& to_close,
                                 std::shared_ptr<PreparedStatementStats> stats) {
  for (std::string& name : to_close_) to_close.push_back(std::move(name));
  to_close_.clear();
  auto it = index_.find(id);
  if (it != index_.end()) {
    if (it->second->generation != generation) {
      // The server has a stale plan under this name: it goes before the new Parse.
      to_close.push_back(it->second->server_name);
      it->second->generation = generation;
      it->second->shape.reset();
    }
    touch(id);
    return 0;
  }
  if (stats) ++stats->servers;
  lru_.push_front(Entry{id, generation, server_name, std::move(stats)});
  index_[id] = lru_.begin();
  size_t evicted = 0;
  while (index_.size() > capacity_ && !lru_.empty()) {
    Entry& victim = lru_.back();
    to_close.push_back(victim.server_name);
    count_out(victim);
    index_.erase(victim.id);
    lru_.pop_back();
    ++evicted;
  }
  return evicted;
}

void ServerStatementCache::remove(uint64_t id) {
  auto it = index_.find(id);
  if (it == index_.end()) return;
  count_out(*it->second);
  lru_.erase(it->second);
  index_.erase(it);
}

void ServerStatementCache::clear() {
  for (Entry& e : lru_) count_out(e);
  lru_.clear();
  index_.clear();
  to_close_.clear();
}

void ServerStatementCache::close_all_later() {
  for (Entry& e : lru_) {
    count_out(e);
    to_close_.push_back(std::move(e.server_name));
  }
  lru_.clear();
  index_.clear();
}

std::string abbreviate_query(std::string_view query, size_t max_bytes) {
  std::string out;
  bool space = false;
  for (char c : query) {
    if (std::isspace(static_cast<unsigned char>(c))) {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  if (out.size() <= max_bytes) return out;
  size_t cut = max_bytes;
  // Not inside a multi-byte character: continuation bytes are 10xxxxxx.
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xC0) == 0x80) --cut;
  out.resize(cut);
  out += "...";
  return out;
}

std::string statement_shape(char type, std::string_view body) {
  std::string shape(1, type);
  shape.append(body);
  if (type != 'T' || body.size() < 2) return shape;
  // RowDescription: int16 count, then per field a name (NUL-ended) and 18 bytes: table oid,
  // column number, type oid, type size, type modifier, format code (the last two).
  const auto count = static_cast<uint16_t>((static_cast<unsigned char>(body[0]) << 8) |
                                           static_cast<unsigned char>(body[1]));
  size_t at = 1 + 2;  // past the type byte and the count, in `shape`
  for (uint16_t i = 0; i < count; ++i) {
    const size_t name_end = shape.find('\0', at);
    if (name_end == std::string::npos || name_end + 1 + 18 > shape.size()) break;
    at = name_end + 1 + 18;
    shape[at - 2] = 0;
    shape[at - 1] = 0;
  }
  return shape;
}

}  // namespace pgsluice
