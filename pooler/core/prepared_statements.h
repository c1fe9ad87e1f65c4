// Protocol-level prepared statements across pooled servers (transaction mode). Drivers prepare
// named statements once per connection and use them in later transactions, which run on other
// servers. pgsluice gives each distinct statement (query text + parameter types) a pooler-wide
// name, keeps per client the map from the client's names to those statements, and per server
// the set of statements it has (bounded, least recently used out), so that a statement is
// prepared on a server once and the client never notices which server it is on.
#pragma once

#include <atomic>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "pooler/session_state/sql_prepared.h"

namespace pgsluice {

// Use counts of one statement, for SHOW PREPARED_STATEMENTS: plain increments where the code
// already holds the statement. Shared with the server caches that hold it (which know
// statements by id only), so that they can count themselves out after the statement is gone.
struct PreparedStatementStats {
  // Atomic: the registry is one per process, so workers count into the same statement.
  std::atomic<uint64_t> client_parses{0};   // client Parses that mapped a name to it
  std::atomic<uint64_t> server_parses{0};   // Parses sent to servers (first use there, stale plan)
  std::atomic<uint64_t> binds{0};           // Binds sent to servers (executions)
  std::atomic<uint64_t> retries{0};         // batches sent again after a stale plan
  std::atomic<uint64_t> stale_refusals{0};  // 0A000 made up for a client with an old description
  std::atomic<int64_t> client_names{0};     // client names mapped to it now
  std::atomic<int64_t> servers{0};          // servers that have it prepared now
};

struct PreparedStatement {
  uint64_t id = 0;
  std::string server_name;  // "PGSLUICE_<id>": the name on every server
  std::string query;
  std::vector<uint32_t> parameter_types;
  // SQL PREPARE kept: the SQL prepared statements its query EXECUTEs (under the pooler's names,
  // which make the text one client's): prepared on a server before it.
  std::vector<SqlStatementRef> sql_dependencies;
  // Whether the session-state verdict on the query has findings or cleaning statements (a SET,
  // set_config, an advisory lock, …): each Bind then runs the session-state actions again,
  // since a later transaction that executes it may run on another server than the Parse's. A
  // call the checks cannot see into alone is counted at the Parse and needs no action. -1 until
  // the first Bind looks, then 0 or 1: the verdict depends on the text only.
  mutable std::atomic<int8_t> bind_checks{-1};
  // Bumped when a server reports that the statement's plan is stale ("cached plan must not
  // change result type", 0A000, after a schema change): every server that prepared an older
  // generation prepares it again at its next use, instead of failing until RECONNECT. One
  // number for the process: a schema change seen by one worker's server is news to all.
  mutable std::atomic<uint64_t> generation{0};

  // A server found the plan stale: when it had prepared the current generation (`prepared_at`),
  // the generation moves on, once however many servers (of any worker) report the same change;
  // `error_wire` becomes the error the clients that still hold the old row description get.
  void note_stale(std::optional<uint64_t> prepared_at, std::string_view error_wire) const {
    if (prepared_at) {
      uint64_t expected = *prepared_at;
      generation.compare_exchange_strong(expected, expected + 1);
    }
    std::lock_guard lock(stale_mutex_);
    stale_error_.assign(error_wire);
  }
  // The ErrorResponse a server gave when the generation was last bumped: what another client
  // that still relies on the old row description gets, as PostgreSQL would have sent it.
  [[nodiscard]] std::string stale_error() const {
    std::lock_guard lock(stale_mutex_);
    return stale_error_;
  }
  // One shared string per shape seen last (statement_shape()): the servers' copies and the
  // clients told the same shape share it, so that a Bind compares two pointers.
  [[nodiscard]] std::shared_ptr<const std::string> intern_shape(std::string shape) const {
    std::lock_guard lock(stale_mutex_);
    if (shape_ == nullptr || *shape_ != shape) {
      shape_ = std::make_shared<const std::string>(std::move(shape));
    }
    return shape_;
  }

  std::shared_ptr<PreparedStatementStats> stats = std::make_shared<PreparedStatementStats>();

 private:
  mutable std::mutex stale_mutex_;
  mutable std::string stale_error_;
  mutable std::shared_ptr<const std::string> shape_;
};

using PreparedStatementRef = std::shared_ptr<const PreparedStatement>;

// A client's name for a statement, with the generation whose row description the client knows
// (its Parse or Describe 'S', a stale-plan error it was given): a Bind of a newer generation
// without a Describe of the portal gets PostgreSQL's 0A000 instead of rows of a new shape.
// Counts itself in the statement's client_names.
class ClientStatement {
 public:
  explicit ClientStatement(PreparedStatementRef stmt)
      : stmt_(std::move(stmt)), seen_generation(stmt_->generation) {
    ++stmt_->stats->client_names;
  }
  ClientStatement(ClientStatement&& other) noexcept
      : stmt_(std::move(other.stmt_)), seen_generation(other.seen_generation) {}
  ClientStatement(const ClientStatement&) = delete;
  ClientStatement& operator=(const ClientStatement&) = delete;
  ClientStatement& operator=(ClientStatement&&) = delete;
  ~ClientStatement() {
    if (stmt_) --stmt_->stats->client_names;
  }
  [[nodiscard]] const PreparedStatementRef& ref() const { return stmt_; }
  const PreparedStatement* operator->() const { return stmt_.get(); }
  const PreparedStatement& operator*() const { return *stmt_; }
  [[nodiscard]] bool stale() const { return seen_generation < stmt_->generation; }
  void saw_current() { seen_generation = stmt_->generation; }

 private:
  PreparedStatementRef stmt_;

