// The input rules of docs/design.md ("Input rules"): JSON depth and integer ranges, regular
// files only, output files that never replace devices, FIFOs or symlinks, images whose declared
// size must fit their bytes, a model truncated while mapped, oversubscribed thread pools.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/output_file.h"
#include "core/thread_pool.h"
#include "image/image.h"
#include "formats/json_input.h"
#include "text/tokenizer.h"
#include "models/hf_loader.h"
#include "test_util.h"

using namespace tessera;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

nlohmann::json parse(const std::string& s) { return parse_json(reinterpret_cast<const uint8_t*>(s.data()), s.size(), "test"); }

struct TempDir {
  std::string path;
  TempDir() {
    char t[] = "/tmp/tessera_input_XXXXXX";
    path = ::mkdtemp(t);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return path + "/" + name; }
};

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

}  // namespace

TEST(InputRules, JsonDepthIsBoundedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + "\"ByteLevel\"" + std::string(100000, ']');
  EXPECT_NE(error_of([&] { parse(deep); }).find("nested deeper than 64"), std::string::npos);
  const std::string ok64 = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_EQ(parse(ok64).size(), 1u);
  EXPECT_NE(error_of([&] { parse("[" + ok64 + "]"); }), "");
  // brackets inside strings, escaped quotes among them, are not nesting
  const std::string in_string = "{\"a\": \"" + std::string(1000, '[') + "\\\"" + std::string(1000, '{') + "\"}";
  EXPECT_EQ(json_depth(reinterpret_cast<const uint8_t*>(in_string.data()), in_string.size(), 100), 1);
  EXPECT_EQ(parse(in_string)["a"].get<std::string>().size(), 2001u);
  EXPECT_NE(error_of([&] { parse("{\"a\": "); }).find("not valid JSON"), std::string::npos);
}

TEST(InputRules, JsonIntegersAreRangeCheckedBeforeNarrowing) {
  const auto j = parse(R"({"wrap": 4294967328, "ctx": 4294967301, "half": 2.5, "two": 2.0, "huge": 1e300,
                          "neg": -1, "u64": 18446744073709551615, "text": "7", "ok": 576})");
  EXPECT_EQ(json_int(j, "ok", 1, 65536, "c"), 576);
  EXPECT_EQ(json_int(j, "two", 1, 4, "c"), 2);
  EXPECT_NE(error_of([&] { json_int(j, "wrap", 1, 65536, "c"); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { json_int(j, "ctx", 1, 1 << 24, "c"); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { json_int(j, "half", 1, 4, "c"); }).find("whole number"), std::string::npos);
  EXPECT_NE(error_of([&] { json_int(j, "huge", 1, 4, "c"); }), "");
  EXPECT_NE(error_of([&] { json_int(j, "neg", 1, 4, "c"); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { json_int(j, "u64", 0, INT64_MAX, "c"); }).find("out of range"), std::string::npos);
  EXPECT_NE(error_of([&] { json_int(j, "text", 0, 9, "c"); }).find("must be a number"), std::string::npos);
  EXPECT_NE(error_of([&] { json_int(j, "absent", 0, 9, "c"); }).find("missing"), std::string::npos);
  EXPECT_EQ(json_int(j, "absent", 0, 9, 5, "c"), 5);
}

TEST(InputRules, HfConfigNumbersDoNotWrap) {
  const std::string cfg = test::read_file(test::source_path("tests/fixtures/mlx/tiny-g32/config.json"));
  const HfConfig good = parse_hf_config(cfg, "", "config.json", "");
  EXPECT_EQ(good.type, "llama");
  EXPECT_GT(good.text.n_embd, 0);
  auto with = [&](const char* key, const std::string& value) {
    nlohmann::json j = nlohmann::json::parse(cfg);
    j[key] = nlohmann::json::parse(value);
    return error_of([&] { parse_hf_config(j.dump(), "", "config.json", ""); });
  };
  EXPECT_NE(with("hidden_size", "4294967328").find("'hidden_size' is out of range"), std::string::npos);
  EXPECT_NE(with("max_position_embeddings", "4294967301").find("'max_position_embeddings' is out of range"), std::string::npos);
  EXPECT_NE(with("num_attention_heads", "-4294967295").find("out of range"), std::string::npos);
  EXPECT_NE(with("num_hidden_layers", "1.5").find("whole number"), std::string::npos);
  EXPECT_NE(with("vocab_size", "\"49152\"").find("must be a number"), std::string::npos);
  // a tokenizer.json with ids past the vocabulary limit, or nested too deep, is refused
  const std::string big_id = R"({"model": {"type": "BPE", "vocab": {"a": 4294967296}, "merges": []}, "pre_tokenizer": {"type": "ByteLevel"}})";
  EXPECT_NE(error_of([&] { Tokenizer::spec_from_hf_json(reinterpret_cast<const uint8_t*>(big_id.data()), big_id.size(), "t"); })
                .find("token id is out of range"),
            std::string::npos);
}

TEST(InputRules, OnlyRegularFilesAreRead) {
  TempDir d;
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0600), 0);
  // a FIFO with no writer: refused at once (a blocking open would hang this test)
  EXPECT_NE(error_of([&] { MappedFile f(d / "fifo"); }).find("is a pipe or FIFO, not a regular file"), std::string::npos);
  EXPECT_NE(error_of([&] { MappedFile f("/dev/zero"); }).find("is a character device"), std::string::npos);
  EXPECT_NE(error_of([&] { MappedFile f(d.path); }).find("is a directory"), std::string::npos);
  EXPECT_NE(error_of([&] { load_image(d / "fifo"); }).find("pipe or FIFO"), std::string::npos);
  write_text(d / "list", std::string(100, 'x'));
  EXPECT_EQ(read_small_file(d / "list", 100, "list").size(), 100u);
  EXPECT_NE(error_of([&] { read_small_file(d / "list", 99, "list"); }).find("over the limit"), std::string::npos);
}

