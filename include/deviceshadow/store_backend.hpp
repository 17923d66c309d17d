// One backend's store: its shadows (Store) and its delivery state (DeliveryStore) in one object,
// on one connection or table, and its bulk jobs (JobStore) where it keeps them. What the
// factories return (memory_store.hpp, sqlite_store.hpp, dynamodb_store.hpp); shadowd hands the
// engine the Store, notifications the DeliveryStore and the job runner the JobStore.
#pragma once

#include "deviceshadow/delivery_store.hpp"
#include "deviceshadow/job_store.hpp"
#include "deviceshadow/store.hpp"

namespace deviceshadow {

class StoreBackend : public Store, public DeliveryStore {
 public:
  // The backend's bulk jobs, on the same database as its shadows; nullptr where it keeps none:
  // bulk jobs are then refused.
  virtual JobStore* job_store() noexcept { return nullptr; }
};

}  // namespace deviceshadow
