// prep_data's Pipeline (declared with Record and Batch in prep_data.h): batches of records from the reader
// thread through the worker threads back to the main thread, in input order, with a bound on the batches in
// flight.
#include <chrono>

#include "tools/prep_data/prep_data.h"

namespace prep {

Pipeline::Pipeline(int workers, int max_inflight, std::function<void(Batch&)> work,
                   std::function<void(Pipeline&)> read)
    : work_(std::move(work)), max_inflight_(max_inflight) {
    for (int i = 0; i < workers; i++) threads_.emplace_back([this] { worker(); });
    threads_.emplace_back([this, read] {
        try {
            read(*this);
        } catch (const Stopped&) {
        } catch (...) {
            std::lock_guard<std::mutex> lk(mu_);
            reader_error_ = std::current_exception();
        }
        std::lock_guard<std::mutex> lk(mu_);
        reader_done_ = true;
        final_seq_ = next_submit_;
        cv_done_.notify_all();
    });
}

Pipeline::~Pipeline() {
    {
        std::lock_guard<std::mutex> lk(mu_);
        stop_ = true;
    }
    cv_work_.notify_all();
    cv_space_.notify_all();
    for (auto& t : threads_) t.join();
}

void Pipeline::submit(std::unique_ptr<Batch> b) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_space_.wait(lk, [&] { return stop_ || inflight_ < max_inflight_; });
    if (stop_) throw Stopped();
    b->seq = next_submit_++;
    inflight_++;
    todo_.push_back(std::move(b));
    cv_work_.notify_one();
}

std::unique_ptr<Batch> Pipeline::next(double timeout, bool* timed_out) {
    std::unique_lock<std::mutex> lk(mu_);
    *timed_out = false;
    auto ready = [&] { return done_.count(next_take_) || (reader_done_ && next_take_ == final_seq_); };
    if (!cv_done_.wait_for(lk, std::chrono::duration<double>(timeout), ready)) {
        *timed_out = true;
        return nullptr;
    }
    auto it = done_.find(next_take_);
    if (it == done_.end()) {
        if (reader_error_) std::rethrow_exception(reader_error_);
        return nullptr;
    }
    auto b = std::move(it->second);
    done_.erase(it);
    next_take_++;
    inflight_--;
    cv_space_.notify_one();
    return b;
}

void Pipeline::worker() {
    while (true) {
        std::unique_ptr<Batch> b;
        {
            std::unique_lock<std::mutex> lk(mu_);
            cv_work_.wait(lk, [&] { return stop_ || !todo_.empty(); });
            if (stop_) return;
            b = std::move(todo_.front());
            todo_.pop_front();
        }
        try {
            work_(*b);
        } catch (const std::exception& e) {
            if (b->error.empty()) b->error = e.what();
        }
        std::lock_guard<std::mutex> lk(mu_);
        int64_t seq = b->seq;
        done_[seq] = std::move(b);
        cv_done_.notify_all();
    }
}

}  // namespace prep