TEST(InputRulesDeathTest, ModelTruncatedWhileMappedIsOneLineNotSigbus) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TempDir d;
  const std::string path = d / "model.bin";
  write_text(path, std::string(3 * 4096, 'm'));
  EXPECT_EXIT(
      {
        report_sigbus_in_mapped_files();
        MappedFile f(path);
        if (::truncate(path.c_str(), 100) != 0) std::abort();
        fs::remove_all(d.path);  // the child exits from the handler, past d's destructor; the map stays
        volatile uint8_t x = f.data()[2 * 4096];  // that page is past the new end: SIGBUS
        (void)x;
        std::abort();  // not reached
      },
      testing::ExitedWithCode(1), "tessera: error: '.*model.bin' was truncated or rewritten while in use");
}

TEST(InputRules, OutputsReplaceRegularFilesOnlyAndFollowLinks) {
  TempDir d;
  // a regular file: replaced whole, its permissions kept, no temporary left behind
  write_text(d / "out.txt", "old contents");
  ::chmod((d / "out.txt").c_str(), 0640);
  write_output_file(d / "out.txt", "new", 3);
  EXPECT_EQ(test::read_file(d / "out.txt"), "new");
  struct stat st {};
  ::stat((d / "out.txt").c_str(), &st);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  // a symlink: followed, the link itself kept; a dangling one creates its target
  ASSERT_EQ(::symlink("out.txt", (d / "link").c_str()), 0);
  write_output_file(d / "link", "via link", 8);
  EXPECT_TRUE(fs::is_symlink(d / "link"));
  EXPECT_EQ(test::read_file(d / "out.txt"), "via link");
  ASSERT_EQ(::symlink("created.txt", (d / "dangling").c_str()), 0);
  write_output_file(d / "dangling", "x", 1);
  EXPECT_EQ(test::read_file(d / "created.txt"), "x");
  // a FIFO: written into (a reader gets the bytes), still a FIFO; with no reader, an error
  ASSERT_EQ(::mkfifo((d / "fifo").c_str(), 0600), 0);
  std::string got;
  std::thread reader([&] { got = test::read_file(d / "fifo"); });
  while (true) {  // wait until the reader has the FIFO open, so the writer's open succeeds
    try {
      write_output_file(d / "fifo", "through", 7);
      break;
    } catch (const Error&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
  reader.join();
  EXPECT_EQ(got, "through");
  EXPECT_TRUE(fs::is_fifo(d / "fifo"));
  EXPECT_NE(error_of([&] { write_output_file(d / "fifo", "x", 1); }).find("FIFO with no reader"), std::string::npos);
  // a directory or a missing directory: refused, checked before any work
  EXPECT_NE(error_of([&] { check_output_path(d.path); }).find("a directory"), std::string::npos);
  EXPECT_NE(error_of([&] { check_output_path(d / "no/such/out.txt"); }).find("no directory"), std::string::npos);
  for (const auto& e : fs::directory_iterator(d.path)) EXPECT_EQ(e.path().filename().string().rfind(".tessera-out-", 0), std::string::npos);
}

TEST(InputRules, OutputsIntoDevicesAreWrittenNotReplaced) {
  TempDir d;
  // device nodes of our own (root only), so a regression cannot replace the system's /dev/null
  if (::mknod((d / "null").c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0 ||
      ::mknod((d / "full").c_str(), S_IFCHR | 0666, makedev(1, 7)) != 0)
    GTEST_SKIP() << "mknod needs root";
  write_output_file(d / "null", "gone", 4);
  EXPECT_TRUE(fs::is_character_file(d / "null"));
  EXPECT_NE(error_of([&] { write_output_file(d / "full", "x", 1); }).find("No space left on device"), std::string::npos);
  EXPECT_TRUE(fs::is_character_file(d / "full"));
}

TEST(InputRules, TruncatedAndOversizedImagesAreRefused) {
  const std::string jpg = test::read_file(test::source_path("tests/fixtures/vision/screens/xterm_1280x720.jpg"));
  const std::string prog = test::read_file(test::source_path("tests/fixtures/images/xterm_700x450_progressive.jpg"));
  auto decode = [](const std::string& b, const char* name) {
    return error_of([&] { decode_image(reinterpret_cast<const uint8_t*>(b.data()), b.size(), name); });
  };
  EXPECT_EQ(decode(jpg, "whole"), "");
  EXPECT_EQ(decode(prog, "whole progressive"), "");
  for (size_t cut : {jpg.size() / 2, jpg.size() - 2})  // half, and only the end-of-image marker missing
    EXPECT_NE(decode(jpg.substr(0, cut), "cut").find("Premature end of JPEG file"), std::string::npos) << cut;
  EXPECT_NE(decode(prog.substr(0, prog.size() / 2), "cut").find("Premature end of JPEG file"), std::string::npos);
  // a header declaring 8192x8192 in 761 bytes: refused before any pixel is allocated
  std::string bomb = jpg.substr(0, 761);
  const size_t sof = bomb.find("\xff\xc0");
  ASSERT_NE(sof, std::string::npos);
  bomb[sof + 5] = bomb[sof + 7] = 0x20;
  bomb[sof + 6] = bomb[sof + 8] = 0x00;
  EXPECT_NE(decode(bomb, "bomb").find("cannot fit in 761 bytes"), std::string::npos);
  // a PNG whose header declares 8192x8192 (valid CRC) over 46 KB of data
  std::string png = test::read_file(test::source_path("tests/fixtures/vision/screens/xterm_700x450.png"));
  for (int i : {16, 20}) {
    png[static_cast<size_t>(i)] = 0;
    png[static_cast<size_t>(i) + 1] = 0;
    png[static_cast<size_t>(i) + 2] = 0x20;
    png[static_cast<size_t>(i) + 3] = 0;
  }
  uint32_t crc = 0xffffffffu;  // CRC-32 of the IHDR chunk type and data
  for (size_t i = 12; i < 29; ++i) {
    crc ^= static_cast<uint8_t>(png[i]);
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  crc ^= 0xffffffffu;
  for (int k = 0; k < 4; ++k) png[29 + static_cast<size_t>(k)] = static_cast<char>(crc >> (24 - 8 * k));
  EXPECT_NE(decode(png, "bomb.png").find("PNG of 8192x8192 pixels cannot fit"), std::string::npos);
}

TEST(InputRules, OversubscribedPoolStillComputesEveryChunk) {
  // four times more threads than cores: waiters sleep or yield instead of spinning, and every
  // element is still written exactly once
  const int threads = 4 * static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  ThreadPool pool(threads);
  std::vector<std::atomic<int>> hits(4099);
  for (int round = 0; round < 200; ++round)
    pool.parallel_for(static_cast<int64_t>(hits.size()), 7, [&](int64_t a, int64_t b) {
      for (int64_t i = a; i < b; ++i) hits[static_cast<size_t>(i)].fetch_add(1);
    });
  for (const auto& h : hits) EXPECT_EQ(h.load(), 200);
}
