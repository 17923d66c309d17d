// An in-memory store (Store and DeliveryStore): the semantics of every store, no durability. For
// tests and demos.
#pragma once

#include "deviceshadow/store_backend.hpp"

#include <memory>

namespace deviceshadow {

std::unique_ptr<StoreBackend> make_memory_store();

}  // namespace deviceshadow
