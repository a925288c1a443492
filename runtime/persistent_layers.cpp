// The persistent layers (design note in persistent_layers.h).
#include "runtime/persistent_layers.h"

#include <fmt/format.h>

#include "runtime/remote_cache.h"
#include "runtime/support/env.h"
#include "runtime/support/logging.h"

namespace stitch::rt {

std::shared_ptr<RemoteCache> remoteFromEnv() {
  if (auto config = remoteCacheConfigFromEnv()) return RemoteCache::shared(*config);
  return nullptr;
}

PersistentLayers::PersistentLayers(std::unique_ptr<DiskCache> disk,
                                   std::shared_ptr<RemoteCache> remote)
    : disk_(std::move(disk)), remote_(std::move(remote)) {}

PersistentLayers::~PersistentLayers() = default;

std::unique_ptr<PersistentLayers> PersistentLayers::fromEnv() {
  return std::make_unique<PersistentLayers>(DiskCache::fromEnv(), remoteFromEnv());
}

std::shared_ptr<RemoteCache> PersistentLayers::remote() const {
  std::lock_guard lock(remoteMu_);
  return remote_;
}

void PersistentLayers::setRemote(std::shared_ptr<RemoteCache> remote) {
  std::lock_guard lock(remoteMu_);
  if (remote_ == remote) return;
  if (remote_) retiredRemoteStats_ += remote_->stats();
  remote_ = std::move(remote);
}

std::optional<std::vector<uint8_t>> PersistentLayers::load(const CacheKey& key, EntryKind kind) {
  const bool onDisk = disk_ && disk_->enabled();
  if (onDisk)
    if (auto bytes = disk_->load(key, kind)) return bytes;
  std::shared_ptr<RemoteCache> r = remote();
  if (!r) return std::nullopt;
  auto bytes = r->load(key, kind);
  // The next process on this machine finds it on its disk.
  if (bytes && onDisk) disk_->store(key, *bytes, kind);
  return bytes;
}

void PersistentLayers::store(const CacheKey& key, std::span<const uint8_t> payload,
                             EntryKind kind) {
  if (disk_ && disk_->enabled()) disk_->store(key, payload, kind);
  if (std::shared_ptr<RemoteCache> r = remote()) r->store(key, payload, kind);
}

void PersistentLayers::publish(const CacheKey& key, EntryKind kind) {
  std::shared_ptr<RemoteCache> r = remote();
  if (!r || !disk_ || !disk_->enabled()) return;
  if (auto bytes = disk_->load(key, kind)) r->store(key, *bytes, kind);
}

void PersistentLayers::rejected(const CacheKey& key, std::string_view what, std::string_view why) {
  rejected_.corruptEntry();
  stitch::log().warn("kernel cache: ignoring {} {}: {}; building it again", what, describe(key),
                     why);
}

std::string PersistentLayers::describe(const CacheKey& key) const {
  std::string where;
  if (disk_ && disk_->enabled()) where = disk_->pathFor(key).string();
  if (std::shared_ptr<RemoteCache> r = remote())
    where += (where.empty() ? "" : " or ") + r->config().url + " " + r->nameFor(key);
  return where.empty() ? fmt::format("{:016x}", key.hash()) : where;
}

CacheStats PersistentLayers::stats() const {
  CacheStats s = rejected_.snapshot();
  if (disk_) s += disk_->stats();
  std::lock_guard lock(remoteMu_);
  s += retiredRemoteStats_;
  if (remote_) s += remote_->stats();
  return s;
}

}  // namespace stitch::rt
