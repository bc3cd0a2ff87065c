#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "formats/gguf.h"
#include "formats/gguf_writer.h"
#include "test_util.h"

using namespace tessera;

namespace {

std::vector<uint8_t> small_file() {
  GgufWriter w;
  w.set("general.architecture", GgufValue::make_string("llama"));
  w.set("some.u32", GgufValue::make_u32(7));
  w.set("some.f32", GgufValue::make_f32(0.5f));
  w.set("some.bool", GgufValue::make_bool(true));
  w.set("some.strings", GgufValue::make_strings({"a", "bc", ""}));
  w.set("some.ints", GgufValue::make_i32_array({1, -2, 3}));
  std::vector<uint8_t> f32(4 * 8);
  for (int i = 0; i < 8; ++i) {
    const float v = static_cast<float>(i) - 2.5f;
    std::memcpy(f32.data() + 4 * i, &v, 4);
  }
  w.add_tensor("first_tensor", DType::F32, {4, 2}, f32);
  w.add_tensor("b", DType::Q8_0, {32}, std::vector<uint8_t>(34, 1));
  w.add_tensor("c", DType::Q4_1, {64}, std::vector<uint8_t>(40, 2));
  return w.to_bytes();
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    GgufFile::parse(bytes.data(), bytes.size());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

template <typename T>
void poke(std::vector<uint8_t>& b, size_t at, T v) {
  std::memcpy(b.data() + at, &v, sizeof(T));
}

// Offset of the first occurrence of a string's bytes.
size_t find_bytes(const std::vector<uint8_t>& b, const std::string& s) {
  auto it = std::search(b.begin(), b.end(), s.begin(), s.end());
  return static_cast<size_t>(it - b.begin());
}

}  // namespace

TEST(Gguf, WriterRoundTrip) {
  const auto bytes = small_file();
  auto f = GgufFile::parse(bytes.data(), bytes.size());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("some.u32", 0, 10), 7);
  EXPECT_EQ(f->get_float("some.f32", 0, 1), 0.5);
  EXPECT_TRUE(f->get_bool("some.bool", false));
  EXPECT_EQ(f->get("some.strings").strs, (std::vector<std::string>{"a", "bc", ""}));
  EXPECT_EQ(f->get("some.ints").int_at(1), -2);
  ASSERT_EQ(f->tensors().size(), 3u);
  const GgufTensor* a = f->find_tensor("first_tensor");
  ASSERT_TRUE(a);
  EXPECT_EQ(a->dims, (std::vector<uint64_t>{4, 2}));
  float v;
  std::memcpy(&v, a->data + 4 * 5, 4);
  EXPECT_EQ(v, 2.5f);
  EXPECT_EQ(f->find_tensor("c")->n_bytes, 40u);
  EXPECT_EQ(static_cast<size_t>(f->find_tensor("c")->data - bytes.data()) % 32, 0u);
}

TEST(Gguf, RangeChecksOnMetadata) {
  const auto bytes = small_file();
  auto f = GgufFile::parse(bytes.data(), bytes.size());
  EXPECT_THROW(f->get_int("some.u32", 8, 10), Error);
  EXPECT_THROW(f->get_int("missing", 0, 1), Error);
  EXPECT_THROW(f->get_string("some.u32"), Error);
  EXPECT_EQ(f->get_int("missing", 0, 1, 1), 1);
  EXPECT_THROW(f->get("some.ints").int_at(3), Error);
}

TEST(Gguf, EveryTruncationIsAnErrorNotACrash) {
  const auto bytes = small_file();
  auto f = GgufFile::parse(bytes.data(), bytes.size());
  const GgufTensor& last = f->tensors().back();
  const size_t end = static_cast<size_t>(last.data - bytes.data()) + last.n_bytes;  // trailing padding may go
  for (size_t n = 0; n < end; ++n) {
    std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(n));
    // parse() keeps pointers into the span: give it a heap copy so ASan sees the true end
    EXPECT_NE(parse_error(cut), "") << "prefix of " << n << " bytes parsed";
  }
}

