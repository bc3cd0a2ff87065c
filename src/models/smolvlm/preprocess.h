// Image preprocessing of Hugging Face's Idefics3ImageProcessor (SmolVLM), reproduced exactly:
// resize the longest edge to `longest_edge` (even-rounded other side), stretch both sides up to
// multiples of the tile size, cut tiles row-major, add the whole frame resized to one tile as
// the global image (last), then rescale and normalise. Resampling is Pillow's LANCZOS.
#pragma once
#include <vector>

#include "core/thread_pool.h"
#include "image/image.h"
#include "image/resize.h"

namespace tessera {

struct Idefics3PreprocessConfig {
  int longest_edge = 2048;  // processor "size.longest_edge"
  int tile = 512;           // processor "max_image_size.longest_edge" (the encoder's image size)
  bool split = true;        // do_image_splitting
  float mean[3] = {0.5f, 0.5f, 0.5f};
  float std[3] = {0.5f, 0.5f, 0.5f};
  ResampleFilter filter = ResampleFilter::Lanczos;
  // transformers 5's default Idefics3ImageProcessor resizes with torchvision (PyTorch's uint8
  // antialiased kernels); Idefics3ImageProcessorPil with Pillow. See docs/vision.md.
  ResampleArithmetic arithmetic = ResampleArithmetic::Torch;
};

struct PreprocessedImage {
  int rows = 0, cols = 0;      // tile grid (0 x 0 when the image is not split)
  int resized_w = 0, resized_h = 0;  // size after the tile-multiple stretch
  std::vector<ImageRGB> tiles;  // rows*cols tiles row-major, then the global image
};

// The geometry preprocess_idefics3 gives a w x h image, without touching pixels: the resize, the
// stretch to tile multiples and the grid (0 x 0: not split, one tile).
struct Idefics3Grid {
  int resized_w = 0, resized_h = 0, stretched_w = 0, stretched_h = 0;
  int rows = 0, cols = 0;
  int tiles() const { return rows * cols + 1; }  // the grid and the global image (1: not split)
};
Idefics3Grid idefics3_grid(const Idefics3PreprocessConfig& cfg, int w, int h);

PreprocessedImage preprocess_idefics3(const ImageRGB& image, const Idefics3PreprocessConfig& cfg, ThreadPool* pool = nullptr);

// Incremental preprocessing for frames that change in a few rows: the state of the last call (its
// intermediate images and result); only the rows and tiles that input rows [a, b) can change are
// resampled again, bitwise what preprocess_idefics3 gives for the whole frame. A state that is
// empty, of another frame size, or left by a call that failed computes everything.
struct PreprocessState {
  bool valid = false;
  int in_w = 0, in_h = 0;
  ImageRGB first, stretched;  // after the longest-edge resize, after the tile-multiple stretch
  PreprocessedImage out;
};
const PreprocessedImage& preprocess_idefics3_rows(const ImageRGB& image, const Idefics3PreprocessConfig& cfg, int a, int b,
                                                  PreprocessState& st, ThreadPool* pool = nullptr);

// One tile as a normalised float tensor, channel-major [3][h][w] (what the encoder reads).
void tile_to_chw(const ImageRGB& tile, const Idefics3PreprocessConfig& cfg, float* out);

// The output size of the first resize (Hugging Face's get_resize_output_image_size).
void idefics3_resize_size(int w, int h, int longest_edge, int& out_w, int& out_h);

}  // namespace tessera
