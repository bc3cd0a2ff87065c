#include "watch/x11_capture.h"

#include <poll.h>
#include <sys/ipc.h>
#include <sys/shm.h>
#include <xcb/damage.h>
#include <xcb/shm.h>
#include <xcb/xcb.h>
#include <xcb/xfixes.h>

#include <chrono>
#include <cstdlib>
#include <memory>

#include "core/error.h"

namespace tessera {

namespace {

template <class T>
using Reply = std::unique_ptr<T, decltype(&std::free)>;
template <class T>
Reply<T> reply(T* p) {
  return Reply<T>(p, &std::free);
}

}  // namespace

X11Capture::X11Capture(const std::string& display) {
  int screen_no = 0;
  c_ = xcb_connect(display.empty() ? nullptr : display.c_str(), &screen_no);
  if (xcb_connection_has_error(c_)) {
    xcb_disconnect(c_);
    c_ = nullptr;
    fail("cannot open the X display '%s' (is it running? DISPLAY, or --screen x11::N)",
         display.empty() ? (std::getenv("DISPLAY") ? std::getenv("DISPLAY") : "") : display.c_str());
  }
  xcb_screen_iterator_t it = xcb_setup_roots_iterator(xcb_get_setup(c_));
  for (int i = 0; i < screen_no && it.rem; ++i) xcb_screen_next(&it);
  const xcb_screen_t* s = it.data;
  root_ = s->root;
  width_ = s->width_in_pixels;
  height_ = s->height_in_pixels;
  // 24-bit colour in 32-bit little-endian pixels (B, G, R, X in memory): what Xorg, Xvfb and
  // XWayland give on every common setup
  bool bpp32 = false;
  for (auto f = xcb_setup_pixmap_formats_iterator(xcb_get_setup(c_)); f.rem; xcb_format_next(&f))
    if (f.data->depth == s->root_depth) bpp32 = f.data->bits_per_pixel == 32;
  if ((s->root_depth != 24 && s->root_depth != 32) || !bpp32 || xcb_get_setup(c_)->image_byte_order != XCB_IMAGE_ORDER_LSB_FIRST) {
    xcb_disconnect(c_);
    c_ = nullptr;
    fail("the X display's pixel format (depth %d) is not 24-bit RGB in 32-bit pixels", s->root_depth);
  }
  if (width_ < 1 || height_ < 1 || static_cast<int64_t>(width_) * height_ > (int64_t{1} << 26)) {
    xcb_disconnect(c_);
    c_ = nullptr;
    fail("the X screen is %dx%d: out of range", width_, height_);
  }

  // MIT-SHM: one segment the size of a frame, removed at once so it cannot outlive the process
  if (const xcb_query_extension_reply_t* ext = xcb_get_extension_data(c_, &xcb_shm_id); ext && ext->present) {
    const size_t bytes = static_cast<size_t>(width_) * height_ * 4;
    shm_id_ = shmget(IPC_PRIVATE, bytes, IPC_CREAT | 0600);
    if (shm_id_ >= 0) {
      void* a = shmat(shm_id_, nullptr, 0);
      if (a != reinterpret_cast<void*>(-1)) {
        shm_addr_ = static_cast<uint8_t*>(a);
        shm_ = xcb_generate_id(c_);
        auto err = reply(xcb_request_check(c_, xcb_shm_attach_checked(c_, shm_, static_cast<uint32_t>(shm_id_), 0)));
        if (err) {  // e.g. a remote display: fall back to GetImage
          shmdt(shm_addr_);
          shm_addr_ = nullptr;
          shm_ = 0;
        }
      }
      shmctl(shm_id_, IPC_RMID, nullptr);
    }
  }
  // XDamage (which needs XFixes announced first): one event whenever the root window changes
  if (const xcb_query_extension_reply_t* ext = xcb_get_extension_data(c_, &xcb_damage_id); ext && ext->present) {
    auto xf = reply(xcb_xfixes_query_version_reply(c_, xcb_xfixes_query_version(c_, 5, 0), nullptr));
    auto dv = reply(xcb_damage_query_version_reply(c_, xcb_damage_query_version(c_, 1, 1), nullptr));
    if (xf && dv) {
      damage_ = xcb_generate_id(c_);
      auto err = reply(xcb_request_check(
          c_, xcb_damage_create_checked(c_, damage_, root_, XCB_DAMAGE_REPORT_LEVEL_NON_EMPTY)));
      if (err) damage_ = 0;
      else damage_event_ = static_cast<uint8_t>(ext->first_event + XCB_DAMAGE_NOTIFY);
    }
  }
  xcb_flush(c_);
}

X11Capture::~X11Capture() {
  if (!c_) return;
  if (damage_) xcb_damage_destroy(c_, damage_);
  if (shm_) xcb_shm_detach(c_, shm_);
  xcb_flush(c_);
  if (shm_addr_) shmdt(shm_addr_);
  xcb_disconnect(c_);
}

bool X11Capture::wait_for_change(double timeout_s) {
  using Clock = std::chrono::steady_clock;
  const auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  for (;;) {
    while (xcb_generic_event_t* ev = xcb_poll_for_event(c_)) {
      if (damage_ && (ev->response_type & 0x7f) == damage_event_) {
        damaged_ = true;
        ++damage_events_;
      }
      std::free(ev);
    }
    if (xcb_connection_has_error(c_)) fail("the X display connection broke");
    if (damaged_ && damage_) return true;
    const auto left = std::chrono::duration<double, std::milli>(until - Clock::now()).count();
    if (left <= 0) return !damage_;  // without XDamage: look every period
    pollfd p{xcb_get_file_descriptor(c_), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(left) + 1);
  }
}

ImageRGB X11Capture::grab() {
  if (damage_) {  // what happens from here on is a new change
    xcb_damage_subtract(c_, damage_, XCB_NONE, XCB_NONE);
    damaged_ = false;
  }
  const uint8_t* src = nullptr;
  Reply<xcb_get_image_reply_t> plain(nullptr, &std::free);
  if (shm_) {
    auto r = reply(xcb_shm_get_image_reply(
        c_,
        xcb_shm_get_image(c_, root_, 0, 0, static_cast<uint16_t>(width_), static_cast<uint16_t>(height_), ~0u,
                          XCB_IMAGE_FORMAT_Z_PIXMAP, shm_, 0),
        nullptr));
    if (!r) fail("the X server refused to copy the screen (MIT-SHM GetImage)");
    src = shm_addr_;
  } else {
    plain.reset(xcb_get_image_reply(c_,
                                    xcb_get_image(c_, XCB_IMAGE_FORMAT_Z_PIXMAP, root_, 0, 0,
                                                  static_cast<uint16_t>(width_), static_cast<uint16_t>(height_), ~0u),
                                    nullptr));
    if (!plain || xcb_get_image_data_length(plain.get()) < width_ * height_ * 4)
      fail("the X server refused to copy the screen (GetImage)");
    src = xcb_get_image_data(plain.get());
  }
  ImageRGB img;
  img.width = width_;
  img.height = height_;
  img.pixels.resize(static_cast<size_t>(width_) * height_ * 3);
  const size_t n = static_cast<size_t>(width_) * height_;
  for (size_t i = 0; i < n; ++i) {  // B, G, R, X -> R, G, B
    img.pixels[3 * i] = src[4 * i + 2];
    img.pixels[3 * i + 1] = src[4 * i + 1];
    img.pixels[3 * i + 2] = src[4 * i];
  }
  return img;
}

}  // namespace tessera
