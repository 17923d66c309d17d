// The MQTT bridge's request queues (awsiot/fair_queue.hpp): bounded in bytes, a shadow's share
// of the budget bounded by the room left free, shadows served in turn.
#include "awsiot/fair_queue.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace {

namespace awsiot = deviceshadow::awsiot;
using awsiot::FairQueue;
using awsiot::QueueBudget;

const auto kNow = std::chrono::steady_clock::now();

// Requests of one size: a 100-byte payload on a 24-byte topic.
constexpr std::size_t kPayloadBytes = 100;
std::string topic_of(char shadow) { return "$aws/things/" + std::string(1, shadow) + "/shadow/get"; }
const std::size_t kCost = FairQueue::cost(24, kPayloadBytes);

bool push(FairQueue& q, char shadow, int n) {
  std::string payload = std::to_string(n);
  payload.resize(kPayloadBytes, ' ');
  return q.push(std::string(1, shadow), topic_of(shadow), payload, kNow);
}

// The shadow and number of the next request served.
std::string pop(FairQueue& q) {
  const awsiot::QueuedRequest r = q.pop();
  return std::string(1, r.topic[12]) + std::to_string(std::stoi(r.payload));
}

// Pushes requests of `shadow` until one is refused; returns how many were taken.
int fill(FairQueue& q, char shadow) {
  int n = 0;
  while (push(q, shadow, n)) ++n;
  return n;
}

TEST(FairQueue, ServesShadowsInTurnEachInOrderOfArrival) {
  QueueBudget budget(1 << 20);
  FairQueue q(budget);
  for (int n = 1; n <= 3; ++n) ASSERT_TRUE(push(q, 'a', n));
  ASSERT_TRUE(push(q, 'b', 1));
  ASSERT_TRUE(push(q, 'c', 1));
  ASSERT_TRUE(push(q, 'b', 2));
  EXPECT_EQ(q.lanes(), 3u);
  std::vector<std::string> served;
  while (!q.empty()) served.push_back(pop(q));
  EXPECT_EQ(served, (std::vector<std::string>{"a1", "b1", "c1", "a2", "b2", "a3"}));
  EXPECT_EQ(budget.used(), 0u);
}

TEST(FairQueue, ALaneThatEmptiedComesLast) {
  QueueBudget budget(1 << 20);
  FairQueue q(budget);
  ASSERT_TRUE(push(q, 'a', 1));
  ASSERT_TRUE(push(q, 'b', 1));
  EXPECT_EQ(pop(q), "a1");
  ASSERT_TRUE(push(q, 'a', 2));  // a new lane, behind b
  ASSERT_TRUE(push(q, 'b', 2));
  EXPECT_EQ(pop(q), "b1");
  EXPECT_EQ(pop(q), "a2");
  EXPECT_EQ(pop(q), "b2");
  EXPECT_TRUE(q.empty());
}

TEST(FairQueue, CountsTopicPayloadAndOverheadInBytes) {
  QueueBudget budget(1 << 20);
  FairQueue q(budget);
  ASSERT_TRUE(push(q, 'a', 1));
  ASSERT_TRUE(push(q, 'a', 2));
  ASSERT_TRUE(push(q, 'b', 1));
  EXPECT_EQ(topic_of('a').size(), 24u);
  EXPECT_EQ(kCost, 24 + kPayloadBytes + FairQueue::kRequestOverhead);
  EXPECT_EQ(budget.used(), 3 * kCost);
  EXPECT_EQ(q.held("a"), 2 * kCost);
  EXPECT_EQ(q.held("b"), kCost);
  EXPECT_EQ(q.held("z"), 0u);
  pop(q);
  EXPECT_EQ(budget.used(), 2 * kCost);
  EXPECT_EQ(q.held("a"), kCost);
}

