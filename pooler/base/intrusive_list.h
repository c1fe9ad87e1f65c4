// A doubly linked list whose nodes live inside the objects listed, so that moving a connection
// from one state's list to another's allocates nothing and removal is O(1). As in PgBouncer, the
// list a connection is on names its state.
#pragma once

#include <cstddef>

namespace pgsluice {

struct ListNode {
  ListNode* prev = this;
  ListNode* next = this;
  void* owner = nullptr;  // the object this node is a member of, set when it is listed

  ListNode() = default;
  ListNode(const ListNode&) = delete;
  ListNode& operator=(const ListNode&) = delete;
  ~ListNode() { unlink(); }

  [[nodiscard]] bool linked() const { return next != this; }
  void unlink() {
    prev->next = next;
    next->prev = prev;
    prev = next = this;
  }
};

template <class T, ListNode T::*Node>
class IntrusiveList {
 public:
  IntrusiveList() = default;
  IntrusiveList(const IntrusiveList&) = delete;
  IntrusiveList& operator=(const IntrusiveList&) = delete;
  ~IntrusiveList() {
    while (!empty()) pop_front();
  }

  [[nodiscard]] bool empty() const { return head_.next == &head_; }
  [[nodiscard]] size_t size() const { return size_; }

  void push_back(T& item) { insert_before(&head_, item); }
  void push_front(T& item) { insert_before(head_.next, item); }

  T& front() { return owner(head_.next); }
  T& back() { return owner(head_.prev); }

  T* pop_front() {
    if (empty()) return nullptr;
    T& item = front();
    remove(item);
    return &item;
  }

  // The item must be on this list.
  void remove(T& item) {
    (item.*Node).unlink();
    --size_;
  }

  // Calls fn(T&) for each item; fn may remove the item it is given, and no other.
  template <class Fn>
  void for_each(Fn&& fn) {
    for (ListNode* n = head_.next; n != &head_;) {
      ListNode* next = n->next;
      fn(owner(n));
      n = next;
    }
  }

 private:
  static T& owner(ListNode* node) { return *static_cast<T*>(node->owner); }

  void insert_before(ListNode* pos, T& item) {
    // An item is on one list at a time: the caller removes it from the old one first.
    ListNode& node = item.*Node;
    node.owner = &item;
    node.next = pos;
    node.prev = pos->prev;
    pos->prev->next = &node;
    pos->prev = &node;
    ++size_;
  }

  ListNode head_;
  size_t size_ = 0;
};

}  // namespace pgsluice
