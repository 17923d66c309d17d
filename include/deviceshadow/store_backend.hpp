// One backend's store: its shadows (Store) and its delivery state (DeliveryStore) in one object,
// on one connection or table. What the factories return (memory_store.hpp, sqlite_store.hpp,
// dynamodb_store.hpp); shadowd hands the engine the Store and notifications the DeliveryStore.
#pragma once

#include "deviceshadow/delivery_store.hpp"
#include "deviceshadow/store.hpp"

namespace deviceshadow {

class StoreBackend : public Store, public DeliveryStore {};

}  // namespace deviceshadow
