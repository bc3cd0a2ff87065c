// Live X11 screen capture (the Linux frame source of `tessera serve --screen x11`): the root
// window read through MIT-SHM into one shared-memory segment (no copy through the socket; plain
// GetImage where the server offers no SHM, e.g. a remote display), and the XDamage extension,
// where present, to learn that something changed without reading and hashing the frame.
#pragma once
#include <atomic>
#include <cstdint>
#include <string>

#include "image/image.h"

struct xcb_connection_t;

namespace tessera {

class X11Capture {
 public:
  // display: ":99", or "" for $DISPLAY. Throws Error when it cannot be opened or its root
  // window's pixel format is not 24-bit RGB in 32-bit pixels.
  explicit X11Capture(const std::string& display);
  ~X11Capture();
  X11Capture(const X11Capture&) = delete;
  X11Capture& operator=(const X11Capture&) = delete;

  int width() const { return width_; }
  int height() const { return height_; }
  bool uses_shm() const { return shm_ != 0; }
  bool uses_damage() const { return damage_ != 0; }

  // Waits up to timeout_s for the screen to change since the last grab. With XDamage, true
  // once a damage event arrived (false on timeout: nothing to read); without it, true after the
  // timeout (the caller then compares frames). Throws Error when the connection breaks.
  bool wait_for_change(double timeout_s);
  // The screen now, as RGB.
  ImageRGB grab();

  uint64_t damage_events() const { return damage_events_; }

 private:
  xcb_connection_t* c_ = nullptr;
  uint32_t root_ = 0;
  int width_ = 0, height_ = 0;
  uint32_t shm_ = 0;  // xcb_shm_seg_t, 0 without SHM
  int shm_id_ = -1;
  uint8_t* shm_addr_ = nullptr;
  uint32_t damage_ = 0;  // xcb_damage_damage_t, 0 without XDamage
  uint8_t damage_event_ = 0;
  bool damaged_ = true;  // the first grab always reads
  std::atomic<uint64_t> damage_events_{0};  // read by other threads (metrics)
};

}  // namespace tessera
