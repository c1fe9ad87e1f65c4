// A double-ended queue in one growable ring of slots: pushing and popping at either end moves
// no other element and allocates only when the ring grows (to twice its size). For the queue of
// replies a server owes, which every request pushes and every reply pops: std::deque frees and
// allocates a block each time the queue moves past one (every third request there).
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace pgsluice {

// Back to T's default state. An overload for a type, in its namespace, may do it cheaper.
template <class T>
void reset_slot(T& item) {
  item = T{};
}

template <class T>
class RingQueue {
 public:
  RingQueue() = default;
  RingQueue(const RingQueue&) = delete;
  RingQueue& operator=(const RingQueue&) = delete;
  RingQueue(RingQueue&& other) noexcept { *this = std::move(other); }
  RingQueue& operator=(RingQueue&& other) noexcept {
    slots_ = std::move(other.slots_);
    head_ = std::exchange(other.head_, 0);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    other.slots_.clear();
    return *this;
  }

  [[nodiscard]] bool empty() const { return size_ == 0; }
  [[nodiscard]] size_t size() const { return size_; }

  T& operator[](size_t i) { return slots_[slot(i)]; }
  const T& operator[](size_t i) const { return slots_[slot(i)]; }
  T& front() { return (*this)[0]; }
  const T& front() const { return (*this)[0]; }
  T& back() { return (*this)[size_ - 1]; }
  const T& back() const { return (*this)[size_ - 1]; }

  void push_back(T item) {
    grow_if_full();
    slots_[slot(size_)] = std::move(item);
    ++size_;
  }
  // A new last element in T's default state, filled in by the caller: a slot outside the queue
  // is always in that state (pop_front resets it), so nothing is constructed or moved. For the
  // replies queue this is the one push of every request.
  T& push_back_default() {
    grow_if_full();
    T& item = slots_[slot(size_)];
    ++size_;
    return item;
  }
  void push_front(T item) {
    grow_if_full();
    head_ = (head_ + capacity_ - 1) & (capacity_ - 1);
    slots_[head_] = std::move(item);
    ++size_;
  }
  // The slot is emptied (its element's resources go now, not when the slot is reused), by
  // reset_slot: T = T{} unless T's namespace has a cheaper reset_slot(T&) for it.
  void pop_front() {
    reset_slot(slots_[head_]);
    head_ = (head_ + 1) & (capacity_ - 1);
    --size_;
  }
  void clear() {
    while (size_ > 0) pop_front();
    head_ = 0;
  }

  template <class Queue, class Item>
  class Iterator {
   public:
    Iterator(Queue* queue, size_t i) : queue_(queue), i_(i) {}
    Item& operator*() const { return (*queue_)[i_]; }
    Item* operator->() const { return &(*queue_)[i_]; }
    Iterator& operator++() {
      ++i_;
      return *this;
    }
    bool operator==(const Iterator& other) const { return i_ == other.i_; }
    bool operator!=(const Iterator& other) const { return i_ != other.i_; }

   private:
    Queue* queue_;
    size_t i_;
  };
  using iterator = Iterator<RingQueue, T>;
  using const_iterator = Iterator<const RingQueue, const T>;
  iterator begin() { return {this, 0}; }
  iterator end() { return {this, size_}; }
  const_iterator begin() const { return {this, 0}; }
  const_iterator end() const { return {this, size_}; }

 private:
  // Capacity is a power of two, so that positions wrap with a mask.
  [[nodiscard]] size_t slot(size_t i) const { return (head_ + i) & (capacity_ - 1); }
  void grow_if_full() {
    if (size_ < capacity_) return;
    std::vector<T> bigger(slots_.empty() ? 4 : slots_.size() * 2);
    for (size_t i = 0; i < size_; ++i) bigger[i] = std::move(slots_[slot(i)]);
    slots_ = std::move(bigger);
    head_ = 0;
    capacity_ = slots_.size();
  }

  std::vector<T> slots_;
  size_t head_ = 0;
  size_t size_ = 0;
  // slots_.size(), kept: the vector's size is a division by sizeof(T) (200 bytes for the replies
  // queue), and every access and push needs it.
  size_t capacity_ = 0;
};

}  // namespace pgsluice