TEST(FairQueue, OneFloodingShadowHoldsAtMostHalfTheBudgetAndOthersStillGetIn) {
  QueueBudget budget(100 * kCost);
  FairQueue q(budget);
  const int flooded = fill(q, 'a');
  EXPECT_EQ(flooded, 50);  // while a + 1 <= 100 - a
  EXPECT_FALSE(push(q, 'a', 99));  // refused, and stays refused
  EXPECT_EQ(q.held("a"), 50 * kCost);
  // Every other shadow gets in while the flood is refused.
  for (char shadow = 'b'; shadow <= 'k'; ++shadow) EXPECT_TRUE(push(q, shadow, 1)) << shadow;
  EXPECT_FALSE(push(q, 'a', 100));
  // Served in turn: the other shadows are not behind the flood.
  EXPECT_EQ(pop(q), "a0");
  for (char shadow = 'b'; shadow <= 'k'; ++shadow) EXPECT_EQ(pop(q), std::string(1, shadow) + "1");
}

TEST(FairQueue, SeveralFloodingShadowsLeaveRoomForANewcomer) {
  QueueBudget budget(100 * kCost);
  FairQueue q(budget);
  for (int round = 0; round < 40; ++round) {  // a, b and c flood in turn until all are refused
    for (char shadow : {'a', 'b', 'c'}) push(q, shadow, round);
  }
  for (char shadow : {'a', 'b', 'c'}) {
    EXPECT_LE(q.held(std::string(1, shadow)), 100 * kCost / 3) << shadow;
    EXPECT_FALSE(push(q, shadow, 99)) << shadow;
  }
  EXPECT_GE(budget.max_bytes() - budget.used(), 100 * kCost / 4);  // 1/(n+1) of the budget stays free
  EXPECT_TRUE(push(q, 'd', 1));
}

TEST(FairQueue, QueuesShareOneBudget) {
  QueueBudget budget(10 * kCost);
  {
    FairQueue first(budget);
    FairQueue second(budget);
    // A shadow holding h takes one more while h + 1 <= 10 - used (h included in used).
    EXPECT_EQ(fill(first, 'a'), 5);   // while a + 1 <= 10 - a
    EXPECT_EQ(fill(second, 'b'), 3);  // while b + 1 <= 10 - 5 - b
    EXPECT_EQ(fill(second, 'c'), 1);  // while c + 1 <= 10 - 8 - c
    EXPECT_EQ(budget.used(), 9 * kCost);
    first.pop();
    EXPECT_EQ(budget.used(), 8 * kCost);
  }
  EXPECT_EQ(budget.used(), 0u);  // what still waited went back with the queues
}

TEST(FairQueue, ARequestLargerThanTheRoomLeftIsRefusedAndNothingIsKept) {
  QueueBudget budget(kCost - 1);
  FairQueue q(budget);
  EXPECT_FALSE(push(q, 'a', 1));
  EXPECT_TRUE(q.empty());
  EXPECT_EQ(q.lanes(), 0u);
  EXPECT_EQ(budget.used(), 0u);
  QueueBudget exact(kCost);
  FairQueue r(exact);
  EXPECT_TRUE(push(r, 'a', 1));  // the first request of an empty lane may take all the room left
  EXPECT_FALSE(push(r, 'b', 1));
}

TEST(QueueBudget, TakesOnlyWhatFitsBesideWhatTheShadowHolds) {
  QueueBudget budget(100);
  EXPECT_TRUE(budget.take(30, 0));
  EXPECT_TRUE(budget.take(35, 30));   // 30 + 35 <= 100 - 30
  EXPECT_FALSE(budget.take(1, 65));   // 65 + 1 > 100 - 65
  EXPECT_TRUE(budget.take(35, 0));    // another shadow: 35 <= 35
  EXPECT_FALSE(budget.take(1, 0));
  EXPECT_EQ(budget.used(), 100u);
  budget.give_back(100);
  EXPECT_FALSE(budget.take(101, 0));
  EXPECT_FALSE(budget.take(50, 60));  // holds more than the room left
  EXPECT_EQ(budget.used(), 0u);
}

}  // namespace
