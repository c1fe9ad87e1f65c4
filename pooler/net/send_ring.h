// One system call for a loop turn's sends: an io_uring that FlushBatch hands the turn's writes.
//
// A loop turn at 1,000 clients ends with tens of small sends, each a system call of its own. Once
// their count is at its floor, their entries and exits (about 170 ns each with this kernel's
// mitigations) are kernel work per transaction that PgBouncer pays and pgsluice need not (issue
// 17, docs/profile.md 0k). Submitted together the sends run in one io_uring_enter; each still runs
// inline on this thread with MSG_DONTWAIT, so a full socket answers EAGAIN at once, as send()
// would, and the result arrives before the call returns.
// Where io_uring is missing or refused (an old kernel, a container's seccomp profile,
// kernel.io_uring_disabled) open() returns null, and the batch calls send() as before.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <string>

namespace pgsluice {

class SendRing {
 public:
  // A ring for `entries` sends at a time, or null where io_uring is unavailable; then `why`
  // says why (for the startup log).
  static std::unique_ptr<SendRing> open(unsigned entries, std::string& why);
  ~SendRing();
  SendRing(const SendRing&) = delete;
  SendRing& operator=(const SendRing&) = delete;

  [[nodiscard]] unsigned capacity() const { return capacity_; }
  // Queues a send of `size` bytes at `data` on `fd`, tagged `tag`; at most capacity() per run().
  void add(int fd, const char* data, size_t size, size_t tag);
  // Submits what add() queued, waits for the results, and calls on_result(tag, result) for each
  // send that ran: bytes sent, or a negative errno. A send whose tag gets no call did not run.
  // Returns false when the ring failed (the submission, or part of it): it must not be used
  // again, and the sends without a result are the caller's to make.
  template <typename OnResult>
  bool run(OnResult&& on_result);

 private:
  struct Ring;
  SendRing(std::unique_ptr<Ring> ring, unsigned capacity);
  // Submits and gathers the results into results_; false as run().
  bool submit_and_collect();

  struct Result {
    size_t tag;
    ssize_t result;
  };
  std::unique_ptr<Ring> ring_;
  unsigned capacity_;
  unsigned queued_ = 0;
  std::unique_ptr<Result[]> results_;
  unsigned result_count_ = 0;
};

template <typename OnResult>
bool SendRing::run(OnResult&& on_result) {
  const bool ok = submit_and_collect();
  for (unsigned i = 0; i < result_count_; ++i) on_result(results_[i].tag, results_[i].result);
  result_count_ = 0;
  return ok;
}

}  // namespace pgsluice
