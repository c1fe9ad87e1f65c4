// See takeover.h.
#include "pooler/core/takeover.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <deque>

#include "pgsluice/protocol/startup.h"
#include "pgsluice/protocol/writer.h"

namespace pgsluice {

namespace pp = pgsluice::protocol;

namespace {

constexpr int kWaitMs = 10000;  // for the peer at each step: it runs one world stop for us

void put(std::string& out, std::string_view field) {
  out += std::to_string(field.size());
  out += ':';
  out += field;
}

void put_set(std::string& out, const ParameterSet& set) {
  put(out, std::to_string(set.size()));
  for (const auto& [name, value] : set.items()) {
    put(out, name);
    put(out, value);
  }
}

std::string key_text(const std::optional<pp::ScramKey>& key) {
  return key ? std::string(reinterpret_cast<const char*>(key->data()), key->size()) : "";
}

class Fields {
 public:
  explicit Fields(std::string_view text) : text_(text) {}
  std::optional<std::string> next() {
    const size_t colon = text_.find(':');
    if (colon == std::string_view::npos) return std::nullopt;
    size_t size = 0;
    for (char c : text_.substr(0, colon)) {
      if (c < '0' || c > '9') return std::nullopt;
      size = size * 10 + static_cast<size_t>(c - '0');
    }
    if (text_.size() - colon - 1 < size) return std::nullopt;
    std::string field(text_.substr(colon + 1, size));
    text_.remove_prefix(colon + 1 + size);
    return field;
  }
  bool set(ParameterSet& out) {
    std::optional<std::string> count = next();
    if (!count) return false;
    for (int n = std::atoi(count->c_str()); n > 0; --n) {
      std::optional<std::string> name = next();
      std::optional<std::string> value = next();
      if (!name || !value) return false;
      out.set(*name, *value);
    }
    return true;
  }
  bool key(std::optional<pp::ScramKey>& out) {
    std::optional<std::string> raw = next();
    if (!raw) return false;
    if (raw->empty()) return true;
    if (raw->size() != pp::ScramKey{}.size()) return false;
    out.emplace();
    std::memcpy(out->data(), raw->data(), raw->size());
    return true;
  }
  [[nodiscard]] bool done() const { return text_.empty(); }

 private:
  std::string_view text_;
};

bool wait_for(int socket, short events) {
  pollfd p{.fd = socket, .events = events, .revents = 0};
  int rc = 0;
  do {
    rc = ::poll(&p, 1, kWaitMs);
  } while (rc < 0 && errno == EINTR);
  return rc > 0;
}

int32_t read_int32(std::string_view s) {
  const auto* b = reinterpret_cast<const unsigned char*>(s.data());
  return static_cast<int32_t>((uint32_t{b[0]} << 24) | (uint32_t{b[1]} << 16) |
                              (uint32_t{b[2]} << 8) | b[3]);
}

// The new side's end of the console connection: messages in, descriptors in arrival order.
class ConsoleReader {
 public:
  explicit ConsoleReader(int socket) : socket_(socket) {}
  ~ConsoleReader() {
    for (int fd : fds_) ::close(fd);
  }
  // The next message's type and body; false on EOF, a timeout or an error.
  bool next(char& type, std::string& body) {
    while (buffer_.size() < 5 ||
           buffer_.size() <
               1 + static_cast<size_t>(read_int32(std::string_view(buffer_).substr(1, 4)))) {
      if (!receive()) return false;
    }
    const size_t length = static_cast<size_t>(read_int32(std::string_view(buffer_).substr(1, 4)));
    if (length < 4) return false;
    type = buffer_[0];
    body = buffer_.substr(5, length - 4);
    buffer_.erase(0, 1 + length);
    return true;
  }
  int take_fd() {
    if (fds_.empty()) return -1;
    const int fd = fds_.front();
    fds_.pop_front();
    return fd;
  }

 private:
  bool receive() {
    if (!wait_for(socket_, POLLIN)) return false;
    char data[16384];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 16)];
    iovec iov{.iov_base = data, .iov_len = sizeof data};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t got = ::recvmsg(socket_, &msg, MSG_CMSG_CLOEXEC);
    if (got <= 0) return got < 0 && errno == EINTR;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
      const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < count; ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
        fds_.push_back(fd);
      }
    }
    buffer_.append(data, static_cast<size_t>(got));
    return true;
  }

  int socket_;
  std::string buffer_;
  std::deque<int> fds_;
};

// A DataRow's columns (none NULL in SHOW FDS).
std::vector<std::string> columns(std::string_view body) {
  std::vector<std::string> out;
  if (body.size() < 2) return out;
  size_t count = (static_cast<unsigned char>(body[0]) << 8) | static_cast<unsigned char>(body[1]);
  body.remove_prefix(2);
  while (count-- > 0 && body.size() >= 4) {
    const int32_t length = read_int32(body);
    body.remove_prefix(4);
    if (length < 0 || static_cast<size_t>(length) > body.size()) return {};
    out.emplace_back(body.substr(0, static_cast<size_t>(length)));
    body.remove_prefix(static_cast<size_t>(length));
  }
  return out;
}

std::string error_message(std::string_view body) {
  // Fields: a type byte then a NUL-terminated string; 'M' is the message.
  while (!body.empty() && body[0] != '\0') {
    const char field = body[0];
    const size_t end = body.find('\0', 1);
    if (end == std::string_view::npos) break;
    if (field == 'M') return std::string(body.substr(1, end - 1));
    body.remove_prefix(end + 1);
  }
  return "error";
}

