// The kernel cache's memory layer (kernel_cache.h): a bounded LRU map of loaded values.
#pragma once

#include <cstddef>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace stitch::rt {

// A bounded least-recently-used map from canonical keys (bytes) to shared values. Thread-safe.
// Capacity 0 keeps nothing.
template <class V>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity) {}

  // The value, marked most recently used; null when absent.
  std::shared_ptr<V> get(const std::string& key) {
    std::lock_guard lock(mu_);
    auto it = index_.find(key);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return it->second->second;
  }

  // Inserts or replaces, as most recently used; evicts the least recently used beyond capacity.
  void put(const std::string& key, std::shared_ptr<V> value) {
    std::lock_guard lock(mu_);
    if (capacity_ == 0) return;
    if (auto it = index_.find(key); it != index_.end()) {
      it->second->second = std::move(value);
      order_.splice(order_.begin(), order_, it->second);
      return;
    }
    order_.emplace_front(key, std::move(value));
    index_.emplace(key, order_.begin());
    while (order_.size() > capacity_) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
  }

  size_t size() const {
    std::lock_guard lock(mu_);
    return order_.size();
  }
  size_t capacity() const { return capacity_; }

  void clear() {
    std::lock_guard lock(mu_);
    index_.clear();
    order_.clear();
  }

  // The keys, most recently used first (does not count as a use).
  std::vector<std::string> keys() const {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    out.reserve(order_.size());
    for (const auto& [k, v] : order_) out.push_back(k);
    return out;
  }

 private:
  using Entry = std::pair<std::string, std::shared_ptr<V>>;
  const size_t capacity_;
  mutable std::mutex mu_;
  std::list<Entry> order_;  // most recently used first
  std::unordered_map<std::string, typename std::list<Entry>::iterator> index_;
};

}  // namespace stitch::rt
