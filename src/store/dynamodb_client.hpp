// How the DynamoDB store reaches DynamoDB, for other clients of the same table (the stream
// consumer's Streams and lease calls): the same endpoint, region, timeouts and retries.
#pragma once

#include "aws/client.hpp"
#include "deviceshadow/dynamodb_store.hpp"

namespace deviceshadow {

// Fills in the options' region (AWS_REGION, the profile's, else us-east-1) and endpoint (the
// region's) when empty, and returns the client options for them.
aws::ClientOptions dynamodb_client_options(DynamoDbOptions& options);

}  // namespace deviceshadow
