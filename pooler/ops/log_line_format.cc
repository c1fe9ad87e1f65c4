#include "pooler/ops/log_line_format.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace pgsluice {
namespace {

// 0 until first read; emptied in a forked child (daemonize forks after logging started).
std::atomic<int> g_pid{0};

void forget_pid_after_fork() {
  g_pid.store(0, std::memory_order_relaxed);
}

int process_id() {
  static const bool registered = pthread_atfork(nullptr, nullptr, forget_pid_after_fork) == 0;
  (void)registered;
  int pid = g_pid.load(std::memory_order_relaxed);
  if (pid == 0) {
    pid = static_cast<int>(::getpid());
    g_pid.store(pid, std::memory_order_relaxed);
  }
  return pid;
}

// `width` decimal digits of `value`, zero-padded, at `at`.
void put_digits(char* at, unsigned value, int width) {
  for (int i = width - 1; i >= 0; --i) {
    at[i] = static_cast<char>('0' + value % 10);
    value /= 10;
  }
}

}  // namespace

void LogLineFormatter::format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) {
  using namespace std::chrono;
  const auto since_epoch = msg.time.time_since_epoch();
  const int64_t second = duration_cast<seconds>(since_epoch).count();
  if (second != cached_second_) {
    std::time_t t = static_cast<std::time_t>(second);
    std::tm tm{};
    ::localtime_r(&t, &tm);
    // "YYYY-MM-DD HH:MM:SS"; years past 9999 would need more room than spdlog's output has.
    put_digits(date_time_, static_cast<unsigned>(tm.tm_year + 1900) % 10000, 4);
    date_time_[4] = '-';
    put_digits(date_time_ + 5, static_cast<unsigned>(tm.tm_mon + 1), 2);
    date_time_[7] = '-';
    put_digits(date_time_ + 8, static_cast<unsigned>(tm.tm_mday), 2);
    date_time_[10] = ' ';
    put_digits(date_time_ + 11, static_cast<unsigned>(tm.tm_hour), 2);
    date_time_[13] = ':';
    put_digits(date_time_ + 14, static_cast<unsigned>(tm.tm_min), 2);
    date_time_[16] = ':';
    put_digits(date_time_ + 17, static_cast<unsigned>(tm.tm_sec), 2);
    cached_second_ = second;
  }
  dest.append(date_time_, date_time_ + 19);
  dest.push_back('.');
  char millis[3];
  put_digits(millis, static_cast<unsigned>(duration_cast<milliseconds>(since_epoch).count() % 1000),
             3);
  dest.append(millis, millis + 3);
  dest.push_back(' ');
  const int pid = process_id();
  if (pid != cached_pid_) {
    pid_length_ = std::snprintf(pid_text_, sizeof pid_text_, "%d", pid);
    cached_pid_ = pid;
  }
  dest.append(pid_text_, pid_text_ + pid_length_);
  dest.push_back(' ');
  const spdlog::string_view_t level = spdlog::level::to_string_view(msg.level);
  dest.append(level.data(), level.data() + level.size());
  dest.push_back(' ');
  dest.append(msg.payload.data(), msg.payload.data() + msg.payload.size());
  dest.push_back('\n');
}

std::unique_ptr<spdlog::formatter> LogLineFormatter::clone() const {
  return std::make_unique<LogLineFormatter>();
}

}  // namespace pgsluice
