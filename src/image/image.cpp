#include "image/image.h"

#include <jpeglib.h>
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>

#include "core/error.h"
#include "core/mapped_file.h"

namespace tessera {

namespace {

void check_size(int64_t w, int64_t h, const std::string& name, const ImageLimits& lim) {
  if (w <= 0 || h <= 0) fail("%s: image has zero size (%lldx%lld)", name.c_str(), static_cast<long long>(w), static_cast<long long>(h));
  if (w > (1 << 20) || h > (1 << 20) || w * h > lim.max_pixels)
    fail("%s: image of %lldx%lld pixels exceeds the limit of %lld pixels", name.c_str(), static_cast<long long>(w),
         static_cast<long long>(h), static_cast<long long>(lim.max_pixels));
}

// ---- PNG (classic libpng API: every colour type expanded to RGBA8, 16-bit stripped to the
// high byte, no gamma conversion; PIL does the same before Idefics3's alpha compositing) ----
struct PngReader {
  const uint8_t* data;
  size_t size, pos;
};

void png_read_mem(png_structp png, png_bytep out, png_size_t n) {
  auto* r = static_cast<PngReader*>(png_get_io_ptr(png));
  if (n > r->size - r->pos) png_error(png, "file is truncated");
  std::memcpy(out, r->data + r->pos, n);
  r->pos += n;
}
void png_error_fn(png_structp png, png_const_charp msg) {
  auto* buf = static_cast<std::string*>(png_get_error_ptr(png));
  *buf = msg;
  png_longjmp(png, 1);
}
void png_warning_fn(png_structp, png_const_charp) {}

ImageRGB decode_png(const uint8_t* data, size_t size, const std::string& name, const ImageLimits& lim) {
  std::string msg;
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &msg, png_error_fn, png_warning_fn);
  if (!png) fail("%s: out of memory", name.c_str());
  png_infop info = png_create_info_struct(png);
  PngReader reader{data, size, 8};
  ImageRGB out;
  std::vector<uint8_t> rgba;
  std::vector<png_bytep> rows;
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    fail("%s: cannot decode PNG: %s", name.c_str(), msg.c_str());
  }
  png_set_read_fn(png, &reader, png_read_mem);
  png_set_sig_bytes(png, 8);
  png_set_user_limits(png, 1u << 20, 1u << 20);
  png_read_info(png, info);
  const int64_t w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  if (w <= 0 || h <= 0 || w * h > lim.max_pixels) {
    png_destroy_read_struct(&png, &info, nullptr);
    check_size(w, h, name, lim);
  }
  // Deflate packs at most 1032 bytes into one (a 258-byte match in two 1-bit codes), so the
  // file must hold at least 1/1032 of the filtered rows it declares: a small file claiming a
  // huge image is refused before the pixels are allocated.
  const int64_t bits_per_px = int64_t{png_get_channels(png, info)} * png_get_bit_depth(png, info);
  const int64_t raw_bytes = h * (1 + (w * bits_per_px + 7) / 8);
  if (static_cast<int64_t>(size) < raw_bytes / 1032) {
    png_destroy_read_struct(&png, &info, nullptr);
    fail("%s: PNG of %lldx%lld pixels cannot fit in %zu bytes (truncated or hostile)", name.c_str(),
         static_cast<long long>(w), static_cast<long long>(h), size);
  }
  const int color = png_get_color_type(png, info);
  bool has_alpha = (color & PNG_COLOR_MASK_ALPHA) != 0;
  if (png_get_bit_depth(png, info) == 16) png_set_strip_16(png);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (png_get_valid(png, info, PNG_INFO_tRNS)) {
    png_set_tRNS_to_alpha(png);
    has_alpha = true;
  }
  if (color == PNG_COLOR_TYPE_GRAY || color == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  png_set_filler(png, 0xff, PNG_FILLER_AFTER);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != static_cast<size_t>(w) * 4) png_error(png, "unexpected row layout");
  rgba.resize(static_cast<size_t>(w) * h * 4);
  rows.resize(static_cast<size_t>(h));
  for (int64_t y = 0; y < h; ++y) rows[static_cast<size_t>(y)] = rgba.data() + static_cast<size_t>(y) * w * 4;
  png_read_image(png, rows.data());
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  out.width = static_cast<int>(w);
  out.height = static_cast<int>(h);
  out.pixels.resize(static_cast<size_t>(w) * h * 3);
  for (size_t i = 0, n = static_cast<size_t>(w) * h; i < n; ++i) {
    if (has_alpha) composite_on_white(&rgba[4 * i], &out.pixels[3 * i]);
    else std::memcpy(&out.pixels[3 * i], &rgba[4 * i], 3);
  }
  return out;
}

// ---- JPEG (libjpeg-turbo with its defaults: islow DCT, fancy upsampling, as PIL) ----
struct JpegErr {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char msg[JMSG_LENGTH_MAX];
};

