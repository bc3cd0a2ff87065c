// Watching the screen: exact reuse (tile cache + KV prefix) gives bitwise what a full recompute
// gives, frame after frame, including when the screen changes size, when the cache is over its
// budget and when the change is before, inside or after other tiles; the approximations are
// measured, never silently exact; bad frames are skipped with a reason.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "image/image.h"
#include "models/llama/llama.h"
#include "models/smolvlm/siglip.h"
#include "watch/frame_source.h"
#include "watch/tile_cache.h"
#include "watch/watcher.h"
#include "test_util.h"

using namespace tessera;

namespace {

const std::string kTiny = "tests/fixtures/vision/tiny/";

struct Models {
  std::unique_ptr<LlamaModel> text = LlamaModel::load(test::source_path(kTiny + "text.gguf"));
  std::unique_ptr<Idefics3Vision> vision = Idefics3Vision::load_mmproj(test::source_path(kTiny + "mmproj.gguf"));
};
const Models& models() {
  static Models m;
  return m;
}

ImageRGB screen(const char* name) { return load_image(test::source_path(std::string("tests/fixtures/vision/screens/") + name)); }

// Paints a w x h rectangle (as typing or a cursor would change pixels).
ImageRGB paint(ImageRGB im, int x, int y, int w, int h, uint8_t v) {
  for (int j = y; j < std::min(im.height, y + h); ++j)
    for (int i = x; i < std::min(im.width, x + w); ++i)
      for (int c = 0; c < 3; ++c) im.row(j)[3 * i + c] = static_cast<uint8_t>(v + 17 * c);
  return im;
}

SessionOptions session_options() {
  SessionOptions o;
  o.n_ctx = 2048;
  o.n_threads = 2;
  return o;
}

}  // namespace

// The sequence a watcher meets: an unchanged frame, a change late in the tile order, one at the
// start, a window resize (a different grid), back, and a frame equal to an old one.
TEST(Watch, ExactReuseIsBitwiseFullRecompute) {
  const Models& m = models();
  const ImageRGB a = screen("desktop_1920x1080.png");
  const std::vector<ImageRGB> frames = {a, a, paint(a, 1500, 900, 60, 14, 200), paint(a, 40, 40, 30, 14, 10),
                                        screen("xterm_1280x720.png"), a, paint(a, 1500, 900, 60, 14, 200)};
  WatchOptions wo;
  wo.n_predict = 4;
  Session s1(*m.text, session_options()), s2(*m.text, session_options());
  Watcher reuse(*m.text, *m.vision, s1, wo);
  WatchOptions fo = wo;
  fo.reuse = false;
  Watcher full(*m.text, *m.vision, s2, fo);
  int reused_tiles = 0, reused_tokens = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    const FrameResult r = reuse.process(frames[i]);
    const FrameResult f = full.process(frames[i]);
    const Divergence d = Watcher::compare(r, f);
    EXPECT_TRUE(d.bitwise_equal) << "frame " << i << ": emb " << d.emb_max_abs << " KL " << d.next_token_kl;
    EXPECT_EQ(r.answer, f.answer);
    EXPECT_EQ(f.tiles_encoded, f.tiles);  // the baseline recomputes everything
    reused_tiles += r.tiles_reused;
    reused_tokens += r.tokens_reused;
    if (i == 1) {  // the same frame again: the previous result
      EXPECT_TRUE(r.frame_unchanged);
    }
  }
  // what the sequence allows: frame 1 entirely, frames 2-3 most tiles, frame 5 from the cache
  EXPECT_GE(reused_tiles, 13 + 11 + 11 + 13);
  EXPECT_GT(reused_tokens, 2 * 800);
}

