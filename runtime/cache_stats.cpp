// The kernel cache's statistics (design note in cache_stats.h).
#include "runtime/cache_stats.h"

#include <fmt/format.h>

#include <algorithm>

namespace stitch::rt {

CacheStats& CacheStats::operator+=(const CacheStats& o) {
  memoryHits += o.memoryHits;
  memoryMisses += o.memoryMisses;
  diskHits += o.diskHits;
  diskMisses += o.diskMisses;
  diskWrites += o.diskWrites;
  corruptEntries += o.corruptEntries;
  evictions += o.evictions;
  compiles += o.compiles;
  compileSeconds += o.compileSeconds;
  shapeClasses += o.shapeClasses;
  classSizes += o.classSizes;
  remoteHits += o.remoteHits;
  remoteMisses += o.remoteMisses;
  remoteWrites += o.remoteWrites;
  remoteErrors += o.remoteErrors;
  return *this;
}

std::string CacheStats::toString() const {
  return fmt::format(
      "memory {} hits / {} misses, disk {} hits / {} misses / {} writes / {} evictions, "
      "{} corrupt entries, {} compiles in {:.3f} s, {} shape classes serving {} sizes, remote {} "
      "hits / {} misses / {} writes / {} errors",
      memoryHits, memoryMisses, diskHits, diskMisses, diskWrites, evictions, corruptEntries,
      compiles, compileSeconds, shapeClasses, classSizes, remoteHits, remoteMisses, remoteWrites,
      remoteErrors);
}

void ShapeClassCounter::note(const CacheKey& key, const std::vector<int64_t>& sizes) {
  if (sizes.empty()) return;
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::vector<int64_t>>& seen = sizes_[key.canonical()];
  if (std::find(seen.begin(), seen.end(), sizes) == seen.end()) seen.push_back(sizes);
}

void ShapeClassCounter::addTo(CacheStats& s) const {
  std::lock_guard<std::mutex> lock(mu_);
  s.shapeClasses += sizes_.size();
  for (const auto& [key, seen] : sizes_) s.classSizes += seen.size();
}

void CacheStatsCounter::compiled(std::chrono::nanoseconds took) {
  compiles_.fetch_add(1, std::memory_order_relaxed);
  compileNanos_.fetch_add(static_cast<uint64_t>(std::max<int64_t>(0, took.count())),
                          std::memory_order_relaxed);
}

CacheStats CacheStatsCounter::snapshot() const {
  CacheStats s;
  s.memoryHits = memoryHits_.load(std::memory_order_relaxed);
  s.memoryMisses = memoryMisses_.load(std::memory_order_relaxed);
  s.diskHits = diskHits_.load(std::memory_order_relaxed);
  s.diskMisses = diskMisses_.load(std::memory_order_relaxed);
  s.diskWrites = diskWrites_.load(std::memory_order_relaxed);
  s.corruptEntries = corruptEntries_.load(std::memory_order_relaxed);
  s.evictions = evictions_.load(std::memory_order_relaxed);
  s.compiles = compiles_.load(std::memory_order_relaxed);
  s.compileSeconds = static_cast<double>(compileNanos_.load(std::memory_order_relaxed)) * 1e-9;
  s.remoteHits = remoteHits_.load(std::memory_order_relaxed);
  s.remoteMisses = remoteMisses_.load(std::memory_order_relaxed);
  s.remoteWrites = remoteWrites_.load(std::memory_order_relaxed);
  s.remoteErrors = remoteErrors_.load(std::memory_order_relaxed);
  return s;
}

void CacheStatsCounter::reset() {
  for (auto* c : {&memoryHits_, &memoryMisses_, &diskHits_, &diskMisses_, &diskWrites_,
                  &corruptEntries_, &evictions_, &compiles_, &compileNanos_, &remoteHits_,
                  &remoteMisses_, &remoteWrites_, &remoteErrors_})
    c->store(0, std::memory_order_relaxed);
}

}  // namespace stitch::rt
