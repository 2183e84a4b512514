#include "core/file.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <ctime>
#include <filesystem>
#include <system_error>
#include <utility>
#include <vector>

#include "core/error.h"

namespace encore {

namespace {

// A temporary whose writer's pid is alive is still removed past this age: the pid was reused.
constexpr time_t kStaleSeconds = 3600;

std::string folder_of(const std::string& path) {
  std::string folder = std::filesystem::path(path).parent_path().string();
  return folder.empty() ? "." : folder;
}

// Whether `rest` is "<pid>-<n>.tmp", the rest of a temporary's name after "<name>."; its pid.
bool temporary_suffix(std::string_view rest, pid_t& pid) {
  if (!rest.ends_with(".tmp")) return false;
  rest.remove_suffix(4);
  const size_t dash = rest.find('-');
  if (dash == std::string_view::npos) return false;
  const std::string_view p = rest.substr(0, dash), n = rest.substr(dash + 1);
  const auto digits = [](std::string_view s) {
    return !s.empty() &&
           std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (!digits(p) || !digits(n)) return false;
  long long v = 0;
  const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
  if (ec != std::errc() || end != p.data() + p.size() || v <= 0 || v != static_cast<pid_t>(v))
    return false;
  pid = static_cast<pid_t>(v);
  return true;
}

bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// Removes the temporaries of `target` that killed writes left: those no process holds locked
// whose writer is gone (see file.h). A concurrent writer of the same path holds its lock.
void remove_stale_temporaries(const std::string& target) {
  const std::string folder = folder_of(target);
  const std::string prefix = std::filesystem::path(target).filename().string() + ".";
  std::vector<std::pair<std::string, pid_t>> candidates;
  if (DIR* dir = ::opendir(folder.c_str())) {
    while (const dirent* e = ::readdir(dir)) {
      const std::string_view name = e->d_name;
      pid_t pid = 0;
      if (name.starts_with(prefix) && temporary_suffix(name.substr(prefix.size()), pid))
        candidates.emplace_back(folder + "/" + std::string(name), pid);
    }
    ::closedir(dir);
  }
  for (const auto& [path, pid] : candidates) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    if (fd < 0) continue;
    // A file system without locks (flock fails otherwise than EWOULDBLOCK) leaves pid and age.
    const bool unlocked = ::flock(fd, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK;
    struct stat held {
    }, named{};
    const bool same = ::fstat(fd, &held) == 0 && S_ISREG(held.st_mode) &&
                      ::stat(path.c_str(), &named) == 0 && named.st_ino == held.st_ino &&
                      named.st_dev == held.st_dev;
    const bool gone = !process_alive(pid) || ::time(nullptr) - held.st_mtime > kStaleSeconds;
    if (unlocked && same && gone) ::unlink(path.c_str());
    ::close(fd);  // releases the lock
  }
}

const char* kind_of(unsigned mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace

void throw_file_error(const char* fn, const char* verb, const std::string& path,
                      const std::string& what, int err) {
  std::string message = detail::cat("[", fn, "] cannot ", verb, " ", path, ": ");
  if (!what.empty()) message += what + ": ";
  message += std::generic_category().message(err);
  throw FileError(message, path, err);
}

void check_regular_file(unsigned mode, const char* fn, const char* verb, const std::string& path) {
  if (S_ISREG(mode)) return;
  std::string message =
      detail::cat("[", fn, "] cannot ", verb, " ", path, ": it is ", kind_of(mode));
  if (!S_ISDIR(mode)) {
    message += ", not a regular file";
    if (std::string_view(verb) == "write")
      message += " (a file is written by renaming a new one over it, which would replace it)";
  }
  throw FileError(message, path, S_ISDIR(mode) ? EISDIR : 0);
}

AtomicFile::AtomicFile(const std::string& path, const char* fn)
    : fn_(fn), path_(path), target_(path) {
  check_path(path, fn);
  struct stat st {};
  if (::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    std::error_code ec;
    target_ = std::filesystem::weakly_canonical(path, ec).string();
    if (ec) fail("cannot follow the symbolic link", ec.value());
  }
  if (::stat(target_.c_str(), &st) == 0) check_regular_file(st.st_mode, fn, "write", path);
  remove_stale_temporaries(target_);
  static std::atomic<uint64_t> counter{0};
  // O_EXCL: a name left by a killed process whose pid is reused is skipped, never shared.
  for (int attempt = 0;; ++attempt) {
    temp_ = target_ + "." + std::to_string(::getpid()) + "-" + std::to_string(counter++) + ".tmp";
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0) break;
    const int err = errno;
    if (err != EEXIST || attempt == 100)
      fail("cannot create a temporary file next to it (" + temp_ + ")", err);
  }
  // Held until the rename: a later writer of the path sees the temporary is in use.
  ::flock(fd_, LOCK_EX | LOCK_NB);
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!renamed_) ::unlink(temp_.c_str());
}

// Unbuffered: nothing is left to flush before the sync.
void AtomicFile::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd_, p, std::min<size_t>(n, size_t{1} << 30));
    const int err = errno;
    if (w < 0 && err == EINTR) continue;
    if (w < 0) fail("write failed", err);
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void AtomicFile::commit() {
  // errno is read before the message is built: an allocation may change it.
  int err = ::fsync(fd_) != 0 ? errno : 0;
  if (err != 0) fail("cannot sync the temporary file", err);
  err = ::rename(temp_.c_str(), target_.c_str()) != 0 ? errno : 0;
  if (err != 0) fail("cannot rename the temporary file over it", err);
  renamed_ = true;
  err = ::close(std::exchange(fd_, -1)) != 0 ? errno : 0;  // releases the lock
  if (err != 0) fail("the file was replaced but closing it failed", err);
  // The rename is durable only once the folder's entry is.
  const std::string folder = folder_of(target_);
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  err = dir < 0 || ::fsync(dir) != 0 ? errno : 0;
  if (dir >= 0) ::close(dir);
  if (err != 0) fail("the file was replaced but its folder cannot be synced", err);
}

void AtomicFile::fail(const std::string& what, int err) const {
  throw_file_error(fn_.c_str(), "write", path_, what, err);
}

void write_file(const std::string& path, std::string_view contents, const char* fn) {
  AtomicFile file(path, fn);
  file.write(contents);
  file.commit();
}

std::string read_file(const std::string& path, const char* fn) {
  check_path(path, fn);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const int open_err = errno;
  if (fd < 0) throw_file_error(fn, "read", path, "", open_err);
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  const int stat_err = ::fstat(fd, &st) != 0 ? errno : 0;
  if (stat_err != 0) throw_file_error(fn, "read", path, "", stat_err);
  check_regular_file(st.st_mode, fn, "read", path);
  std::string out;
  char buffer[1 << 16];
  for (;;) {
    const ssize_t r = ::read(fd, buffer, sizeof buffer);
    const int err = errno;
    if (r < 0 && err == EINTR) continue;
    if (r < 0) throw_file_error(fn, "read", path, "", err);
    if (r == 0) return out;
    out.append(buffer, static_cast<size_t>(r));
  }
}

}  // namespace encore