// A cache too small for a frame's tiles evicts, and stays exact.
TEST(Watch, CacheOverBudgetEvictsAndStaysExact) {
  const Models& m = models();
  const ImageRGB a = screen("desktop_1920x1080.png");
  WatchOptions wo;
  wo.n_predict = 2;
  const size_t per_tile = static_cast<size_t>(m.vision->config().tokens_per_tile()) * m.text->config().n_embd * 4 + 512 * 512 * 3;
  wo.cache_bytes = 3 * per_tile + 1024;  // room for 3 of 13 tiles
  Session s1(*m.text, session_options()), s2(*m.text, session_options());
  Watcher reuse(*m.text, *m.vision, s1, wo);
  WatchOptions fo = wo;
  fo.reuse = false;
  Watcher full(*m.text, *m.vision, s2, fo);
  for (const ImageRGB& f : {a, paint(a, 700, 500, 20, 20, 90), a}) {
    EXPECT_TRUE(Watcher::compare(reuse.process(f), full.process(f)).bitwise_equal);
    EXPECT_LE(reuse.cache().bytes(), wo.cache_bytes);
  }
  EXPECT_GT(reuse.cache().evictions(), 0u);
}

// The tile cache compares full contents: equal hashes are not enough.
TEST(Watch, TileCacheKeysOnFullContent) {
  TileCache c(size_t{64} << 20);
  ImageRGB t;
  t.width = t.height = 64;
  t.pixels.assign(64 * 64 * 3, 7);
  c.insert(t, {1.0f, 2.0f});
  ASSERT_NE(c.find(t), nullptr);
  ImageRGB u = t;
  u.pixels[1000] = 8;  // one byte differs
  EXPECT_EQ(c.find(u), nullptr);
  EXPECT_NE(tile_key(t).a, tile_key(u).a);
  ImageRGB v = t;
  v.width = 32;
  v.height = 128;  // same bytes, another shape
  EXPECT_EQ(c.find(v), nullptr);
}

// A smaller budget (serve --mem-budget making room) drops the least recently used tiles until the
// cache fits; the ones kept are still found.
TEST(Watch, TileCacheShrinksToANewBudget) {
  TileCache c(size_t{64} << 20);
  std::vector<ImageRGB> tiles(4);
  for (size_t i = 0; i < tiles.size(); ++i) {
    tiles[i].width = tiles[i].height = 64;
    tiles[i].pixels.assign(64 * 64 * 3, static_cast<uint8_t>(i));
    c.insert(tiles[i], std::vector<float>(256, static_cast<float>(i)));
  }
  ASSERT_NE(c.find(tiles[0]), nullptr);  // 0 becomes the most recent: 1 is now the oldest
  const size_t one = c.bytes() / 4;
  c.set_budget(2 * one);
  EXPECT_EQ(c.entries(), 2u);
  EXPECT_LE(c.bytes(), 2 * one);
  EXPECT_EQ(c.evictions(), 2u);
  EXPECT_EQ(c.find(tiles[1]), nullptr);
  EXPECT_EQ(c.find(tiles[2]), nullptr);
  ASSERT_NE(c.find(tiles[0]), nullptr);
  EXPECT_EQ((*c.find(tiles[3]))[0], 3.0f);
  c.set_budget(0);
  EXPECT_EQ(c.entries(), 0u);
  EXPECT_EQ(c.bytes(), 0u);
  c.insert(tiles[0], std::vector<float>(256, 0.0f));  // larger than the budget: not stored
  EXPECT_EQ(c.entries(), 0u);
}

