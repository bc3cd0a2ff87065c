// Image resampling identical to Pillow's Image.resize (ImagingResample: separable convolution,
// coefficients normalised to 22-bit fixed point, horizontal pass then vertical, 8-bit rounding
// between passes), so preprocessing matches Hugging Face's PIL-based processors pixel for pixel.
#pragma once
#include "formats/image.h"

namespace tessera {

enum class ResampleFilter { Lanczos, Bicubic, Bilinear };

ImageRGB resize_like_pil(const ImageRGB& in, int out_w, int out_h, ResampleFilter filter = ResampleFilter::Lanczos);

}  // namespace tessera
