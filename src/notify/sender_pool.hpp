// The dispatcher's shared sender threads: every registration's deliveries are driven by a few
// threads, not one each. A task runs when woken, when the descriptor it watches polls readable,
// or when the time it asked for comes; never on two threads at once, and an idle task costs no
// wake-up.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <queue>
#include <thread>
#include <unordered_map>
#include <vector>

namespace deviceshadow::notify {

// Lowers the calling thread `nice` levels below the process (Linux applies a nice value per
// thread): delivery threads yield the CPU to request handling, so notifications lag under CPU
// saturation rather than slow writes.
void lower_thread_priority(int nice);

class SenderPool {
 public:
  using Clock = std::chrono::steady_clock;

  class Task {
   public:
    virtual ~Task() = default;
    // One turn of work, which must not wait on a network. Returns when to run again at the
    // latest (nullopt: only when woken or its descriptor is readable).
    virtual std::optional<Clock::time_point> step() = 0;
  };

  // `threads` threads, each lowered `nice` levels below the process.
  SenderPool(std::size_t threads, int nice);
  ~SenderPool();  // requires every task removed
  SenderPool(const SenderPool&) = delete;
  SenderPool& operator=(const SenderPool&) = delete;

  // Adds a task, which runs soon; `fd` (-1: none) is watched for readability (level-triggered:
  // the task must consume what makes it readable, or it runs again at once). Throws
  // std::system_error when the descriptor cannot be watched.
  void add(Task& task, int fd);
  // Makes the task run soon (again after the turn in progress, if it is running).
  void wake(Task& task);
  // Removes the task: waits for a turn in progress to end; it does not run again.
  void remove(Task& task);

 private:
  struct State {
    int fd = -1;
    bool running = false;
    bool again = false;   // woken while running
    bool queued = false;  // in runnable_
    std::uint64_t timer = 0;  // the generation of its live timer in timers_ (0: none)
    Clock::time_point timer_at;  // when that timer is due
  };
  struct Timer {
    Clock::time_point at;
    Task* task;
    std::uint64_t generation;
    bool operator>(const Timer& o) const { return at > o.at; }
  };

  void run();
  // Queues the task to run unless it is queued or running (then it runs again). Requires mutex_.
  void make_runnable(Task* task, State& state);
  void signal();  // wakes a thread waiting in epoll_wait
  void rearm(Task* task, const State& state);

  int epoll_ = -1;
  int event_ = -1;  // an eventfd: work for a waiting thread
  std::mutex mutex_;
  std::condition_variable idle_cv_;  // a task's turn ended (remove() waits on it)
  std::unordered_map<Task*, State> tasks_;
  std::queue<Task*> runnable_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<>> timers_;
  std::uint64_t next_generation_ = 0;
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace deviceshadow::notify
