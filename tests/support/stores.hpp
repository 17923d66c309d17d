// Store factories for parameterized tests: every store must pass the same suites.
#pragma once

#include "deviceshadow/dynamodb_store.hpp"
#include "deviceshadow/error.hpp"
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
  bool shared_version = false;  // the combined DynamoDB layout: one version for both sections
  bool needs_dynamodb = false;  // runs against the DynamoDB Local the test scripts start
  // Releases what open() created outside `dir` (a DynamoDB table); may be empty.
  std::function<void(const std::filesystem::path& dir)> destroy;
  // Opens a store; `dir` is where durable stores keep their files.
  std::function<std::unique_ptr<ds::StoreBackend>(const std::filesystem::path& dir)> open;
};

// The DynamoDB Local endpoint the test scripts started (scripts/with-services.sh), or "".
inline std::string dynamodb_endpoint() {
  const char* e = std::getenv("DS_DYNAMODB_ENDPOINT");
  return e ? e : "";
}

inline ds::DynamoDbOptions dynamodb_test_options(const std::filesystem::path& dir, ds::DynamoDbLayout layout) {
  ds::DynamoDbOptions o;
  o.endpoint = dynamodb_endpoint();
  o.region = "us-east-1";
  o.layout = layout;
  o.table = "t" + std::to_string(std::hash<std::string>{}(dir.string()));
  return o;
}

// A DynamoDB store on a table of its own, named after `dir`, created on first use. Tests drop
// the table when done: DynamoDB Local slows down badly as stream-enabled tables pile up.
inline std::unique_ptr<ds::StoreBackend> open_dynamodb_for_test(const std::filesystem::path& dir, ds::DynamoDbLayout layout) {
  ds::DynamoDbOptions o = dynamodb_test_options(dir, layout);
  try {
    ds::create_dynamodb_table(o, /*with_stream=*/false);
  } catch (const ds::Error& e) {
    if (std::string(e.what()).find("ResourceInUse") == std::string::npos) throw;
  }
  return ds::open_dynamodb_store(o);
}

inline std::vector<StoreKind> all_store_kinds() {
  std::vector<StoreKind> kinds = {
      {"memory", false, false, {}, [](const std::filesystem::path&) { return ds::make_memory_store(); }},
      {"sqlite", false, false, {},
       [](const std::filesystem::path& dir) {
         ds::SqliteOptions o;
         o.path = (dir / "shadows.db").string();
         return ds::open_sqlite_store(o);
       }},
  };
  // Always registered (test discovery runs at build time, before the services start); skipped
  // at run time without an endpoint.
  for (auto [name, layout] : {std::pair{"dynamodb", ds::DynamoDbLayout::separate},
                              std::pair{"dynamodb_combined", ds::DynamoDbLayout::combined}}) {
    kinds.push_back({name, layout == ds::DynamoDbLayout::combined, true,
                     [layout](const std::filesystem::path& dir) { ds::delete_dynamodb_table(dynamodb_test_options(dir, layout)); },
                     [layout](const std::filesystem::path& dir) { return open_dynamodb_for_test(dir, layout); }});
  }
  return kinds;
}

inline void PrintTo(const StoreKind& kind, std::ostream* os) { *os << kind.name; }

// The stores whose sections keep versions of their own (all but DynamoDB's combined layout).
inline std::vector<StoreKind> store_kinds_with_section_versions() {
  std::vector<StoreKind> kinds = all_store_kinds();
  std::erase_if(kinds, [](const StoreKind& k) { return k.shared_version; });
  return kinds;
}

inline std::string store_kind_name(const ::testing::TestParamInfo<StoreKind>& info) { return info.param.name; }

// A test fixture owning one store of the parameter's kind.
class StoreTest : public ::testing::TestWithParam<StoreKind> {
 protected:
  void SetUp() override {
    if (GetParam().needs_dynamodb && dynamodb_endpoint().empty()) {
      if (std::getenv("DS_REQUIRE_DYNAMODB")) FAIL() << "DS_REQUIRE_DYNAMODB is set but DS_DYNAMODB_ENDPOINT is not";
      GTEST_SKIP() << "no DynamoDB endpoint (run through scripts/test.sh)";
    }
    store_ = GetParam().open(dir_.path());
  }
  void TearDown() override {
    if (!store_) return;
    store_.reset();
    if (GetParam().destroy) GetParam().destroy(dir_.path());
  }
  void reopen() {
    store_.reset();
    store_ = GetParam().open(dir_.path());
  }
  ds::StoreBackend& store() { return *store_; }

  TempDir dir_;
  std::unique_ptr<ds::StoreBackend> store_;
};
