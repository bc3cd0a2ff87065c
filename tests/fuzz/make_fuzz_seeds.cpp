// Writes a seed corpus for the fuzzers: small valid GGUF files (one with a tokenizer),
// a prefix of the real model's header, and a few texts.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "formats/gguf_writer.h"

using namespace tessera;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_fuzz_seeds DIR\n");
    return 2;
  }
  const std::string dir = std::string(argv[1]) + "/seeds";
  std::system(("mkdir -p '" + dir + "'").c_str());
  GgufWriter a;
  a.set("general.architecture", GgufValue::make_string("llama"));
  a.set("n", GgufValue::make_u32(3));
  a.set("f", GgufValue::make_f32_array({1.0f, 2.0f}));
  a.add_tensor("w", DType::Q4_1, {64, 2}, std::vector<uint8_t>(80, 7));
  a.add_tensor("b", DType::F16, {5}, std::vector<uint8_t>(10, 1));
  a.write(dir + "/small.gguf");
  GgufWriter h;  // the types the loader holds in others (kernels/exact_repack.h), and one it refuses
  h.set("general.architecture", GgufValue::make_string("llama"));
  h.add_tensor("q3", DType::Q3_K, {256, 1}, std::vector<uint8_t>(110, 0x35));
  h.add_tensor("nl", DType::IQ4_NL, {32, 2}, std::vector<uint8_t>(36, 0x3c));
  h.add_tensor("q2", DType::Q2_K, {256}, std::vector<uint8_t>(84, 3));
  h.write(dir + "/held_types.gguf");
  GgufWriter t;
  t.set("tokenizer.ggml.model", GgufValue::make_string("gpt2"));
  t.set("tokenizer.ggml.pre", GgufValue::make_string("smollm"));
  t.set("tokenizer.ggml.tokens", GgufValue::make_strings({"<|im_start|>", "a", "b", "ab", "\xC4\xA0", "\xC4\xA0" "a"}));
  t.set("tokenizer.ggml.token_type", GgufValue::make_i32_array({3, 1, 1, 1, 1, 1}));
  t.set("tokenizer.ggml.merges", GgufValue::make_strings({"a b", "\xC4\xA0 a"}));
  t.set("tokenizer.ggml.bos_token_id", GgufValue::make_u32(0));
  t.write(dir + "/tokenizer.gguf");
  std::ifstream model(TESSERA_DEFAULT_MODEL, std::ios::binary);
  std::vector<char> head(4096);
  model.read(head.data(), static_cast<std::streamsize>(head.size()));
  std::ofstream(dir + "/model_head.gguf", std::ios::binary).write(head.data(), model.gcount());
  const std::string st = R"({"w":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}})";
  {
    std::ofstream o(dir + "/tensors.safetensors", std::ios::binary);
    const uint64_t n = st.size();
    o.write(reinterpret_cast<const char*>(&n), 8);
    o << st << std::string(8, '\0');
  }
  for (const char* img : {"xterm_700x450.png", "xterm_1280x720.jpg"}) {
    std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/tests/fixtures/vision/screens/" + img, std::ios::binary);
    std::ofstream(dir + "/" + img, std::ios::binary) << in.rdbuf();
  }
  // Hugging Face JSON for fuzz_json: real configs and a tokenizer, and the nesting that once
  // overflowed the stack (30,000 deep fits the 64 KiB input limit; the bound is 64 levels)
  for (const char* rel : {"tests/fixtures/mlx/tiny-g32/config.json", "tests/fixtures/mlx/tiny-g32/tokenizer.json",
                          "tests/fixtures/vision/tiny/hf/config.json", "tests/fixtures/vision/tiny/hf/processor_config.json"}) {
    std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/" + rel, std::ios::binary);
    std::string name = rel;
    for (char& c : name) c = c == '/' ? '_' : c;
    std::ofstream(dir + "/" + name, std::ios::binary) << in.rdbuf();
  }
  std::ofstream(dir + "/nested_pre_tokenizer.json")
      << R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": )" << std::string(30000, '[')
      << R"("ByteLevel")" << std::string(30000, ']') << "}";
  std::ofstream(dir + "/text1.txt") << "<|im_start|>user\nHello, world! 12345 don't\t\n  x<|im_end|>";
  std::ofstream(dir + "/text2.txt") << "int main() {\n    return 0; // ünïcödé 日本語 🙂\n}\n";
  return 0;
}
