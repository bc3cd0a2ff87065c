#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "formats/safetensors.h"

using namespace tessera;

namespace {

std::vector<uint8_t> file(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> b(8);
  const uint64_t n = header.size();
  std::memcpy(b.data(), &n, 8);
  b.insert(b.end(), header.begin(), header.end());
  b.resize(b.size() + data_bytes, 0x3c);
  return b;
}

std::string error_of(const std::vector<uint8_t>& b) {
  try {
    SafetensorsFile::parse(b.data(), b.size());
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Safetensors, ParsesAValidFile) {
  const auto b = file(R"({"__metadata__":{"format":"pt"},"w":{"dtype":"F16","shape":[2,3],"data_offsets":[0,12]},)"
                      R"("b":{"dtype":"F32","shape":[3],"data_offsets":[12,24]},"s":{"dtype":"I64","shape":[],"data_offsets":[24,32]}})",
                      32);
  auto f = SafetensorsFile::parse(b.data(), b.size());
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->find("w")->type, DType::F16);
  EXPECT_EQ(f->find("w")->shape, (std::vector<uint64_t>{2, 3}));
  EXPECT_EQ(f->find("b")->n_bytes, 12u);
  EXPECT_FALSE(f->find("s")->known_dtype);
  EXPECT_EQ(f->metadata().at("format"), "pt");
}

TEST(Safetensors, HostileFilesAreRejected) {
  EXPECT_NE(error_of({1, 2, 3}).find("truncated"), std::string::npos);
  auto b = file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8);
  uint64_t huge = ~uint64_t{0} - 3;
  std::memcpy(b.data(), &huge, 8);
  EXPECT_NE(error_of(b).find("header length"), std::string::npos);
  EXPECT_NE(error_of(file("{not json", 0)).find("JSON"), std::string::npos);
  EXPECT_NE(error_of(file("[1,2]", 0)).find("object"), std::string::npos);
  EXPECT_NE(error_of(file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,16]}})", 8)).find("outside"), std::string::npos);
  EXPECT_NE(error_of(file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8)).find("need"), std::string::npos);
  EXPECT_NE(error_of(file(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,8]}})", 8)).find("negative"), std::string::npos);
  EXPECT_NE(error_of(file(R"({"w":{"dtype":"Q9","shape":[2],"data_offsets":[0,8]}})", 8)).find("unknown dtype"), std::string::npos);
  EXPECT_NE(error_of(file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", 8)).find("outside"), std::string::npos);
  EXPECT_NE(error_of(file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 12))
                .find("overlap"), std::string::npos);
  EXPECT_NE(error_of(file(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}})", 8)).find("overflow"),
            std::string::npos);
  EXPECT_NE(error_of(file(R"({"w":{"dtype":"F32","shape":[2]}})", 8)).find("lacks"), std::string::npos);
  EXPECT_NE(error_of(file(R"({"__metadata__":{"x":1}})", 0)).find("not a string"), std::string::npos);
}
