#include "weights/mapped_file.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace llmserve {
namespace {

TEST(MappedFile, MapsContents) {
  testing::TempDir dir;
  const std::string path = dir.file("f.bin");
  testing::write_file(path, "hello", 5);
  auto f = MappedFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().message();
  EXPECT_EQ(f->size(), 5u);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(f->data()), 5), "hello");
  EXPECT_EQ(f->path(), path);

  const uint8_t* data = f->data();
  MappedFile moved(std::move(*f));
  EXPECT_EQ(moved.data(), data);
  EXPECT_EQ(f->data(), nullptr);
  MappedFile assigned;
  assigned = std::move(moved);
  EXPECT_EQ(assigned.data(), data);
  EXPECT_EQ(assigned.size(), 5u);
  EXPECT_EQ(assigned.path(), path);
}

TEST(MappedFile, Errors) {
  testing::TempDir dir;
  const std::string missing = dir.file("missing");
  auto m = MappedFile::open(missing);
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(testing::IsErrorNaming(m, missing));

  const std::string empty = dir.file("empty");
  testing::write_file(empty, "", 0);
  auto e = MappedFile::open(empty);
  EXPECT_EQ(e.status().code(), StatusCode::kDataLoss);
  EXPECT_TRUE(testing::IsErrorNaming(e, empty));

  EXPECT_TRUE(testing::IsErrorNaming(MappedFile::open(dir.path()), dir.path()));
}

}  // namespace
}  // namespace llmserve
