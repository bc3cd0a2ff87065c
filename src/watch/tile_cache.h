// A memory-bounded cache of encoder+connector outputs per preprocessed tile. The key is the
// tile's full content: a 128-bit hash picks the entry and the stored pixels are compared byte
// for byte before an output is reused, so a hash collision can never return another tile's
// embeddings (weak, truncated keys are how other engines served stale results).
#pragma once
#include <cstdint>
#include <list>
#include <unordered_map>
#include <vector>

#include "image/image.h"

namespace tessera {

struct TileKey {
  uint64_t a = 0, b = 0;
  bool operator==(const TileKey& o) const { return a == o.a && b == o.b; }
};
TileKey tile_key(const ImageRGB& tile);

class TileCache {
 public:
  explicit TileCache(size_t budget_bytes) : budget_(budget_bytes) {}

  // The cached output of exactly this tile, or nullptr; a hit becomes the most recent entry.
  const std::vector<float>* find(const ImageRGB& tile);
  // Stores a copy (evicting least recently used entries to stay within the budget); an entry
  // larger than the whole budget is not stored.
  void insert(const ImageRGB& tile, const std::vector<float>& output);

  // A new budget; least recently used entries go until the cache fits it.
  void set_budget(size_t budget_bytes);

  size_t bytes() const { return bytes_; }
  size_t entries() const { return map_.size(); }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  uint64_t evictions() const { return evictions_; }
  uint64_t collisions() const { return collisions_; }  // same hash, different pixels (never reused)

 private:
  struct Entry {
    TileKey key;
    int width, height;
    std::vector<uint8_t> pixels;
    std::vector<float> output;
    size_t bytes() const { return pixels.size() + output.size() * sizeof(float) + sizeof(Entry); }
  };
  struct Hash {
    size_t operator()(const TileKey& k) const { return static_cast<size_t>(k.a ^ (k.b * 0x9e3779b97f4a7c15ull)); }
  };
  void evict_to(size_t max_bytes);
  size_t budget_, bytes_ = 0;
  std::list<Entry> lru_;  // front: most recent
  std::unordered_map<TileKey, std::list<Entry>::iterator, Hash> map_;
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0, collisions_ = 0;
};

}  // namespace tessera
