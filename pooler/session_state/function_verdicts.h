// A verdict per user function, so that an application calling one in every transaction does not
// pay a check of its server per transaction (opaque_call:reset, docs/design.md). The first call
// of a name on a (database, user, search_path) has its server checked as any opaque call, and at
// that release the pooler also reads every overload the name can resolve to from pg_proc (its
// language, prosrc, arguments and result) and classifies each body with the statement
// classifier (SQL) or the DO-block analysis (PL/pgSQL). A name all of whose overloads can change
// no session state is then no check and no finding until the verdict expires; anything else
// (another language, dynamic EXECUTE, a call of another non-built-in function, a body that does
// not compile, a name with no overload found) is checked every time. A body whose only findings
// are settings named by constants has those settings reset at the release instead of a check.
//
// Invalidation, conservative: a verdict lasts kFunctionVerdictTtlMs (a function replaced behind
// the pooler's back is judged by its old body for at most that long), and every verdict is
// dropped when a client sends DDL that may change what a name resolves to (CREATE, ALTER or DROP
// of a function, procedure, schema, extension or language: protocol::function_ddl()). The
// search_path is part of the key (its value as the pooler believes the server has it,
// Server::extras_), so a client with another path has its own verdicts.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace pgsluice {

inline constexpr uint64_t kFunctionVerdictTtlMs = 1000;

enum class FunctionVerdict {
  no_state,  // every overload's body was read: none can change session state
  // what the bodies change is settings named by constants (SET x, RESET x, set_config('x', …,
  // false)), nothing else: those are reset at the release (RESET x, as the `reset` action does),
  // which needs no check; the caller sees them for the rest of its transaction, as after a check
  resets_settings,
  may_change,  // check the server after each call
};

struct FunctionJudgement {
  FunctionVerdict verdict = FunctionVerdict::no_state;
  std::vector<std::string> settings;  // resets_settings: their names, lower case
  bool operator==(const FunctionJudgement&) const = default;
};

// One overload as the lookup query returns it.
struct FunctionRow {
  std::string language;   // pg_language.lanname
  std::string body;       // prosrc
  std::string arguments;  // pg_get_function_arguments
  std::string result;     // pg_get_function_result (empty for a procedure)
};

FunctionJudgement judge_function(const FunctionRow& row);
// Two overloads' judgements as one name's: may_change wins, settings add up.
void merge_judgement(FunctionJudgement& into, const FunctionJudgement& other);

// Whether an opaque call's name is a function's name, qualified at most by a schema ("f",
// "s.f"), which the lookup can find; not a DO block's ("DO (language plperl)") or a name the
// lexer guessed.
bool names_a_function(std::string_view call_name);

// The query that reads every overload of each name (on the session's search_path when it is not
// qualified): one row per overload, the name's index first.
std::string function_lookup_query(const std::vector<std::string>& names);

// The lookup of one release: its rows, then the verdicts.
class FunctionLookup {
 public:
  // `key_prefix`: the cache key's database, user and search_path part (verdict_key_prefix).
  void start(std::vector<std::string> names, std::string key_prefix);
  [[nodiscard]] bool awaiting() const { return awaiting_; }
  [[nodiscard]] const std::vector<std::string>& names() const { return names_; }
  void on_row(std::string_view data_row_body);
  // At the lookup's CommandComplete: stores a verdict per name in the process's cache (a name
  // without a row: may_change).
  void finish(uint64_t now_ms);
  void clear() { *this = FunctionLookup(); }

 private:
  bool awaiting_ = false;
  std::vector<std::string> names_;
  std::vector<FunctionJudgement> verdicts_;
  std::vector<bool> found_;
  bool malformed_ = false;
  std::string key_prefix_;
};

std::string verdict_key_prefix(std::string_view database, std::string_view user,
                               std::string_view search_path);

// The process's verdicts (workers share them; a mutex taken once per opaque call, not per
// message). Bounded: full, it starts again empty.
class FunctionVerdictCache {
 public:
  static constexpr size_t kMaxEntries = 4096;
  static FunctionVerdictCache& process();

  std::optional<FunctionJudgement> find(const std::string& key, uint64_t now_ms);
  void store(const std::string& key, FunctionJudgement judgement, uint64_t now_ms);
  void clear();
  size_t size();

 private:
  struct Entry {
    FunctionJudgement judgement;
    uint64_t expires_ms;
  };
  std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace pgsluice
