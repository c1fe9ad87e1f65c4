// libpg_query's entry points that the classifier uses, reached through the library loaded with
// dlopen(3) on the first call (pg_query_library.cc). Same arguments and results as the pg_query_*
// functions of pg_query.h; the free functions take what the matching call returned.
#pragma once

#include <pg_query.h>

namespace pgsluice::protocol::pg_query_library {

PgQueryParseResult parse(const char* sql);
void free_parse_result(PgQueryParseResult result);
PgQueryPlpgsqlParseResult parse_plpgsql(const char* sql);
void free_plpgsql_parse_result(PgQueryPlpgsqlParseResult result);
PgQuerySplitResult split_with_scanner(const char* sql);
void free_split_result(PgQuerySplitResult result);
PgQueryNormalizeResult normalize(const char* sql);
void free_normalize_result(PgQueryNormalizeResult result);
PgQueryFingerprintResult fingerprint(const char* sql);
void free_fingerprint_result(PgQueryFingerprintResult result);

}  // namespace pgsluice::protocol::pg_query_library
