// UniqueFd: owns one file descriptor and closes it on destruction unless it
// was released. Lets a task that carries a descriptor between threads close
// it when the task is dropped unrun (a loop destroyed before it ran).
#pragma once

#include <unistd.h>

namespace pollen::resp {

class UniqueFd {
 public:
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  int release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_;
};

}  // namespace pollen::resp
