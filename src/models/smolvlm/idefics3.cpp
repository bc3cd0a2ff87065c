#include "models/smolvlm/idefics3.h"

#include <cctype>

#include "profile/profiler.h"

#include <chrono>

#include "core/error.h"

namespace tessera {

namespace {
double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
const char* kImage = "<image>";
}  // namespace

Idefics3::Idefics3(const LlamaModel& text, const Idefics3Vision& vision) : text_(text), vision_(vision) {
  if (vision.config().text_hidden != text.config().n_embd)
    fail("the vision projector outputs %d-wide embeddings but the text model is %d wide: they do not belong together",
         vision.config().text_hidden, text.config().n_embd);
  for (const char* t : {"<fake_token_around_image>", "<global-img>", "<row_1_col_1>", "<end_of_utterance>"})
    if (text.tokenizer().find(t) < 0)
      fail("the text model's vocabulary lacks SmolVLM's special token %s: use the text GGUF that belongs to this mmproj", t);
}

std::string Idefics3::prompt_text(int rows, int cols, const std::string& question, const std::string& history) const {
  return "<|im_start|>" + history + "User:" + image_block_text(rows, cols, vision_.config().tokens_per_tile()) + question +
         "<end_of_utterance>\nAssistant:";
}

std::string Idefics3::history_text(const std::vector<std::pair<std::string, std::string>>& turns) {
  std::string s;
  for (const auto& [role, text] : turns) {
    std::string r = role;
    if (!r.empty()) r[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(r[0])));
    s += r + ": " + text + "<end_of_utterance>\n";
  }
  return s;
}

std::string Idefics3::image_block_text(int rows, int cols, int n) {
  std::string image;
  for (int i = 0; i < n; ++i) image += kImage;
  std::string s;
  if (rows == 0 && cols == 0)
    return "<fake_token_around_image><global-img>" + image + "<fake_token_around_image>";
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c)
      s += "<fake_token_around_image><row_" + std::to_string(r + 1) + "_col_" + std::to_string(c + 1) + ">" + image;
    s += "\n";
  }
  s += "\n<fake_token_around_image><global-img>" + image + "<fake_token_around_image>";
  return s;
}

std::vector<int32_t> Idefics3::tokenize_with_slots(const std::string& text) const {
  std::vector<int32_t> out;
  size_t pos = 0;
  const size_t len = std::char_traits<char>::length(kImage);
  while (pos <= text.size()) {
    const size_t hit = text.find(kImage, pos);
    const std::string piece = text.substr(pos, hit == std::string::npos ? std::string::npos : hit - pos);
    if (!piece.empty()) {
      const auto ids = text_.tokenizer().encode(piece, true);
      out.insert(out.end(), ids.begin(), ids.end());
    }
    if (hit == std::string::npos) break;
    out.push_back(kEmbeddingSlot);
    pos = hit + len;
  }
  return out;
}

std::vector<float> Idefics3::encode(const PreprocessedImage& pre, ThreadPool& pool, VisionTimings* tm) const {
  const SiglipConfig& c = vision_.config();
  const size_t per_tile = static_cast<size_t>(c.tokens_per_tile()) * c.text_hidden;
  std::vector<float> out(pre.tiles.size() * per_tile);
  std::vector<float> chw(static_cast<size_t>(3) * c.image_size * c.image_size);
  std::vector<float> enc(static_cast<size_t>(c.n_patches()) * c.hidden);
  for (size_t t = 0; t < pre.tiles.size(); ++t) {
    if (pre.tiles[t].width != c.image_size || pre.tiles[t].height != c.image_size)
      fail("tile %zu is %dx%d, the encoder takes %dx%d", t, pre.tiles[t].width, pre.tiles[t].height, c.image_size, c.image_size);
    double t0 = now();
    {
      prof::PhaseScope phase(prof::Phase::VisionEncode);
      tile_to_chw(pre.tiles[t], vision_.preprocess_config(), chw.data());
      vision_.encode_tile(chw.data(), enc.data(), pool);
    }
    double t1 = now();
    {
      prof::PhaseScope phase(prof::Phase::Connector);
      vision_.connector(enc.data(), out.data() + t * per_tile, pool);
    }
    if (tm) {
      tm->tile_encode_s.push_back(t1 - t0);
      tm->connector_s += now() - t1;
    }
  }
  return out;
}

ImagePrompt Idefics3::build(const ImageRGB& image, const std::string& question, ThreadPool& pool, VisionTimings* tm,
                            const std::string& history) const {
  double t0 = now();
  PreprocessedImage pre;
  {
    prof::PhaseScope phase(prof::Phase::Preprocess);
    prof::OpScope op("resize+split", "", 0, 3.0 * image.width * image.height * 2);
    pre = preprocess_idefics3(image, vision_.preprocess_config(), &pool);
  }
  if (tm) tm->preprocess_s = now() - t0;
  ImagePrompt p;
  p.rows = pre.rows;
  p.cols = pre.cols;
  p.tiles = static_cast<int>(pre.tiles.size());
  p.embeddings = encode(pre, pool, tm);
  p.tokens = tokenize_with_slots(prompt_text(pre.rows, pre.cols, question, history));
  return p;
}

}  // namespace tessera
