// The io_uring behind SendRing; see send_ring.h.
#include "pooler/net/send_ring.h"

#include <liburing.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace pgsluice {

struct SendRing::Ring {
  io_uring ring{};
};

namespace {

// Whether a send to a full socket answers EAGAIN at once, as the batch needs: a kernel that
// instead waited for room (armed a poll) would leave the turn's send pending and the loop waiting
// on it. Checked on a socketpair filled first; what the check leaves pending, the ring's exit
// cancels (the filler is static, so no buffer of the check is freed under it).
bool sends_answer_at_once(io_uring* ring) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds) != 0) return false;
  int small = 4096;
  ::setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  static const char kFiller[4096] = {};
  while (::send(fds[0], kFiller, sizeof(kFiller), MSG_DONTWAIT | MSG_NOSIGNAL) > 0) {
  }
  bool at_once = false;
  if (io_uring_sqe* sqe = io_uring_get_sqe(ring); sqe != nullptr) {
    io_uring_prep_send(sqe, fds[0], kFiller, sizeof(kFiller), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (io_uring_submit(ring) == 1) {
      io_uring_cqe* cqe = nullptr;
      if (io_uring_peek_cqe(ring, &cqe) == 0 && cqe != nullptr) {
        at_once = cqe->res == -EAGAIN;
        io_uring_cqe_seen(ring, cqe);
      }
    }
  }
  ::close(fds[0]);
  ::close(fds[1]);
  return at_once;
}

}  // namespace

std::unique_ptr<SendRing> SendRing::open(unsigned entries, std::string& why) {
  auto ring = std::make_unique<Ring>();
  // One thread submits (its worker's), and no send completes later that would need the kernel to
  // interrupt it: the lightest setup, where the kernel knows it (6.0 and 5.19).
  io_uring_params params{};
  params.flags = IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN;
  int rc = io_uring_queue_init_params(entries, &ring->ring, &params);
  if (rc == -EINVAL) {
    params = io_uring_params{};
    rc = io_uring_queue_init_params(entries, &ring->ring, &params);
  }
  if (rc < 0) {
    why = std::string("the kernel refused a ring: ") + std::strerror(-rc);
    return nullptr;
  }
  // Kernels 5.1 to 5.5 have rings but no IORING_OP_SEND (a send would fail with EINVAL), and
  // no probe either.
  io_uring_probe* probe = io_uring_get_probe_ring(&ring->ring);
  const bool sends = probe != nullptr && io_uring_opcode_supported(probe, IORING_OP_SEND) != 0;
  if (probe != nullptr) io_uring_free_probe(probe);
  if (!sends) {
    io_uring_queue_exit(&ring->ring);
    why = "the kernel's io_uring has no send operation (before 5.6)";
    return nullptr;
  }
  if (!sends_answer_at_once(&ring->ring)) {
    io_uring_queue_exit(&ring->ring);
    why = "an io_uring send to a full socket does not answer at once on this kernel";
    return nullptr;
  }
  return std::unique_ptr<SendRing>(new SendRing(std::move(ring), entries));
}

SendRing::SendRing(std::unique_ptr<Ring> ring, unsigned capacity)
    : ring_(std::move(ring)), capacity_(capacity), results_(new Result[capacity]) {}

SendRing::~SendRing() {
  io_uring_queue_exit(&ring_->ring);
}

void SendRing::add(int fd, const char* data, size_t size, size_t tag) {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_->ring);
  io_uring_prep_send(sqe, fd, data, size, MSG_NOSIGNAL | MSG_DONTWAIT);
  io_uring_sqe_set_data64(sqe, tag);
  ++queued_;
}

bool SendRing::submit_and_collect() {
  result_count_ = 0;
  const unsigned queued = queued_;
  queued_ = 0;
  if (queued == 0) return true;
  // Not submit_and_wait(queued): were the kernel to take fewer than queued, that would wait for
  // results that never come. The sends complete inline, so their results are there on return.
  int submitted;
  do {
    submitted = io_uring_submit(&ring_->ring);
  } while (submitted == -EINTR);
  if (submitted < 0) {
    spdlog::warn("io_uring submission failed ({}): sends go one by one from now on",
                 std::strerror(-submitted));
    return false;
  }
  // Each submitted send posts one result; a send the kernel refused to take posts its error.
  while (result_count_ < static_cast<unsigned>(submitted)) {
    io_uring_cqe* cqe = nullptr;
    int rc;
    do {
      rc = io_uring_wait_cqe(&ring_->ring, &cqe);
    } while (rc == -EINTR);
    if (rc < 0) {
      spdlog::warn("io_uring results lost ({}): sends go one by one from now on",
                   std::strerror(-rc));
      return false;
    }
    results_[result_count_++] =
        Result{static_cast<size_t>(io_uring_cqe_get_data64(cqe)), static_cast<ssize_t>(cqe->res)};
    io_uring_cqe_seen(&ring_->ring, cqe);
  }
  if (static_cast<unsigned>(submitted) < queued) {
    spdlog::warn("io_uring took {} of {} sends: sends go one by one from now on", submitted,
                 queued);
    return false;
  }
  return true;
}

}  // namespace pgsluice
