// Files encore writes (core/file.h): targets that are not regular files are refused and left as
// they were, the system's errors are FileErrors carrying errno and the path, and the next
// write to a path removes the temporaries of killed writes to it, and only those.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utime.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <fstream>
#include <functional>

#include "core/file.h"
#include "core/ledger.h"
#include "helpers.h"
#include "nn/checkpoint.h"
#include "ops/autotune.h"

namespace encore {
namespace {

namespace fs = std::filesystem;

class Files : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "encore_files_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string dir_;
};

std::string read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// Every way encore writes a file, each writing to `path`.
const std::vector<std::pair<const char*, std::function<void(const std::string&)>>>& writers() {
  static const std::vector<std::pair<const char*, std::function<void(const std::string&)>>> w = {
      {"save_tensors",
       [](const std::string& p) {
         nn::save_tensors(p, {{"w", ones({4})}});
       }},
      {"autotune::save", [](const std::string& p) { autotune::save(p); }},
      {"write_chrome_trace", [](const std::string& p) { Ledger::global().write_chrome_trace(p); }},
  };
  return w;
}

// Expects `write` to throw a FileError with errno `code` whose message names `path` and has
// `needle`.
void expect_file_error(const std::function<void()>& write, const std::string& path, int code,
                       const std::string& needle) {
  try {
    write();
    ADD_FAILURE() << "writing " << path << " succeeded";
  } catch (const FileError& e) {
    EXPECT_EQ(e.code(), code) << e.what();
    EXPECT_EQ(e.path(), path);
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST_F(Files, TargetsThatAreNotRegularFilesAreRefusedAndLeftAsTheyWere) {
  // A FIFO: opening it to write would wait for a reader; renaming over it would replace it.
  const std::string fifo = path("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // A device of our own (the null device's numbers; root only): never the real /dev/null.
  const std::string device = path("null");
  const bool have_device = ::mknod(device.c_str(), S_IFCHR | 0600, makedev(1, 3)) == 0;
  fs::create_directory(path("folder"));
  for (const auto& [name, write] : writers()) {
    SCOPED_TRACE(name);
    expect_file_error([&] { write(fifo); }, fifo, 0, "it is a FIFO, not a regular file");
    if (have_device)
      expect_file_error([&] { write(device); }, device, 0, "it is a character device");
    expect_file_error([&] { write(path("folder")); }, path("folder"), EISDIR, "it is a directory");
  }
  struct stat st {};
  ASSERT_EQ(::stat(fifo.c_str(), &st), 0);
  EXPECT_TRUE(S_ISFIFO(st.st_mode));
  if (have_device) {
    ASSERT_EQ(::stat(device.c_str(), &st), 0);
    EXPECT_TRUE(S_ISCHR(st.st_mode));
  }
  EXPECT_TRUE(fs::is_empty(path("folder")));
  // Nothing else was written: no temporary file either.
  std::vector<std::string> expected = {"fifo", "folder"};
  if (have_device) expected.push_back("null");
  EXPECT_EQ(files(), expected);
}

TEST_F(Files, ASymbolicLinkIsFollowedAndStays) {
  fs::create_directory(path("real"));
  const std::string target = path("real/ckpt.safetensors"), link = path("ckpt.safetensors");
  nn::save_tensors(target, {{"w", zeros({4})}});
  fs::create_symlink(target, link);
  nn::save_tensors(link, {{"w", ones({4})}});
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_TRUE(test::bitwise_equal(nn::load_tensors(target).tensors.at(0).second, ones({4})));
  EXPECT_EQ(files(), (std::vector<std::string>{"ckpt.safetensors", "real"}));
}

TEST_F(Files, SystemErrorsAreFileErrorsWithErrnoAndPath) {
  const std::string missing = path("missing/out.txt");
  for (const auto& [name, write] : writers()) {
    SCOPED_TRACE(name);
    expect_file_error([&] { write(missing); }, missing, ENOENT, "No such file or directory");
  }
  expect_file_error([&] { nn::load_tensors(path("none")); }, path("none"), ENOENT,
                    "[load] cannot read");
  expect_file_error([&] { autotune::load(path("none")); }, path("none"), ENOENT,
                    "[autotune.load] cannot read");
  expect_file_error([&] { nn::load_tensors(dir_); }, dir_, EISDIR, "it is a directory");
  // A bad value is still a ValueError, not a FileError.
  EXPECT_THROW(nn::save_tensors(path("x"), {{"", ones({1})}}), ValueError);
  EXPECT_THROW(nn::save_tensors(std::string("x\0y", 3), {{"w", ones({1})}}), ValueError);
}

// Runs `child` in a forked process and returns its exit status (77: skipped).
int in_child(const std::function<int()>& child) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    int code = 1;
    try {
      code = child();
    } catch (...) {
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A file system that is full (a 64 KiB tmpfs in a mount namespace of the child's own) and a file
// size limit (RLIMIT_FSIZE, with SIGXFSZ ignored so that the write fails with EFBIG): each is a
// FileError with its errno, and the previous file stays.
TEST_F(Files, AFullDiskAndAFileSizeLimitAreFileErrors) {
  const std::string file = path("ckpt.safetensors");
  const nn::NamedTensors big = {{"w", ones({1 << 18})}};  // 1 MiB
  const int full = in_child([&] {
    if (::unshare(CLONE_NEWNS) != 0) return 77;
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) return 77;
    if (::mount("encore-test", dir_.c_str(), "tmpfs", 0, "size=64k") != 0) return 77;
    nn::save_tensors(file, {{"w", ones({4})}});
    const std::string before = read_all(file);
    try {
      nn::save_tensors(file, big);
      return 2;
    } catch (const FileError& e) {
      if (e.code() != ENOSPC || e.path() != file) return 3;
    }
    std::vector<fs::path> left;
    for (const auto& e : fs::directory_iterator(dir_)) left.push_back(e.path());
    return read_all(file) == before && left == std::vector<fs::path>{file} ? 0 : 4;
  });
  if (full == 77) {
    std::cout << "(ENOSPC not tested: no mount namespace for this process)\n";
  } else {
    EXPECT_EQ(full, 0) << "2: saved, 3: not ENOSPC, 4: the previous file or the folder changed";
  }
  const int too_large = in_child([&] {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{};
    ::getrlimit(RLIMIT_FSIZE, &limit);
    limit.rlim_cur = 64 * 1024;
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      nn::save_tensors(file, big);
      return 2;
    } catch (const FileError& e) {
      return e.code() == EFBIG && e.path() == file ? 0 : 3;
    }
  });
  EXPECT_EQ(too_large, 0) << "2: saved, 3: not EFBIG";
  EXPECT_TRUE(files().empty());
}

// A pid no process has: a child's, after it exited and was reaped.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

void touch(const std::string& path, time_t age_seconds = 0) {
  std::ofstream(path) << "partial";
  if (age_seconds) {
    const time_t t = ::time(nullptr) - age_seconds;
    const utimbuf times{t, t};
    ::utime(path.c_str(), &times);
  }
}

TEST_F(Files, TheNextWriteRemovesTemporariesOfKilledWritesOnly) {
  const std::string name = "ckpt.safetensors", file = path(name);
  const std::string dead = std::to_string(dead_pid()), alive = std::to_string(::getpid());
  // Left by killed writes of this path: removed.
  touch(path(name + "." + dead + "-0.tmp"));
  touch(path(name + "." + dead + "-17.tmp"), 10);
  // A live process's: kept while fresh (a writer at work, or a reused pid), removed once an
  // hour old (its writer would have renamed it long ago).
  touch(path(name + "." + alive + "-900000.tmp"));
  touch(path(name + "." + alive + "-900001.tmp"), 2 * 3600);
  // Held locked by a writer (here: this process through another descriptor): kept, whatever
  // its pid and age.
  const std::string locked = path(name + "." + dead + "-5.tmp");
  touch(locked, 2 * 3600);
  const int fd = ::open(locked.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX), 0);
  // Not temporaries of this path: kept.
  for (const std::string& other :
       {name + ".backup", name + "." + dead + "-3.tmp.keep", name + "." + dead + ".tmp",
        name + ".x" + dead + "-3.tmp", "other." + dead + "-0.tmp", name + "x." + dead + "-0.tmp"})
    touch(path(other));
  const std::vector<std::string> before = files();
  nn::save_tensors(file, {{"w", ones({4})}});
  std::vector<std::string> expected = {name,
                                       name + "." + alive + "-900000.tmp",
                                       name + "." + dead + "-5.tmp",
                                       name + ".backup",
                                       name + "." + dead + "-3.tmp.keep",
                                       name + "." + dead + ".tmp",
                                       name + ".x" + dead + "-3.tmp",
                                       "other." + dead + "-0.tmp",
                                       name + "x." + dead + "-0.tmp"};
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(files(), expected) << before.size() << " files before";
  ::close(fd);  // the lock goes with it: its writer is gone
  nn::save_tensors(file, {{"w", ones({4})}});
  EXPECT_FALSE(fs::exists(locked));
}

}  // namespace
}  // namespace encore
