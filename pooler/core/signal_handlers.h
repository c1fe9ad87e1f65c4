// A fixed set of signals watched on one libuv loop, each calling `on_signal(handle, signum)`
// with `data` as the handle's data; closed together. The shutdown signals (ops/shutdown.h) and
// PAUSE/RESUME by signal (admin/pause_signals.h) each own one.
#pragma once

#include <uv.h>

#include <array>
#include <cstddef>

namespace pgsluice {

template <size_t N>
class SignalHandlers {
 public:
  void start(uv_loop_t* loop, const std::array<int, N>& numbers, uv_signal_cb on_signal,
             void* data) {
    for (size_t i = 0; i < N; ++i) {
      uv_signal_init(loop, &handles_[i]);
      handles_[i].data = data;
      uv_signal_start(&handles_[i], on_signal, numbers[i]);
    }
    started_ = true;
  }

  void close() {
    if (!started_) return;
    started_ = false;
    for (auto& h : handles_) uv_close(reinterpret_cast<uv_handle_t*>(&h), nullptr);
  }

 private:
  std::array<uv_signal_t, N> handles_{};
  bool started_ = false;
};

}  // namespace pgsluice