 public:
  uint64_t seen_generation;
  // The result shape the client was told by a Describe of the statement (the RowDescription or
  // NoData, as statement_shape() makes it); null while it was told none. A client told a shape
  // may rely on it for every later execution (pgx, PHP PDO, pgjdbc): PostgreSQL keeps a named
  // statement's result type fixed from its Parse on and refuses a Bind whose result type
  // changed (0A000, "cached plan must not change result type"), so a client that was told a
  // shape never gets rows of another one: on a server whose copy of the statement describes
  // differently, its Bind gets that 0A000, as from PostgreSQL (client_statements.cc).
  std::shared_ptr<const std::string> told_shape{};
  // The shape changed under the client (PostgreSQL's statement would be stale): every Bind is
  // refused with 0A000 until the client prepares the statement again, as PostgreSQL does.
  bool shape_changed = false;
};

// What a Describe says of a statement's result: the message type (RowDescription or NoData) and
// the RowDescription's body with every format code zero, as a Describe 'S' gives it (a portal's
// Describe carries the Bind's formats), so that two answers are equal exactly when PostgreSQL
// would see the same result type.
std::string statement_shape(char type, std::string_view body);

// The statements of the process, keyed by (query, parameter types), shared by every worker: one
// name per statement on every server, and one stale-plan generation. An entry lives as long as a
// client maps a name to it; servers know statements by id only. Looked up under a lock, at a
// client's Parse only (a Bind uses the client's own map).
class PreparedRegistry {
 public:
  // `sql_dependencies` are set when the statement is made (sql_dependencies above).
  PreparedStatementRef get_or_create(std::string_view query,
                                     const std::vector<uint32_t>& parameter_types,
                                     std::vector<SqlStatementRef> sql_dependencies = {});
  [[nodiscard]] size_t size();  // live entries (drops dead index slots as it counts)
  // The live entries, oldest id first.
  [[nodiscard]] std::vector<PreparedStatementRef> entries();

 private:
  static std::string key_of(std::string_view query, const std::vector<uint32_t>& types);

  std::mutex mutex_;
  std::unordered_map<std::string, std::weak_ptr<const PreparedStatement>> index_;
  uint64_t next_id_ = 0;
};

// The statements one server has, least recently used first out, each with the generation it was
// prepared at.
class ServerStatementCache {
 public:
  explicit ServerStatementCache(size_t capacity) : capacity_(capacity) {}
  ~ServerStatementCache() { clear(); }
  ServerStatementCache(const ServerStatementCache&) = delete;
  ServerStatementCache& operator=(const ServerStatementCache&) = delete;

  // The server has the statement, prepared at `generation`.
  [[nodiscard]] bool has(uint64_t id, uint64_t generation) const {
    auto it = index_.find(id);
    return it != index_.end() && it->second->generation == generation;
  }
  // Marks `id` most recently used.
  void touch(uint64_t id);
  // Adds `id` at `generation` (most recently used). `to_close` gets, in order, the server
  // names the caller must Close before its Parse: names queued by mark_to_close, the
  // statement's own name when the server has an older generation of it, and the statements
  // evicted when the cache is over capacity. Returns how many were evicted.
  // `stats`, when given, counts this server in its `servers` while the cache holds it.
  size_t add(uint64_t id, const std::string& server_name, uint64_t generation,
             std::vector<std::string>& to_close,
             std::shared_ptr<PreparedStatementStats> stats = {});
  void remove(uint64_t id);
  // The statement's result shape on this server (its Describe 'S' answer, see ClientStatement):
  // null when the server has not described it since it was prepared there.
  [[nodiscard]] const std::shared_ptr<const std::string>* shape(uint64_t id) const {
    auto it = index_.find(id);
    return it != index_.end() && it->second->shape != nullptr ? &it->second->shape : nullptr;
  }
  void set_shape(uint64_t id, std::shared_ptr<const std::string> shape) {
    auto it = index_.find(id);
    if (it != index_.end()) it->second->shape = std::move(shape);
  }
  // The server prepared `id` again (already cached) at `generation`.
  void set_generation(uint64_t id, uint64_t generation) {
    auto it = index_.find(id);
    if (it != index_.end()) {
      it->second->generation = generation;
      it->second->shape.reset();
    }
  }
  // A statement that exists on the server but no longer in the cache (a Close the server
  // skipped after an error): closed before the next Parse.
  void mark_to_close(std::string server_name) { to_close_.push_back(std::move(server_name)); }
  void clear();
  // A client's DEALLOCATE ALL or DISCARD ALL went to the server, which may or may not run it
  // (an earlier error skips it): every statement is forgotten and closed before the next
  // Parse (a Close of a statement that does not exist is not an error).
  void close_all_later();
  [[nodiscard]] size_t size() const { return index_.size(); }
  void set_capacity(size_t capacity) { capacity_ = capacity; }
  [[nodiscard]] size_t capacity() const { return capacity_; }

 private:
  struct Entry {
    uint64_t id;
    uint64_t generation;
    std::string server_name;
    std::shared_ptr<PreparedStatementStats> stats;
    std::shared_ptr<const std::string> shape{};  // set_shape()
  };
  static void count_out(Entry& e) {
    if (e.stats) --e.stats->servers;
  }
  size_t capacity_;
  std::list<Entry> lru_;  // most recently used first
  std::unordered_map<uint64_t, std::list<Entry>::iterator> index_;
  std::vector<std::string> to_close_;
};

// SHOW PREPARED_STATEMENTS shows at most this much of a query.
inline constexpr size_t kShownQueryBytes = 200;
// `query` on one line (each run of whitespace one space), cut to at most `max_bytes` bytes at a
// UTF-8 character boundary, with "..." added when cut.
std::string abbreviate_query(std::string_view query, size_t max_bytes);

}  // namespace pgsluice
