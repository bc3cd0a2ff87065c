// Image resampling identical to Pillow's Image.resize (ImagingResample: separable convolution,
// coefficients normalised to 22-bit fixed point, horizontal pass then vertical, 8-bit rounding
// between passes), so preprocessing matches Hugging Face's PIL-based processors pixel for pixel.
#pragma once
#include <utility>

#include "core/thread_pool.h"
#include "image/image.h"

namespace tessera {

enum class ResampleFilter { Lanczos, Bicubic, Bilinear };

// The fixed-point arithmetic of the resampler: Pillow's (int32 coefficients, 22 fraction bits)
// or PyTorch's uint8 antialiased interpolate, which torchvision uses (int16 coefficients with
// as many fraction bits as the largest weight allows). Same filter and taps, rounding differs.
enum class ResampleArithmetic { Pillow, Torch };

// The horizontal pass runs in strips of this many source rows: a strip's row of bytes is 192 =
// 3 x 64 (whole vectors of combine_rows_u8), and its two column buffers for a 1920-wide screen
// resized to 2048 take 0.75 MB, within L2. Up to kResizeStripSlots strips are in flight (one per
// pool thread); each has its buffers in the scratch (models/footprint.cpp counts them).
constexpr int64_t kResizeStripRows = 64, kResizeStripSlots = 4;

// With a pool, output rows (and columns) are spread over its threads; the bytes are the same.
ImageRGB resize_like_pil(const ImageRGB& in, int out_w, int out_h, ResampleFilter filter = ResampleFilter::Lanczos,
                         ResampleArithmetic arith = ResampleArithmetic::Pillow, ThreadPool* pool = nullptr);

// Output rows [o0, o1) of resize_like_pil(in, out.width, out.height, ...) written into `out`
// (already sized), its other rows untouched: bitwise those rows of the whole resize. For frames
// that change in a few rows (incremental preprocessing, models/smolvlm/preprocess.h).
void resize_rows_like_pil(const ImageRGB& in, ImageRGB& out, int o0, int o1, ResampleFilter filter,
                          ResampleArithmetic arith, ThreadPool* pool = nullptr);

// Gives back the calling thread's resampling scratch (the intermediate images, kept across calls
// because allocating them per call cost more than the resampling: core/scratch_buffer.h). The
// next call maps fresh pages, as a process's first call does.
void release_resize_scratch();

// The output rows [first, last) of a resize from in_h to out_h rows whose values depend on input
// rows [a, b) (the vertical filter's support); {0, 0} when none do.
std::pair<int, int> resized_rows_touched(int in_h, int out_h, ResampleFilter filter, ResampleArithmetic arith, int a, int b);

}  // namespace tessera
