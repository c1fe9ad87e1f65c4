// A minimal JSON reader for the parse trees libpg_query prints (pg_query_parse and
// pg_query_parse_plpgsql): a small DOM, UTF-8 strings, integers. Internal to the protocol library;
// it exists because Debian's libpg_query ships no JSON or protobuf-c reader of its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace pgsluice::protocol::pg_json {

struct Value {
  enum class Type { null, boolean, number, string, array, object };

  Type type = Type::null;
  bool boolean = false;
  int64_t integer = 0;  // numbers in libpg_query's output are integers (floats are strings)
  std::string text;     // a string's decoded value
  std::vector<Value> items;
  // Why not std::pair<std::string, Value>: a pair of the still-incomplete Value is undefined
  // behaviour and clang with libstdc++ 12 rejects it (the fuzz build); a vector of a declared
  // member struct is allowed (C++17 incomplete-type support). Fields keep pair's names.
  struct Member;
  std::vector<Member> members;

  // The member `key` of an object; nullptr when absent or when this is not an object.
  const Value* get(std::string_view key) const;
  // The string member `key`, or "" when absent.
  std::string_view get_string(std::string_view key) const;
  int64_t get_int(std::string_view key, int64_t fallback = 0) const;
  bool get_bool(std::string_view key) const;

  bool is_object() const { return type == Type::object; }
  bool is_array() const { return type == Type::array; }
  bool is_string() const { return type == Type::string; }
};

struct Value::Member {
  std::string first;  // the key
  Value second;       // the value
};

// Parses a whole JSON text; nullopt when it is malformed or nests deeper than `max_depth`.
std::optional<Value> parse(std::string_view json, int max_depth = 512);

}  // namespace pgsluice::protocol::pg_json
