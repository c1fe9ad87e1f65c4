// The JSON reader of pg_json.h: recursive descent with a depth limit, no exceptions.
#include "pg_json.h"

namespace pgsluice::protocol::pg_json {
namespace {

class Reader {
 public:
  Reader(std::string_view json, int max_depth) : s_(json), max_depth_(max_depth) {}

  bool parse_document(Value& out) {
    if (!parse_value(out, 0)) return false;
    skip_space();
    return pos_ == s_.size();
  }

 private:
  void skip_space() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) {
      ++pos_;
    }
  }

  bool literal(std::string_view word) {
    if (s_.substr(pos_, word.size()) != word) return false;
    pos_ += word.size();
    return true;
  }

  bool parse_value(Value& out, int depth) {
    if (depth > max_depth_) return false;
    skip_space();
    if (pos_ >= s_.size()) return false;
    const char c = s_[pos_];
    switch (c) {
      case '{':
        return parse_object(out, depth);
      case '[':
        return parse_array(out, depth);
      case '"':
        out.type = Value::Type::string;
        return parse_string(out.text);
      case 't':
        out.type = Value::Type::boolean;
        out.boolean = true;
        return literal("true");
      case 'f':
        out.type = Value::Type::boolean;
        out.boolean = false;
        return literal("false");
      case 'n':
        out.type = Value::Type::null;
        return literal("null");
      default:
        return parse_number(out);
    }
  }

  bool parse_number(Value& out) {
    out.type = Value::Type::number;
    bool negative = false;
    if (pos_ < s_.size() && s_[pos_] == '-') {
      negative = true;
      ++pos_;
    }
    const size_t start = pos_;
    uint64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      v = v * 10 + static_cast<uint64_t>(s_[pos_] - '0');
      ++pos_;
    }
    if (pos_ == start) return false;
    // A fraction or exponent is accepted and dropped: libpg_query prints none that we read.
    while (pos_ < s_.size() &&
           (s_[pos_] == '.' || s_[pos_] == 'e' || s_[pos_] == 'E' || s_[pos_] == '+' ||
            s_[pos_] == '-' || (s_[pos_] >= '0' && s_[pos_] <= '9'))) {
      ++pos_;
    }
    out.integer = negative ? -static_cast<int64_t>(v) : static_cast<int64_t>(v);
    return true;
  }

  static void append_utf8(std::string& out, uint32_t cp) {
    if (cp < 0x80) {
      out.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }

  bool parse_hex4(uint32_t& out) {
    if (pos_ + 4 > s_.size()) return false;
    out = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[pos_++];
      out <<= 4;
      if (h >= '0' && h <= '9') {
        out |= static_cast<uint32_t>(h - '0');
      } else if (h >= 'a' && h <= 'f') {
        out |= static_cast<uint32_t>(h - 'a' + 10);
      } else if (h >= 'A' && h <= 'F') {
        out |= static_cast<uint32_t>(h - 'A' + 10);
      } else {
        return false;
      }
    }
    return true;
  }

  bool parse_string(std::string& out) {
    ++pos_;  // the opening quote
    out.clear();
    while (pos_ < s_.size()) {
      const char c = s_[pos_++];
      if (c == '"') return true;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= s_.size()) return false;
      const char e = s_[pos_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out.push_back(e);
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          uint32_t cp = 0;
          if (!parse_hex4(cp)) return false;
          if (cp >= 0xD800 && cp < 0xDC00 && s_.substr(pos_, 2) == "\\u") {
            pos_ += 2;
            uint32_t low = 0;
            if (!parse_hex4(low)) return false;
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          return false;
      }
    }
    return false;
  }

  bool parse_array(Value& out, int depth) {
    out.type = Value::Type::array;
    ++pos_;
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == ']') {
      ++pos_;
      return true;
    }
    while (true) {
      out.items.emplace_back();
      if (!parse_value(out.items.back(), depth + 1)) return false;
      skip_space();
      if (pos_ >= s_.size()) return false;
      if (s_[pos_] == ',') {
        ++pos_;
      } else if (s_[pos_] == ']') {
        ++pos_;
        return true;
      } else {
        return false;
      }
    }
  }

  bool parse_object(Value& out, int depth) {
    out.type = Value::Type::object;
    ++pos_;
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == '}') {
      ++pos_;
      return true;
    }
    while (true) {
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != '"') return false;
      out.members.emplace_back();
      if (!parse_string(out.members.back().first)) return false;
      skip_space();
      if (pos_ >= s_.size() || s_[pos_] != ':') return false;
      ++pos_;
      if (!parse_value(out.members.back().second, depth + 1)) return false;
      skip_space();
      if (pos_ >= s_.size()) return false;
      if (s_[pos_] == ',') {
        ++pos_;
      } else if (s_[pos_] == '}') {
        ++pos_;
        return true;
      } else {
        return false;
      }
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
  int max_depth_;
};

}  // namespace

const Value* Value::get(std::string_view key) const {
  if (type != Type::object) return nullptr;
  for (const auto& [k, v] : members) {
    if (k == key) return &v;
  }
  return nullptr;
}

std::string_view Value::get_string(std::string_view key) const {
  const Value* v = get(key);
  return v != nullptr && v->type == Type::string ? std::string_view(v->text) : std::string_view{};
}

int64_t Value::get_int(std::string_view key, int64_t fallback) const {
  const Value* v = get(key);
  return v != nullptr && v->type == Type::number ? v->integer : fallback;
}

bool Value::get_bool(std::string_view key) const {
  const Value* v = get(key);
  return v != nullptr && v->type == Type::boolean && v->boolean;
}

std::optional<Value> parse(std::string_view json, int max_depth) {
  Value root;
  Reader reader(json, max_depth);
  if (!reader.parse_document(root)) return std::nullopt;
  return root;
}

}  // namespace pgsluice::protocol::pg_json
