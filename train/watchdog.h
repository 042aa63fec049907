// The watchdog of a data-parallel run. A rank that stops (a hung file system, a GPU that no longer answers, a
// process stopped by a signal) leaves the other ranks waiting in a collective forever: the job holds its GPUs and
// prints nothing. Each rank's Watchdog thread watches the progress marks its main thread leaves (beat(): a step
// begins, an evaluation, a checkpoint, each --sample token, --save); when none came for `seconds`, it says where
// this rank was and ends the whole job through the callback (the trainer's: comm_abort, MPI_Abort), so the launcher
// returns with an error.
// --watchdog SEC; docs/DESIGN.md section 8.5. Before the first beat nothing is watched (the trainers beat once the
// model is set up: the data's checks, which read every shard, come before).
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

class Watchdog {
  public:
    // on_stall runs on the watchdog's thread, after the message, and must not return (it ends the job)
    Watchdog(int seconds, int rank, std::function<void()> on_stall)
        : seconds_(seconds), rank_(rank), on_stall_(std::move(on_stall)) {
        if (seconds_ > 0) thread_ = std::thread([this] { watch(); });
    }
    ~Watchdog() {
        {
            std::lock_guard<std::mutex> lock(mutex_);
            stop_ = true;
        }
        wake_.notify_all();
        if (thread_.joinable()) thread_.join();
    }
    Watchdog(const Watchdog&) = delete;
    Watchdog& operator=(const Watchdog&) = delete;

    // The main thread begins `what` (a string literal: "training step", "evaluation", "--sample", ...) at `step`
    // (0: before the first, said without a step: "start-up", "--resume").
    void beat(const char* what, int step) {
        what_.store(what);
        step_.store(step);
        last_ns_.store(now_ns());
    }

    // Flushes f unless another thread holds it (the main thread in a write that hangs on a stopped file system):
    // the watchdog must not wait for what it is there to end.
    static void flush_unless_busy(FILE* f) {
        if (ftrylockfile(f) != 0) return;
        std::fflush(f);
        funlockfile(f);
    }

  private:
    static int64_t now_ns() {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
            .count();
    }
    void watch() {
        std::unique_lock<std::mutex> lock(mutex_);
        const auto poll = std::chrono::milliseconds(seconds_ >= 10 ? 1000 : 100);
        while (!wake_.wait_for(lock, poll, [this] { return stop_; })) {
            const int64_t last = last_ns_.load();
            if (last == 0) continue;  // not started
            const double idle = (now_ns() - last) / 1e9;
            if (idle < seconds_) continue;
            std::time_t wall = std::time(nullptr) - (std::time_t)idle;
            char since[32];
            std::tm local{};
            std::strftime(since, sizeof since, "%H:%M:%S", localtime_r(&wall, &local));
            flush_unless_busy(stdout);  // what the run printed comes first, also when both go to one file
            std::fprintf(stderr,
                         "rank %d: no progress for %.0f s (--watchdog %d): stuck in the %s%s, begun at %s; "
                         "a rank has stopped or hung (this one, or one this one waits for in a collective): ending "
                         "the job\n---> HINT: every rank that waited says so, and a stopped rank may too when the "
                         "launcher wakes it to end it (Open MPI sends SIGCONT): a rank stuck elsewhere than the "
                         "others, or missing from these lines, is the one to look at, else the nodes' logs (dmesg, the "
                         "file system); a step, an evaluation's micro-batch, a checkpoint, --resume's read or --save that takes "
                         "longer needs a larger --watchdog (0: off)\n",
                         rank_, idle, seconds_, what_.load(),
                         step_.load() > 0 ? (" of step " + std::to_string(step_.load())).c_str() : "", since);
            std::fflush(stderr);
            on_stall_();
            return;
        }
    }

    const int seconds_;
    const int rank_;
    std::function<void()> on_stall_;
    std::atomic<int64_t> last_ns_{0};
    std::atomic<const char*> what_{""};
    std::atomic<int> step_{0};
    std::mutex mutex_;
    std::condition_variable wake_;
    bool stop_ = false;
    std::thread thread_;
};
