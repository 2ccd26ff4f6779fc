// The threads of the model libraries (tile_library.cc: tile, layout_library.cc: layout): how many
// cores a call may use, and for calls too short to start a thread for (a tile call takes tens of
// microseconds, a thread's start about as long) one helper thread that lives as long as the
// process (TaskBeside). Header-only: each library is one g++ call (tpu_graphs/export/aot/native_library.py).
#ifndef TPU_GRAPHS_NATIVE_LIBRARY_LIBRARY_THREADS_H_
#define TPU_GRAPHS_NATIVE_LIBRARY_LIBRARY_THREADS_H_

#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <system_error>
#include <thread>
#include <utility>

namespace tpu_graphs_library {

// The threads a call may run on: one per core this process may run on (sched_getaffinity), or
// TPU_GRAPHS_NUM_THREADS (e.g. 1 in a compiler that runs its own threads).
inline int64_t ThreadsWanted() {
  int64_t threads = 0;
  if (const char* wanted = std::getenv("TPU_GRAPHS_NUM_THREADS")) threads = std::atoll(wanted);
  if (threads < 1) {
    cpu_set_t cores;
    threads = sched_getaffinity(0, sizeof(cores), &cores) == 0 ? CPU_COUNT(&cores)
                                                                : std::thread::hardware_concurrency();
  }
  return threads < 1 ? 1 : threads;
}

// One thread beside the callers' that runs one task at a time, started on first use and never
// stopped. After a task it keeps looking for the next for a while (kSpinFor) before it sleeps, so
// that a caller scoring kernel after kernel hands it work within a microsecond; a caller that
// finds it asleep or slow takes its task back (TaskBeside::Wait) rather than wait for it.
class Helper {
 public:
  // The process's helper if no other call holds it; nullptr then, or where one thread is wanted
  // (ThreadsWanted() at the first call).
  static Helper* Acquire() {
    static Helper* const helper = ThreadsWanted() > 1 ? Started() : nullptr;  // never deleted: lives with the process
    if (helper == nullptr || helper->held_.exchange(true, std::memory_order_acquire)) return nullptr;
    return helper;
  }

  // Hands `task` to the helper thread.
  void Start(std::function<void()> task) {
    task_ = std::move(task);
    state_.store(kPosted, std::memory_order_release);
    std::lock_guard<std::mutex> lock(mutex_);
    if (sleeping_) posted_.notify_one();
  }

  // Returns once the task has run, or at once if the helper had not taken it yet (it then never
  // runs); releases the helper for the next call.
  void Finish() {
    int posted = kPosted;
    if (!state_.compare_exchange_strong(posted, kIdle, std::memory_order_acq_rel)) {
      while (state_.load(std::memory_order_acquire) != kDone) Pause();
      state_.store(kIdle, std::memory_order_relaxed);
    }
    task_ = nullptr;
    held_.store(false, std::memory_order_release);
  }

 private:
  enum State : int { kIdle, kPosted, kRunning, kDone };
  static constexpr std::chrono::microseconds kSpinFor{200};

  static Helper* Started() {
    Helper* helper = new Helper;
    try {
      std::thread([helper] { helper->Loop(); }).detach();
    } catch (const std::system_error&) {  // no thread to be had: every call runs on its caller's alone
      delete helper;
      return nullptr;
    }
    return helper;
  }

  static void Pause() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::this_thread::yield();
#endif
  }

  void Loop() {
    for (;;) {
      WaitForTask();
      int posted = kPosted;
      if (!state_.compare_exchange_strong(posted, kRunning, std::memory_order_acq_rel)) continue;  // taken back
      task_();
      state_.store(kDone, std::memory_order_release);
    }
  }

  void WaitForTask() {
    const auto until = std::chrono::steady_clock::now() + kSpinFor;
    for (int spins = 0; state_.load(std::memory_order_acquire) != kPosted; ++spins) {
      if (spins % 256 != 255 || std::chrono::steady_clock::now() < until) {
        Pause();
        continue;
      }
      std::unique_lock<std::mutex> lock(mutex_);
      sleeping_ = true;
      posted_.wait(lock, [this] { return state_.load(std::memory_order_acquire) == kPosted; });
      sleeping_ = false;
      return;
    }
  }

  std::atomic<bool> held_{false};
  std::atomic<int> state_{kIdle};
  std::function<void()> task_;  // written by the caller before kPosted, read by the helper after
  std::mutex mutex_;
  std::condition_variable posted_;
  bool sleeping_ = false;  // guarded by mutex_
};

// A task run on the helper thread beside the caller, if the helper is free: the caller goes on
// with its own work, then Wait()s (the destructor too, so no task outlives what it refers to).
// Where no helper is free the task never runs, so it must be work the caller would do otherwise:
//
//   TaskBeside beside([&] { TakeChunks(&helper_error); });
//   ...; TakeChunks(&own_error); beside.Wait();
class TaskBeside {
 public:
  explicit TaskBeside(std::function<void()> task) : helper_(Helper::Acquire()) {
    if (helper_ != nullptr) helper_->Start(std::move(task));
  }
  TaskBeside(const TaskBeside&) = delete;
  TaskBeside& operator=(const TaskBeside&) = delete;
  ~TaskBeside() { Wait(); }

  // Returns once the task has run or been taken back; later calls return at once.
  void Wait() {
    if (helper_ != nullptr) helper_->Finish();
    helper_ = nullptr;
  }

 private:
  Helper* helper_;
};

}  // namespace tpu_graphs_library

#endif  // TPU_GRAPHS_NATIVE_LIBRARY_LIBRARY_THREADS_H_
