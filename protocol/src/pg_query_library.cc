// libpg_query through dlopen(3), loaded when a statement first needs the parser. Linked, the
// library is mapped and relocated at startup: 0.6 MB of Pss in every pgsluice process (its
// symbol tables read and its relocated data written at load), for a parser that only runs on SQL
// the lexer prefilter cannot clear. A pooler whose clients send none never loads it (issue 17:
// 500 idle clients' Pss). The build still needs libpg_query (CMakeLists.txt finds it and takes
// the soname to load from it), and main checks at startup that it loads.
#include "pg_query_library.h"

#include <dlfcn.h>

#include "pgsluice/protocol/pg_query_library.h"

namespace pgsluice::protocol {
namespace {

struct Api {
  decltype(&pg_query_parse) parse = nullptr;
  decltype(&pg_query_free_parse_result) free_parse_result = nullptr;
  decltype(&pg_query_parse_plpgsql) parse_plpgsql = nullptr;
  decltype(&pg_query_free_plpgsql_parse_result) free_plpgsql_parse_result = nullptr;
  decltype(&pg_query_split_with_scanner) split_with_scanner = nullptr;
  decltype(&pg_query_free_split_result) free_split_result = nullptr;
  decltype(&pg_query_normalize) normalize = nullptr;
  decltype(&pg_query_free_normalize_result) free_normalize_result = nullptr;
  decltype(&pg_query_fingerprint) fingerprint = nullptr;
  decltype(&pg_query_free_fingerprint_result) free_fingerprint_result = nullptr;
};

template <typename F>
bool resolve(void* handle, const char* name, F& out) {
  out = reinterpret_cast<F>(dlsym(handle, name));
  return out != nullptr;
}

// Null when the library does not load (removed or replaced after the startup check): every entry
// point then answers with kUnavailable as its error, which the callers already handle as SQL the
// parser could not read (the lexer's verdict, the lexer's fingerprint).
const Api* load() {
  void* handle = dlopen(PGSLUICE_PG_QUERY_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return nullptr;
  static Api api;
  const bool ok =
      resolve(handle, "pg_query_parse", api.parse) &&
      resolve(handle, "pg_query_free_parse_result", api.free_parse_result) &&
      resolve(handle, "pg_query_parse_plpgsql", api.parse_plpgsql) &&
      resolve(handle, "pg_query_free_plpgsql_parse_result", api.free_plpgsql_parse_result) &&
      resolve(handle, "pg_query_split_with_scanner", api.split_with_scanner) &&
      resolve(handle, "pg_query_free_split_result", api.free_split_result) &&
      resolve(handle, "pg_query_normalize", api.normalize) &&
      resolve(handle, "pg_query_free_normalize_result", api.free_normalize_result) &&
      resolve(handle, "pg_query_fingerprint", api.fingerprint) &&
      resolve(handle, "pg_query_free_fingerprint_result", api.free_fingerprint_result);
  // Never closed: parse trees of other threads and libpg_query's per-thread memory contexts
  // (freed by its thread-exit destructor) live in it.
  return ok ? &api : nullptr;
}

// The first caller loads it; C++ runs this initializer once even with every worker asking.
const Api* api() {
  static const Api* const loaded = load();
  return loaded;
}

char kUnavailableMessage[] = "libpg_query could not be loaded";
PgQueryError kUnavailable = {kUnavailableMessage, nullptr, nullptr, 0, 0, nullptr};

}  // namespace

bool pg_query_library_loadable(std::string& error) {
  void* handle = dlopen(PGSLUICE_PG_QUERY_SONAME, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    error = why != nullptr ? why : PGSLUICE_PG_QUERY_SONAME ": cannot be loaded";
    return false;
  }
  // Nothing of it has run yet (libpg_query sets itself up on its first call), so unloading
  // leaves nothing behind; the first parse loads it again.
  dlclose(handle);
  return true;
}

namespace pg_query_library {

PgQueryParseResult parse(const char* sql) {
  if (const Api* a = api()) return a->parse(sql);
  return PgQueryParseResult{nullptr, nullptr, &kUnavailable};
}

void free_parse_result(PgQueryParseResult result) {
  if (result.error != &kUnavailable) api()->free_parse_result(result);
}

PgQueryPlpgsqlParseResult parse_plpgsql(const char* sql) {
  if (const Api* a = api()) return a->parse_plpgsql(sql);
  return PgQueryPlpgsqlParseResult{nullptr, &kUnavailable};
}

void free_plpgsql_parse_result(PgQueryPlpgsqlParseResult result) {
  if (result.error != &kUnavailable) api()->free_plpgsql_parse_result(result);
}

PgQuerySplitResult split_with_scanner(const char* sql) {
  if (const Api* a = api()) return a->split_with_scanner(sql);
  return PgQuerySplitResult{nullptr, 0, nullptr, &kUnavailable};
}

void free_split_result(PgQuerySplitResult result) {
  if (result.error != &kUnavailable) api()->free_split_result(result);
}

PgQueryNormalizeResult normalize(const char* sql) {
  if (const Api* a = api()) return a->normalize(sql);
  return PgQueryNormalizeResult{nullptr, &kUnavailable};
}

void free_normalize_result(PgQueryNormalizeResult result) {
  if (result.error != &kUnavailable) api()->free_normalize_result(result);
}

PgQueryFingerprintResult fingerprint(const char* sql) {
  if (const Api* a = api()) return a->fingerprint(sql);
  return PgQueryFingerprintResult{0, nullptr, nullptr, &kUnavailable};
}

void free_fingerprint_result(PgQueryFingerprintResult result) {
  if (result.error != &kUnavailable) api()->free_fingerprint_result(result);
}

}  // namespace pg_query_library
}  // namespace pgsluice::protocol