// Reads until ReadyForQuery; rows of SHOW FDS (with their descriptors) go to `sockets`.
bool read_until_ready(ConsoleReader& reader, std::vector<TakeoverSocket>* sockets,
                      std::string& error) {
  char type = 0;
  std::string body;
  while (reader.next(type, body)) {
    if (type == 'Z') return error.empty();
    if (type == 'E') {
      error = error_message(body);
    } else if (type == 'R' && (body.size() < 4 || read_int32(body) != 0)) {
      error = "the console asked for a password (the new process must run as the old one's user)";
    } else if (type == 'D' && sockets != nullptr) {
      std::vector<std::string> row = columns(body);
      const int fd = reader.take_fd();
      if (row.size() < 6 || fd < 0) {
        if (fd >= 0) ::close(fd);
        error = "SHOW FDS: a row without its descriptor";
        continue;
      }
      sockets->push_back({.fd = fd, .task = row[1], .tcp = row[4] == "tcp", .state = row[5]});
    }
  }
  if (error.empty()) error = "the running process closed the console connection";
  return false;
}

}  // namespace

std::string encode_takeover_client(const TakeoverClient& c) {
  std::string raw;
  put(raw, c.user);
  put(raw, c.database);
  put(raw, std::to_string(c.protocol_version));
  put(raw, std::to_string(c.cancel_pid));
  put(raw, c.cancel_key);
  put(raw, key_text(c.scram_client_key));
  put(raw, key_text(c.scram_server_key));
  put_set(raw, c.reported);
  put_set(raw, c.extras);
  put_set(raw, c.settings);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  hex.reserve(raw.size() * 2);
  for (unsigned char b : raw) {
    hex += kHex[b >> 4];
    hex += kHex[b & 15];
  }
  return hex;
}

std::optional<TakeoverClient> decode_takeover_client(std::string_view hex) {
  if (hex.size() % 2 != 0) return std::nullopt;
  std::string raw;
  raw.reserve(hex.size() / 2);
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = nibble(hex[i]);
    const int lo = nibble(hex[i + 1]);
    if (hi < 0 || lo < 0) return std::nullopt;
    raw += static_cast<char>((hi << 4) | lo);
  }
  Fields f(raw);
  TakeoverClient c;
  std::optional<std::string> user = f.next(), database = f.next(), version = f.next(),
                             pid = f.next(), key = f.next();
  if (!user || !database || !version || !pid || !key) return std::nullopt;
  c.user = *user;
  c.database = *database;
  c.protocol_version = std::atoi(version->c_str());
  c.cancel_pid = std::atoi(pid->c_str());
  c.cancel_key = *key;
  if (!f.key(c.scram_client_key) || !f.key(c.scram_server_key)) return std::nullopt;
  if (!f.set(c.reported) || !f.set(c.extras) || !f.set(c.settings) || !f.done()) {
    return std::nullopt;
  }
  return c;
}

bool send_with_descriptor(int socket, std::string_view bytes, int fd) {
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{.iov_base = const_cast<char*>(bytes.data()), .iov_len = bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  for (;;) {
    const ssize_t sent = ::sendmsg(socket, &msg, MSG_NOSIGNAL);
    if (sent >= 0) {
      // The descriptor went with the first byte; the rest of the row follows plain.
      return send_all(socket, bytes.substr(static_cast<size_t>(sent)));
    }
    if (errno == EINTR) continue;
    if ((errno != EAGAIN && errno != EWOULDBLOCK) || !wait_for(socket, POLLOUT)) return false;
  }
}

bool send_all(int socket, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t sent = ::send(socket, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (sent > 0) {
      bytes.remove_prefix(static_cast<size_t>(sent));
    } else if (sent < 0 && errno == EINTR) {
      continue;
    } else if (sent == 0 || (errno != EAGAIN && errno != EWOULDBLOCK) ||
               !wait_for(socket, POLLOUT)) {
      return false;
    }
  }
  return true;
}

bool take_over(const std::string& socket_path, std::vector<TakeoverSocket>& sockets,
               std::string& error) {
  sockaddr_un addr{};
  if (socket_path.size() >= sizeof addr.sun_path) return false;
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return false;  // nobody there: a normal start
  }
  bool ok = false;
  {
    ConsoleReader reader(fd);
    std::string out;
    const std::pair<std::string_view, std::string_view> params[] = {
        {"user", "pgbouncer"},
        {"database", "pgbouncer"},
        {"application_name", kTakeoverApplicationName}};
    pp::write_startup_message(out, pp::kProtocolVersion30, params);
    if (!send_all(fd, out) || !read_until_ready(reader, nullptr, error)) {
      if (error.empty()) error = "could not log in to the running process's console";
    } else {
      out.clear();
      pp::write_query(out, "SHOW FDS");
      ok = send_all(fd, out) && read_until_ready(reader, &sockets, error);
      out.clear();
      pp::write_terminate(out);
      send_all(fd, out);
    }
  }
  ::close(fd);
  if (!ok) {
    for (const TakeoverSocket& s : sockets) ::close(s.fd);
    sockets.clear();
    if (error.empty()) error = "SHOW FDS failed";
  }
  return ok;
}

}  // namespace pgsluice
