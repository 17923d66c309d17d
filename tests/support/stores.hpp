// Store factories for parameterized tests: every store must pass the same suites.
#pragma once

#include "deviceshadow/memory_store.hpp"
#include "deviceshadow/sqlite_store.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <memory>
#include <random>
#include <string>

namespace ds = deviceshadow;

// A fresh directory under the system temp dir, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() / ("deviceshadow-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

struct StoreKind {
  std::string name;
  // Opens a store; `dir` is where durable stores keep their files.
  std::function<std::unique_ptr<ds::Store>(const std::filesystem::path& dir)> open;
};

inline std::vector<StoreKind> all_store_kinds() {
  return {
      {"memory", [](const std::filesystem::path&) { return ds::make_memory_store(); }},
      {"sqlite",
       [](const std::filesystem::path& dir) {
         ds::SqliteOptions o;
         o.path = (dir / "shadows.db").string();
         return ds::open_sqlite_store(o);
       }},
  };
}

inline void PrintTo(const StoreKind& kind, std::ostream* os) { *os << kind.name; }

inline std::string store_kind_name(const ::testing::TestParamInfo<StoreKind>& info) { return info.param.name; }

// A test fixture owning one store of the parameter's kind.
class StoreTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override { store_ = GetParam().open(dir_.path()); }
  void reopen() {
    store_.reset();
    store_ = GetParam().open(dir_.path());
  }
  ds::Store& store() { return *store_; }

  TempDir dir_;
  std::unique_ptr<ds::Store> store_;
};
