// LogLineFormatter writes exactly what spdlog's pattern_formatter writes for pgsluice's pattern
// (operators' tools and the integration tests read these lines), also across seconds, levels and
// in a forked child (its own pid).
#include "pooler/ops/log_line_format.h"

#include <gtest/gtest.h>
#include <spdlog/details/log_msg.h>
#include <spdlog/pattern_formatter.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <vector>

namespace pgsluice {
namespace {

constexpr const char* kPattern = "%Y-%m-%d %H:%M:%S.%e %P %l %v";

spdlog::details::log_msg message(spdlog::log_clock::time_point when, spdlog::level::level_enum lvl,
                                 std::string_view text) {
  spdlog::details::log_msg msg(spdlog::source_loc{}, "pgsluice", lvl, text);
  msg.time = when;
  return msg;
}

std::string render(spdlog::formatter& f, const spdlog::details::log_msg& msg) {
  spdlog::memory_buf_t buf;
  f.format(msg, buf);
  return std::string(buf.data(), buf.size());
}

TEST(LogLineFormatter, WritesWhatThePatternWrites) {
  LogLineFormatter ours;
  spdlog::pattern_formatter theirs(kPattern);
  using std::chrono::milliseconds;
  const spdlog::log_clock::time_point base{std::chrono::seconds(1764928130)};
  // Within one second, across seconds, minutes and days, and back in time (a clock step): the
  // cached date must follow every change.
  const std::vector<spdlog::log_clock::time_point> times = {
      base,
      base + milliseconds(7),
      base + milliseconds(999),
      base + milliseconds(1000),
      base + milliseconds(1001) + std::chrono::microseconds(999),
      base + std::chrono::minutes(1) + milliseconds(50),
      base + std::chrono::hours(26) + milliseconds(123),
      base - std::chrono::seconds(3600) + milliseconds(10),
      spdlog::log_clock::now(),
  };
  const std::vector<std::string_view> texts = {
      "C-1 app@app 127.0.0.1:5000 login attempt: db=app user=app tls=no replication=no", "",
      "two\nlines", "utf-8: ä €"};
  for (auto lvl : {spdlog::level::trace, spdlog::level::debug, spdlog::level::info,
                   spdlog::level::warn, spdlog::level::err, spdlog::level::critical}) {
    for (auto when : times) {
      for (std::string_view text : texts) {
        auto msg = message(when, lvl, text);
        ASSERT_EQ(render(ours, msg), render(theirs, msg));
      }
    }
  }
}

TEST(LogLineFormatter, ACloneWritesTheSame) {
  LogLineFormatter ours;
  auto copy = ours.clone();
  auto msg = message(spdlog::log_clock::now(), spdlog::level::info, "x");
  EXPECT_EQ(render(ours, msg), render(*copy, msg));
}

TEST(LogLineFormatter, AForkedChildWritesItsOwnPid) {
  // The parent's pid is cached by the first line; daemonize forks after logging started.
  LogLineFormatter ours;
  auto msg = message(spdlog::log_clock::now(), spdlog::level::info, "x");
  const std::string parent_line = render(ours, msg);
  ASSERT_NE(parent_line.find(" " + std::to_string(getpid()) + " info x"), std::string::npos);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const std::string line = render(ours, msg);
    const bool own = line.find(" " + std::to_string(getpid()) + " info x") != std::string::npos;
    _exit(own ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace pgsluice
