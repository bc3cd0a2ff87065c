// Image resampling identical to Pillow's Image.resize (ImagingResample: separable convolution,
// coefficients normalised to 22-bit fixed point, horizontal pass then vertical, 8-bit rounding
// between passes), so preprocessing matches Hugging Face's PIL-based processors pixel for pixel.
#pragma once
#include "core/thread_pool.h"
#include "image/image.h"

namespace tessera {

enum class ResampleFilter { Lanczos, Bicubic, Bilinear };

// The fixed-point arithmetic of the resampler: Pillow's (int32 coefficients, 22 fraction bits)
// or PyTorch's uint8 antialiased interpolate, which torchvision uses (int16 coefficients with
// as many fraction bits as the largest weight allows). Same filter and taps, rounding differs.
enum class ResampleArithmetic { Pillow, Torch };

// With a pool, output rows (and columns) are spread over its threads; the bytes are the same.
ImageRGB resize_like_pil(const ImageRGB& in, int out_w, int out_h, ResampleFilter filter = ResampleFilter::Lanczos,
                         ResampleArithmetic arith = ResampleArithmetic::Pillow, ThreadPool* pool = nullptr);

}  // namespace tessera