TEST(Gguf, HostileHeaders) {
  const auto good = small_file();
  auto b = good;
  b[0] = 'X';
  EXPECT_NE(parse_error(b).find("bad magic"), std::string::npos);
  b = good;
  poke<uint32_t>(b, 4, 1);
  EXPECT_NE(parse_error(b).find("version"), std::string::npos);
  b = good;
  poke<uint64_t>(b, 8, uint64_t{1} << 62);  // tensor count
  EXPECT_NE(parse_error(b).find("tensor count"), std::string::npos);
  b = good;
  poke<uint64_t>(b, 16, ~uint64_t{0});  // metadata count
  EXPECT_NE(parse_error(b).find("metadata count"), std::string::npos);
}

TEST(Gguf, HostileValues) {
  const auto good = small_file();
  // string length larger than the file
  auto b = good;
  size_t at = find_bytes(b, "general.architecture");
  poke<uint64_t>(b, at + 20 + 4, uint64_t{1} << 40);
  EXPECT_NE(parse_error(b), "");
  // array count that would overflow count * element size
  b = good;
  at = find_bytes(b, "some.ints") + 9 + 4 + 4;
  poke<uint64_t>(b, at, uint64_t{1} << 62);
  EXPECT_NE(parse_error(b).find("cannot fit"), std::string::npos);
  // string array count beyond the file
  b = good;
  at = find_bytes(b, "some.strings") + 12 + 4 + 4;
  poke<uint64_t>(b, at, uint64_t{1} << 60);
  EXPECT_NE(parse_error(b).find("cannot fit"), std::string::npos);
  // unknown value type
  b = good;
  at = find_bytes(b, "some.u32") + 8;
  poke<uint32_t>(b, at, 99);
  EXPECT_NE(parse_error(b).find("unknown type"), std::string::npos);
  // nested array
  b = good;
  at = find_bytes(b, "some.ints") + 9 + 4;
  poke<uint32_t>(b, at, 9);
  EXPECT_NE(parse_error(b).find("nested"), std::string::npos);
  // bool that is neither 0 nor 1
  b = good;
  at = find_bytes(b, "some.bool") + 9 + 4;
  b[at] = 7;
  EXPECT_NE(parse_error(b).find("bool"), std::string::npos);
}

TEST(Gguf, HostileTensorInfos) {
  const auto good = small_file();
  const size_t info = find_bytes(good, "first_tensor") + 12;  // just after the first tensor's name
  auto b = good;
  poke<uint32_t>(b, info, 5);  // dimension count
  EXPECT_NE(parse_error(b).find("dimensions"), std::string::npos);
  b = good;
  poke<uint64_t>(b, info + 4, uint64_t{1} << 35);  // dims whose product overflows the limit
  poke<uint64_t>(b, info + 12, uint64_t{1} << 35);
  EXPECT_NE(parse_error(b).find("overflows"), std::string::npos);
  b = good;
  poke<uint64_t>(b, info + 4, 0);
  EXPECT_NE(parse_error(b).find("dimension"), std::string::npos);
  b = good;
  poke<uint32_t>(b, info + 20, 77);  // type id
  EXPECT_NE(parse_error(b).find("unknown type id"), std::string::npos);
  b = good;
  poke<uint64_t>(b, info + 24, 1u << 20);  // offset beyond the data
  EXPECT_NE(parse_error(b).find("runs past the end"), std::string::npos);
  b = good;
  poke<uint64_t>(b, info + 24, 4);  // misaligned offset
  EXPECT_NE(parse_error(b).find("aligned"), std::string::npos);
  b = good;
  poke<uint64_t>(b, info + 24, ~uint64_t{0} - 31);  // offset + size wraps around
  EXPECT_NE(parse_error(b), "");
}

