// Protocol-level prepared statements across pooled servers (transaction mode). Drivers prepare
// named statements once per connection and use them in later transactions, which run on other
// servers. pgsluice gives each distinct statement (query text + parameter types) a pooler-wide
// name, keeps per client the map from the client's names to those statements, and per server
// the set of statements it has (bounded, least recently used out), so that a statement is
// prepared on a server once and the client never notices which server it is on.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pgsluice {

struct PreparedStatement {
  uint64_t id = 0;
  std::string server_name;  // "PGSLUICE_<id>": the name on every server
  std::string query;
  std::vector<uint32_t> parameter_types;
};

using PreparedStatementRef = std::shared_ptr<const PreparedStatement>;

// The statements of one worker, keyed by (query, parameter types). An entry lives as long as a
// client maps a name to it; servers know statements by id only.
class PreparedRegistry {
 public:
  PreparedStatementRef get_or_create(std::string_view query,
                                     const std::vector<uint32_t>& parameter_types);
  [[nodiscard]] size_t size();  // live entries (drops dead index slots as it counts)

 private:
  static std::string key_of(std::string_view query, const std::vector<uint32_t>& types);

  std::unordered_map<std::string, std::weak_ptr<const PreparedStatement>> index_;
  uint64_t next_id_ = 0;
};

// The statements one server has, least recently used first out.
class ServerStatementCache {
 public:
  explicit ServerStatementCache(size_t capacity) : capacity_(capacity) {}

  [[nodiscard]] bool contains(uint64_t id) const { return index_.count(id) != 0; }
  // Marks `id` most recently used.
  void touch(uint64_t id);
  // Adds `id` (most recently used). When the cache is over capacity, the evicted statement's
  // server name is appended to `evicted` (the caller closes it on the server).
  void add(uint64_t id, const std::string& server_name, std::vector<std::string>& evicted);
  void remove(uint64_t id);
  void clear();
  [[nodiscard]] size_t size() const { return index_.size(); }
  void set_capacity(size_t capacity) { capacity_ = capacity; }

 private:
  struct Entry {
    uint64_t id;
    std::string server_name;
  };
  size_t capacity_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<uint64_t, std::list<Entry>::iterator> index_;
};

// What a SQL string does to a client's protocol-level statements, for the statements PHP's PDO
// and others send: DEALLOCATE [PREPARE] name | ALL, and DISCARD ALL.
struct DeallocateCommand {
  enum class Kind { none, deallocate_name, deallocate_all, discard_all };
  Kind kind = Kind::none;
  std::string name;
};
DeallocateCommand parse_deallocate_command(std::string_view sql);

}  // namespace pgsluice
