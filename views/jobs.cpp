// jobs.cpp — the app's background job runner (see jobs.h).
#include "views/jobs.h"

#include <exception>

#include "views/app_state.h"

namespace lathe::views {

bool JobRunner::start(std::string kind, std::string label, std::string failure, Work work) {
  if (busy_) return false;
  join();   // the previous job's thread has finished its work; reap it
  kind_ = std::move(kind);
  label_ = std::move(label);
  failure_ = std::move(failure);
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = false;
    result_ = nullptr;
    error_.reset();
  }
  busy_ = true;
  started_ = std::chrono::steady_clock::now();
  thread_ = std::thread([this, w = std::move(work)]() mutable { run(std::move(w)); });
  return true;
}

void JobRunner::run(Work work) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [this] { return !hold_; });
  }
  Apply result;
  std::optional<Diagnostic> error;
  try {
    result = work();
  } catch (const UserError& e) {
    error = e.diag();
  } catch (const InternalError& e) {
    error = Diagnostic{std::string("internal error (a bug in Lathe): ") + e.what()};
  } catch (const std::exception& e) {
    error = Diagnostic{e.what()};
  } catch (...) {
    error = Diagnostic{"unknown error"};
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    result_ = std::move(result);
    error_ = std::move(error);
    done_ = true;
  }
  cv_.notify_all();
  if (wake) wake();
}

double JobRunner::seconds() const {
  if (!busy_) return 0;
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

bool JobRunner::poll(AppState& s) {
  if (!busy_) return false;
  Apply result;
  std::optional<Diagnostic> error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!done_) return false;
    result = std::move(result_);
    error = std::move(error_);
  }
  join();
  busy_ = false;
  last_kind = kind_;
  last_error.clear();
  ++finished;
  if (!error && result) {
    try {
      result(s);
    } catch (const UserError& e) {
      error = e.diag();
    } catch (const std::exception& e) {
      error = Diagnostic{e.what()};
    }
  }
  if (error) {
    s.error = LoadError{failure_, *error, ""};
    s.fail(failure_ + ": " + error->format());
    last_error = failure_ + ": " + error->message;
  }
  return true;
}

void JobRunner::wait() {
  if (!busy_) return;
  std::unique_lock<std::mutex> lock(mu_);
  if (hold_) {   // a blocking wait on a held job would never end
    hold_ = false;
    cv_.notify_all();
  }
  cv_.wait(lock, [this] { return done_; });
}

void JobRunner::hold(bool on) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    hold_ = on;
  }
  cv_.notify_all();
}

bool JobRunner::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return hold_;
}

void JobRunner::join() {
  if (!thread_.joinable()) return;
  hold(false);
  thread_.join();
}

}  // namespace lathe::views