TEST(Gguf, DuplicateKeysAndTensorsAreRejected) {
  GgufWriter w;
  w.set("k", GgufValue::make_u32(1));
  auto bytes = w.to_bytes();
  // hand-append a second "k" entry by rewriting the count
  std::vector<uint8_t> entry(bytes.begin() + 24, bytes.begin() + 24 + 17);  // key "k", uint32 value
  bytes.resize(24 + 17);
  bytes.insert(bytes.end(), entry.begin(), entry.end());
  poke<uint64_t>(bytes, 16, 2);
  EXPECT_NE(parse_error(bytes).find("duplicate metadata key"), std::string::npos);

  GgufWriter t;
  t.add_tensor("x", DType::F32, {1}, std::vector<uint8_t>(4));
  t.add_tensor("x", DType::F32, {1}, std::vector<uint8_t>(4));
  const auto tb = t.to_bytes();
  EXPECT_NE(parse_error(tb).find("duplicate tensor"), std::string::npos);
}

TEST(Gguf, OverlappingTensorsAreRejected) {
  GgufWriter w;
  w.add_tensor("alpha_t", DType::F32, {16}, std::vector<uint8_t>(64, 1));
  w.add_tensor("beta_t", DType::F32, {16}, std::vector<uint8_t>(64, 2));
  const auto good = w.to_bytes();
  EXPECT_EQ(parse_error(good), "");
  auto b = good;
  const size_t beta_offset = find_bytes(b, "beta_t") + 6 + 4 + 8 + 4;  // name, dim count, one dim, type
  poke<uint64_t>(b, beta_offset, 32);  // beta starts inside alpha's 64 bytes
  EXPECT_NE(parse_error(b).find("tensors overlap"), std::string::npos);
  poke<uint64_t>(b, beta_offset, 0);  // the very same bytes
  EXPECT_NE(parse_error(b).find("tensors overlap"), std::string::npos);
}

TEST(Gguf, BadAlignmentIsRejected) {
  GgufWriter w;
  w.set("general.alignment", GgufValue::make_u32(24));
  const auto b = w.to_bytes();
  EXPECT_NE(parse_error(b).find("alignment"), std::string::npos);
}

TEST(Gguf, WriteIsAtomicAndReadable) {
  const std::string dir = std::filesystem::temp_directory_path() / "tessera_gguf_test";
  std::filesystem::create_directories(dir);
  GgufWriter w;
  w.set("x", GgufValue::make_u32(3));
  w.write(dir + "/x.gguf");
  EXPECT_FALSE(std::filesystem::exists(dir + "/x.gguf.tmp"));
  EXPECT_EQ(GgufFile::open(dir + "/x.gguf")->get_int("x", 0, 5), 3);
  EXPECT_THROW(w.write(dir + "/no/such/dir/x.gguf"), Error);
  EXPECT_THROW(GgufFile::open(dir + "/missing.gguf"), Error);
  EXPECT_THROW(GgufFile::open(dir), Error);  // a directory
  std::filesystem::remove_all(dir);
}

TEST(Gguf, DefaultModelParses) {
  auto f = GgufFile::open(test::model_path());
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->tensors().size(), 272u);
  EXPECT_EQ(f->find_tensor("token_embd.weight")->type, DType::Q8_0);
  EXPECT_EQ(f->find_tensor("blk.0.attn_q.weight")->type, DType::Q4_1);
  EXPECT_EQ(f->get("tokenizer.ggml.tokens").strs.size(), 49152u);
}

TEST(Gguf, DefaultModelRoundTripsThroughTheWriter) {
  // Re-encode the real file's metadata and tensors and compare byte for byte.
  auto f = GgufFile::open(test::model_path());
  GgufWriter w;
  for (const auto& [k, v] : f->metadata()) w.set(k, v);
  for (const auto& t : f->tensors())
    w.add_tensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  const auto bytes = w.to_bytes();
  const std::string orig = test::read_file(test::model_path());
  ASSERT_EQ(bytes.size(), orig.size());
  EXPECT_TRUE(std::memcmp(bytes.data(), orig.data(), orig.size()) == 0);
}
