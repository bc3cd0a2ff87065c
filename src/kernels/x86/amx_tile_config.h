// The AMX tile configuration (palette 1) every AMX user here loads: 8 tiles of 16 lines × 64
// bytes. Kept as a static object because GCC 12's _tile_loadconfig declares an 8-byte read: the
// stores filling a local configuration can be dropped as dead, and the first tile op then faults.
#pragma once
#include <cstdint>

namespace tessera {

struct alignas(64) AmxTileConfig {
  uint8_t palette = 1, start_row = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

constexpr AmxTileConfig full_tiles_config() {
  AmxTileConfig cfg;
  for (int t = 0; t < 8; ++t) cfg.rows[t] = 16, cfg.colsb[t] = 64;
  return cfg;
}

inline constexpr AmxTileConfig kFullTiles = full_tiles_config();

}  // namespace tessera