void jpeg_error_exit(j_common_ptr cinfo) {
  JpegErr* e = reinterpret_cast<JpegErr*>(cinfo->err);
  (*cinfo->err->format_message)(cinfo, e->msg);
  std::longjmp(e->jump, 1);
}
// libjpeg reports recoverable damage (premature end of data, corrupt entropy data) as a
// warning, msg_level -1, and decodes on with grey filler; PIL refuses such files, and so do we.
void jpeg_warning_is_error(j_common_ptr cinfo, int msg_level) {
  if (msg_level < 0) jpeg_error_exit(cinfo);
}

ImageRGB decode_jpeg(const uint8_t* data, size_t size, const std::string& name, const ImageLimits& lim) {
  jpeg_decompress_struct cinfo;
  JpegErr err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_error_exit;
  err.mgr.emit_message = jpeg_warning_is_error;
  ImageRGB out;
  std::string failure;
  if (setjmp(err.jump)) {
    failure = err.msg;
    jpeg_destroy_decompress(&cinfo);
    fail("%s: cannot decode JPEG: %s", name.c_str(), failure.c_str());
  }
  jpeg_create_decompress(&cinfo);
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  cinfo.out_color_space = JCS_RGB;
  if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
    jpeg_destroy_decompress(&cinfo);
    fail("%s: CMYK JPEG images are not supported", name.c_str());
  }
  const int64_t w = cinfo.image_width, h = cinfo.image_height;
  if (w <= 0 || h <= 0 || w > (1 << 20) || h > (1 << 20) || w * h > lim.max_pixels) {
    jpeg_destroy_decompress(&cinfo);
    check_size(w, h, name, lim);
  }
  // Huffman coding spends at least one bit on every 8x8 luma block's DC term (a progressive
  // file's end-of-band runs cover only the AC terms), so the file must be at least
  // blocks / 8 bytes: a 761-byte file declaring 8192x8192 is refused before decoding.
  // Arithmetic-coded files have no such floor; the pixel budget bounds them.
  const int64_t blocks = ((w + 7) / 8) * ((h + 7) / 8);
  if (!cinfo.arith_code && static_cast<int64_t>(size) < blocks / 8) {
    jpeg_destroy_decompress(&cinfo);
    fail("%s: JPEG of %lldx%lld pixels cannot fit in %zu bytes (truncated or hostile)", name.c_str(),
         static_cast<long long>(w), static_cast<long long>(h), size);
  }
  jpeg_start_decompress(&cinfo);
  out.width = static_cast<int>(cinfo.output_width);
  out.height = static_cast<int>(cinfo.output_height);
  out.pixels.resize(static_cast<size_t>(out.width) * out.height * 3);
  while (cinfo.output_scanline < cinfo.output_height) {
    JSAMPROW row = out.row(static_cast<int>(cinfo.output_scanline));
    jpeg_read_scanlines(&cinfo, &row, 1);
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return out;
}

}  // namespace

// PIL AlphaComposite.c, integer path, with dst = opaque white.
void composite_on_white(const uint8_t rgba[4], uint8_t rgb[3]) {
  const uint32_t a = rgba[3];
  if (a == 0) {
    rgb[0] = rgb[1] = rgb[2] = 255;
    return;
  }
  constexpr uint32_t kBits = 7;
  const uint32_t blend = 255 * (255 - a);
  const uint32_t outa255 = a * 255 + blend;
  const uint32_t coef1 = a * 255 * 255 * (1u << kBits) / outa255;
  const uint32_t coef2 = 255 * (1u << kBits) - coef1;
  for (int c = 0; c < 3; ++c) {
    const uint32_t tmp = rgba[c] * coef1 + 255 * coef2 + (0x80u << kBits);
    rgb[c] = static_cast<uint8_t>((((tmp >> 8) + tmp) >> 8) >> kBits);
  }
}

ImageRGB decode_image(const uint8_t* data, size_t size, const std::string& name, const ImageLimits& lim) {
  static const uint8_t kPng[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  if (size >= 8 && std::memcmp(data, kPng, 8) == 0) return decode_png(data, size, name, lim);
  if (size >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff) return decode_jpeg(data, size, name, lim);
  fail("%s: not a PNG or JPEG image", name.c_str());
}

ImageRGB load_image(const std::string& path, const ImageLimits& lim) {
  MappedFile f(path);
  return decode_image(f.data(), f.size(), path, lim);
}

ImageRGB image_from_raw(const uint8_t* data, int width, int height, int channels, size_t stride, const ImageLimits& lim) {
  check_size(width, height, "raw frame", lim);
  if (channels != 3 && channels != 4) fail("raw frame: %d channels (3 or 4 supported)", channels);
  if (!data) fail("raw frame: no pixel data");
  if (stride < static_cast<size_t>(width) * channels) fail("raw frame: row stride %zu is shorter than a row", stride);
  ImageRGB out;
  out.width = width;
  out.height = height;
  out.pixels.resize(static_cast<size_t>(width) * height * 3);
  for (int y = 0; y < height; ++y) {
    const uint8_t* src = data + static_cast<size_t>(y) * stride;
    uint8_t* dst = out.row(y);
    for (int x = 0; x < width; ++x) {
      if (channels == 4) composite_on_white(src + 4 * x, dst + 3 * x);
      else std::memcpy(dst + 3 * x, src + 3 * x, 3);
    }
  }
  return out;
}

}  // namespace tessera
