// An in-memory Store: the semantics of every store, no durability. For tests and demos.
#pragma once

#include "deviceshadow/store.hpp"

#include <memory>

namespace deviceshadow {

std::unique_ptr<Store> make_memory_store();

}  // namespace deviceshadow
