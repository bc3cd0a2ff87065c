#include "watch/tile_cache.h"

#include <cstring>

namespace tessera {

namespace {

// Two independent 64-bit mixes over the whole content (8 bytes at a time, then the tail).
inline uint64_t mix(uint64_t h, uint64_t v, uint64_t k) {
  h ^= v * k;
  h = (h << 31) | (h >> 33);
  return h * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
}

}  // namespace

TileKey tile_key(const ImageRGB& tile) {
  TileKey k{0x243f6a8885a308d3ull ^ static_cast<uint64_t>(tile.width), 0x13198a2e03707344ull ^ static_cast<uint64_t>(tile.height)};
  const uint8_t* p = tile.pixels.data();
  const size_t n = tile.pixels.size();
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    k.a = mix(k.a, v, 0xff51afd7ed558ccdull);
    k.b = mix(k.b, v ^ i, 0xc4ceb9fe1a85ec53ull);
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p + i, n - i);
  k.a = mix(k.a, tail ^ n, 0xff51afd7ed558ccdull);
  k.b = mix(k.b, tail + n, 0xc4ceb9fe1a85ec53ull);
  return k;
}

const std::vector<float>* TileCache::find(const ImageRGB& tile) {
  const TileKey k = tile_key(tile);
  auto it = map_.find(k);
  if (it == map_.end()) {
    ++misses_;
    return nullptr;
  }
  Entry& e = *it->second;
  if (e.width != tile.width || e.height != tile.height || e.pixels != tile.pixels) {
    ++collisions_;
    ++misses_;
    return nullptr;
  }
  lru_.splice(lru_.begin(), lru_, it->second);
  ++hits_;
  return &lru_.front().output;
}

void TileCache::insert(const ImageRGB& tile, const std::vector<float>& output) {
  Entry e{tile_key(tile), tile.width, tile.height, tile.pixels, output};
  const size_t need = e.bytes();
  if (need > budget_) return;
  if (auto it = map_.find(e.key); it != map_.end()) {  // replace (a collision's loser or a refresh)
    bytes_ -= it->second->bytes();
    lru_.erase(it->second);
    map_.erase(it);
  }
  evict_to(budget_ - need);
  lru_.push_front(std::move(e));
  map_[lru_.front().key] = lru_.begin();
  bytes_ += need;
}

void TileCache::evict_to(size_t max_bytes) {
  while (bytes_ > max_bytes && !lru_.empty()) {
    bytes_ -= lru_.back().bytes();
    map_.erase(lru_.back().key);
    lru_.pop_back();
    ++evictions_;
  }
}

void TileCache::set_budget(size_t budget_bytes) {
  budget_ = budget_bytes;
  evict_to(budget_);
}

}  // namespace tessera
