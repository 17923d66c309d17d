#include "notify/sender_pool.hpp"

#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <system_error>

namespace deviceshadow::notify {

void lower_thread_priority(int nice) {
  if (nice <= 0) return;
  const auto tid = static_cast<id_t>(::gettid());
  errno = 0;
  const int current = ::getpriority(PRIO_PROCESS, tid);  // inherited from the starting thread
  ::setpriority(PRIO_PROCESS, tid, std::min((errno ? 0 : current) + nice, 19));
}

SenderPool::SenderPool(std::size_t threads, int nice) {
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  event_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.ptr = nullptr;
  if (epoll_ < 0 || event_ < 0 || ::epoll_ctl(epoll_, EPOLL_CTL_ADD, event_, &ev) != 0) {
    const int error = errno;
    if (epoll_ >= 0) ::close(epoll_);
    if (event_ >= 0) ::close(event_);
    throw std::system_error(error, std::generic_category(), "notifications: cannot set up the sender threads");
  }
  for (std::size_t i = 0; i < std::max<std::size_t>(1, threads); ++i) {
    threads_.emplace_back([this, nice] {
      lower_thread_priority(nice);
      run();
    });
  }
}

SenderPool::~SenderPool() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  signal();
  for (std::thread& t : threads_) t.join();
  ::close(event_);
  ::close(epoll_);
}

void SenderPool::add(Task& task, int fd) {
  std::lock_guard lock(mutex_);
  State& state = tasks_[&task];
  state.fd = fd;
  if (fd >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLONESHOT;
    ev.data.ptr = &task;
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      const int error = errno;
      tasks_.erase(&task);
      throw std::system_error(error, std::generic_category(), "notifications: cannot watch a target");
    }
  }
  make_runnable(&task, state);
}

void SenderPool::wake(Task& task) {
  std::lock_guard lock(mutex_);
  if (auto it = tasks_.find(&task); it != tasks_.end()) make_runnable(&task, it->second);
}

void SenderPool::remove(Task& task) {
  std::unique_lock lock(mutex_);
  auto it = tasks_.find(&task);
  if (it == tasks_.end()) return;
  idle_cv_.wait(lock, [&] { return !tasks_.at(&task).running; });
  it = tasks_.find(&task);
  if (it->second.fd >= 0) ::epoll_ctl(epoll_, EPOLL_CTL_DEL, it->second.fd, nullptr);
  tasks_.erase(it);  // a queued turn or timer of it is skipped
}

void SenderPool::make_runnable(Task* task, State& state) {
  if (state.running) {
    state.again = true;
  } else if (!state.queued) {
    state.queued = true;
    runnable_.push(task);
    signal();
  }
}

void SenderPool::signal() {
  const std::uint64_t one = 1;
  [[maybe_unused]] const auto n = ::write(event_, &one, sizeof one);  // EAGAIN: it is signalled already
}

void SenderPool::rearm(Task* task, const State& state) {
  if (state.fd < 0) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLONESHOT;
  ev.data.ptr = task;
  ::epoll_ctl(epoll_, EPOLL_CTL_MOD, state.fd, &ev);
}

void SenderPool::run() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (stopping_) {
      signal();  // the next thread, which may have found the signal drained
      return;
    }
    const Clock::time_point now = Clock::now();
    while (!timers_.empty() && timers_.top().at <= now) {
      const Timer due = timers_.top();
      timers_.pop();
      auto it = tasks_.find(due.task);
      if (it != tasks_.end() && it->second.timer == due.generation) {
        it->second.timer = 0;
        make_runnable(due.task, it->second);
      }
    }
    if (!runnable_.empty()) {
      Task* task = runnable_.front();
      runnable_.pop();
      auto it = tasks_.find(task);
      // Removed while queued (and perhaps another task added at its address since): skipped.
      if (it == tasks_.end() || !it->second.queued || it->second.running) continue;
      it->second.queued = false;
      it->second.running = true;
      if (!runnable_.empty()) signal();  // another thread takes the next
      lock.unlock();
      std::optional<Clock::time_point> next;
      try {
        next = task->step();
      } catch (...) {  // a task's fault: try again later rather than never
        next = Clock::now() + std::chrono::seconds(1);
      }
      lock.lock();
      State& state = tasks_.at(task);  // remove() waits for the turn to end
      state.running = false;
      if (!next) {
        state.timer = 0;
      } else if (!state.timer || *next < state.timer_at) {  // a live timer no later stays (a spare turn at most)
        state.timer = ++next_generation_;
        state.timer_at = *next;
        const bool earliest = timers_.empty() || *next < timers_.top().at;
        timers_.push({*next, task, state.timer});
        if (earliest) signal();  // a waiting thread waits for it, not for a later one
      }
      if (state.again) {
        state.again = false;
        make_runnable(task, state);
      }
      rearm(task, state);
      idle_cv_.notify_all();
      continue;
    }
    int timeout = -1;
    if (!timers_.empty()) {
      timeout = static_cast<int>(std::clamp<std::int64_t>(
          std::chrono::ceil<std::chrono::milliseconds>(timers_.top().at - now).count(), 0, 60000));
    }
    lock.unlock();
    epoll_event events[16];
    const int n = ::epoll_wait(epoll_, events, 16, timeout);
    lock.lock();
    for (int i = 0; i < n; ++i) {
      if (!events[i].data.ptr) {
        std::uint64_t count;
        [[maybe_unused]] const auto r = ::read(event_, &count, sizeof count);
        continue;
      }
      auto* task = static_cast<Task*>(events[i].data.ptr);
      if (auto it = tasks_.find(task); it != tasks_.end()) make_runnable(task, it->second);
    }
  }
}

}  // namespace deviceshadow::notify