// Approximations are opt-in and measured: the kept global thumbnail and stale KV give small but
// nonzero divergence, reported by compare().
TEST(Watch, ApproximationsAreMeasured) {
  const Models& m = models();
  const ImageRGB a = screen("desktop_1920x1080.png");
  WatchOptions wo;
  wo.n_predict = 2;
  wo.approx_global = 4.0;
  wo.approx_kv = 0.0;
  Session s1(*m.text, session_options()), s2(*m.text, session_options());
  Watcher approx(*m.text, *m.vision, s1, wo);
  WatchOptions fo;
  fo.n_predict = 2;
  fo.reuse = false;
  Watcher full(*m.text, *m.vision, s2, fo);
  approx.process(a);
  full.process(a);
  const ImageRGB b = paint(a, 40, 40, 30, 14, 10);  // first tile changes: later tiles keep stale K/V
  const FrameResult r = approx.process(b), f = full.process(b);
  EXPECT_TRUE(r.global_kept_approx);
  EXPECT_GT(r.tokens_kept_stale, 0);
  const Divergence d = Watcher::compare(r, f);
  EXPECT_FALSE(d.bitwise_equal);
  EXPECT_GT(d.emb_max_abs, 0.0);
  EXPECT_GE(d.next_token_kl, 0.0);
  EXPECT_LT(d.next_token_kl, 1.0);
}

// Frame sources: raw frames on stdin round-trip; a truncated one is a reason, not a crash.
TEST(Watch, RawFramesAndBadFrames) {
  const ImageRGB a = screen("xterm_700x450.png");
  const std::string path = testing::TempDir() + "/frames.raw";
  std::FILE* f = std::fopen(path.c_str(), "wb");
  write_raw_frame(f, a);
  write_raw_frame(f, a);
  std::fclose(f);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 100);  // cut the second frame short
  ASSERT_NE(std::freopen(path.c_str(), "rb", stdin), nullptr);
  auto src = FrameSource::open("-", ImageLimits{});
  Frame fr;
  ASSERT_TRUE(src->next(fr));
  EXPECT_TRUE(fr.error.empty());
  EXPECT_EQ(fr.image.pixels, a.pixels);
  ASSERT_TRUE(src->next(fr));
  EXPECT_NE(fr.error.find("truncated"), std::string::npos) << fr.error;
  EXPECT_FALSE(src->next(fr));
  // a directory without frames is an error before any model loads
  const std::string empty = testing::TempDir() + "/no_frames";
  std::filesystem::create_directories(empty);
  EXPECT_THROW(FrameSource::open(empty, ImageLimits{}), Error);
}

// Token gating: the second change at a tile position re-encodes only the changed patches; the
// result is close to, but not bitwise, a full recompute; the exact tile cache never holds it.
TEST(Watch, TokenGatingReencodesOnlyChangedPatches) {
  const Models& m = models();
  const ImageRGB a = screen("desktop_1920x1080.png");
  WatchOptions wo;
  wo.n_predict = 2;
  wo.approx_gate = true;
  Session s1(*m.text, session_options()), s2(*m.text, session_options());
  Watcher gate(*m.text, *m.vision, s1, wo);
  WatchOptions fo;
  fo.n_predict = 2;
  fo.reuse = false;
  Watcher full(*m.text, *m.vision, s2, fo);
  const std::vector<ImageRGB> frames = {a, paint(a, 1500, 900, 30, 14, 200), paint(a, 1500, 900, 50, 14, 120),
                                        paint(a, 1500, 900, 70, 14, 60)};
  FrameResult last;
  size_t entries_before_gating = 0;
  for (size_t i = 0; i < frames.size(); ++i) {
    last = gate.process(frames[i]);
    if (i == 1) entries_before_gating = gate.cache().entries();
    const Divergence d = Watcher::compare(last, full.process(frames[i]));
    if (i < 2) {
      EXPECT_EQ(last.tiles_gated, 0) << i;  // first sight, then the first change records the state
      EXPECT_TRUE(d.bitwise_equal) << i;
    } else {
      EXPECT_GT(last.tiles_gated, 0) << i;
      EXPECT_LT(last.encoder_work, 0.05) << i;  // a few patches of 13 tiles
      EXPECT_LT(d.emb_max_rel, 0.2) << i;
      EXPECT_LT(d.next_token_kl, 0.01) << i;
    }
  }
  // gated outputs never enter the exact content cache (every change after frame 1 was gated)
  EXPECT_EQ(last.tiles_encoded, last.tiles_gated);
  EXPECT_EQ(gate.cache().entries(), entries_before_gating);
}
