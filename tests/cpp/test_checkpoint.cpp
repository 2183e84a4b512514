// Checkpoint files (nn/checkpoint.h): safetensors round trips, strict all-or-nothing loads of
// truncated, corrupt and mismatched files, hostile headers, and atomic saves under SIGKILL and
// a full disk.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/modes.h"
#include "helpers.h"
#include "nn/checkpoint.h"
#include "nn/layers.h"

namespace encore {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

void write_bytes(const std::string& path, const std::string& bytes) {
  // A new file rather than a truncated one: ext4 flushes a truncated and rewritten file on close.
  std::filesystem::remove(path);
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A safetensors file from a raw header and data, as another tool (or an attacker) writes it.
std::string safetensors_bytes(const std::string& header, const std::string& data, uint64_t size) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(size >> (8 * i));
  return out + header + data;
}
std::string safetensors_bytes(const std::string& header, const std::string& data = "") {
  return safetensors_bytes(header, data, header.size());
}

// One header entry: "name":{"dtype":...,"shape":...,"data_offsets":...}.
std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return R"(")" + name + R"(":{"dtype":")" + dtype + R"(","shape":)" + shape +
         R"(,"data_offsets":)" + offsets + "}";
}

std::string bytes_of(const std::vector<float>& v) {
  return {reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)};
}

// Dense(3) on 2 features, in float32: a kernel (2, 3) and a bias (3), both random.
std::unique_ptr<nn::Sequential> small_model(uint64_t seed, DType dtype = DType::Float32) {
  auto m = std::make_unique<nn::Sequential>();
  m->add<nn::Dense>(3);
  m->build({1, 2});
  m->to(dtype);
  NoGradGuard no_grad;
  uint64_t s = seed;
  for (Tensor p : m->parameters()) p.copy_(test::rand64(p.shape(), s++).to(dtype));
  return m;
}

std::vector<Tensor> snapshot(const nn::Module& m) {
  std::vector<Tensor> out;
  for (const Tensor& p : m.parameters()) out.push_back(p.detach().clone());
  return out;
}

bool unchanged(const nn::Module& m, const std::vector<Tensor>& before) {
  const auto params = m.parameters();
  for (size_t i = 0; i < params.size(); ++i)
    if (!test::bitwise_equal(params[i], before[i])) return false;
  return true;
}

// Expects `load` to throw an encore error of kind E whose message has `needle`, and the model
// to be as it was.
template <class E = Error>
void expect_load_fails(nn::Module& m, const std::string& path, const std::string& needle) {
  const auto before = snapshot(m);
  try {
    nn::load(m, path);
    ADD_FAILURE() << "loading " << path << " did not fail (expected '" << needle << "')";
  } catch (const E& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    EXPECT_EQ(std::string(e.what()).rfind("[load] ", 0), 0u) << e.what();
  }
  EXPECT_TRUE(unchanged(m, before)) << "a failed load of " << path << " changed the model";
}

// Writes `bytes` to `file` and expects load_tensors to throw a ValueError with `needle`.
void expect_load_tensors_fails(const std::string& file, const std::string& bytes,
                               const std::string& needle) {
  write_bytes(file, bytes);
  try {
    nn::load_tensors(file);
    ADD_FAILURE() << "no error for a file that should fail with '" << needle << "'";
  } catch (const ValueError& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

class Checkpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string pattern = ::testing::TempDir() + "encore_ckpt_XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
  }
  void TearDown() override {
    ::chmod(dir_.c_str(), 0700);
    fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return dir_ + "/" + name; }
  std::vector<std::string> files() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string dir_;
};

TEST_F(Checkpoint, ModelRoundTripIsBitwiseInFloat32AndFloat64) {
  for (DType dtype : {DType::Float32, DType::Float64}) {
    manual_seed(3);
    nn::Sequential a, b;
    a.add<nn::Conv1D>(4, 3);
    a.add<nn::Dense>(2);
    b.add<nn::Conv1D>(4, 3);
    b.add<nn::Dense>(2);
    a.build({1, 5, 2});
    b.build({1, 5, 2});
    a.to(dtype);
    b.to(dtype);
    NoGradGuard no_grad;
    uint64_t seed = 1;
    for (Tensor p : a.parameters()) p.copy_(test::rand64(p.shape(), seed++).to(dtype));
    const std::string file = path("model.safetensors");
    nn::save(a, file);
    nn::load(b, file);
    const auto pa = a.named_parameters(), pb = b.named_parameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      EXPECT_EQ(pa[i].first, pb[i].first);
      EXPECT_TRUE(test::bitwise_equal(pa[i].second, pb[i].second)) << pa[i].first;
    }
    EXPECT_EQ(files(), std::vector<std::string>{"model.safetensors"});  // no temporary file left
  }
}

TEST_F(Checkpoint, TensorsRoundTripWithEveryDTypeAndMetadata) {
  const Tensor f32 = test::rand32({2, 3}), f64 = test::rand64({4});
  const Tensor i32 = arange(0, 6, 1, DType::Int32).reshape({3, 2});
  const Tensor i64 = full({}, -(int64_t{1} << 40), DType::Int64);  // a rank-0 tensor
  const Tensor empty = Tensor::empty({0, 5}, DType::Float32);
  const nn::NamedTensors tensors = {
      {"f32", f32}, {"f64", f64}, {"i32", i32}, {"i64", i64}, {"empty", empty}};
  const std::string file = path("t.safetensors");
  nn::save_tensors(file, tensors, {{"optimizer", "adam"}, {"step", "12"}});
  const nn::TensorFile loaded = nn::load_tensors(file);
  ASSERT_EQ(loaded.tensors.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {  // file order is the order given
    EXPECT_EQ(loaded.tensors[i].first, tensors[i].first);
    EXPECT_TRUE(test::bitwise_equal(loaded.tensors[i].second, tensors[i].second))
        << tensors[i].first;
  }
  EXPECT_EQ(loaded.metadata.at("optimizer"), "adam");
  EXPECT_EQ(loaded.metadata.at("step"), "12");
  EXPECT_EQ(loaded.metadata.at("encore.format"), "1");
  EXPECT_FALSE(loaded.metadata.at("encore.version").empty());
  EXPECT_EQ(loaded.metadata.at("encore.data_crc32").size(), 8u);
  // The header is padded to 8 bytes, so the data starts aligned.
  EXPECT_EQ(static_cast<unsigned char>(read_bytes(file)[0]) % 8, 0);
}

TEST_F(Checkpoint, SaveRejectsBadNamesAndReservedMetadata) {
  const Tensor t = ones({2});
  const std::string file = path("bad.safetensors");
  EXPECT_THROW(nn::save_tensors(file, {{"a", t}, {"a", t}}), ValueError);
  EXPECT_THROW(nn::save_tensors(file, {{"", t}}), ValueError);
  EXPECT_THROW(nn::save_tensors(file, {{"__metadata__", t}}), ValueError);
  EXPECT_THROW(nn::save_tensors(file, {{"a", Tensor()}}), ValueError);
  EXPECT_THROW(nn::save_tensors(file, {{"a", t}}, {{"encore.format", "2"}}), ValueError);
  EXPECT_THROW(nn::save_tensors(file, {{"a", t}}, {{"note", "\xff"}}), ValueError);  // not UTF-8
  EXPECT_TRUE(files().empty());
}

TEST_F(Checkpoint, EveryTruncationFailsAndLeavesTheModelUntouched) {
  const auto a = small_model(1);
  const std::string good = path("good.safetensors"), cut = path("cut.safetensors");
  nn::save(*a, good);
  const std::string bytes = read_bytes(good);
  ASSERT_GT(bytes.size(), 100u);
  auto b = small_model(2);
  const auto before = snapshot(*b);
  for (size_t n = 0; n < bytes.size(); ++n) {
    write_bytes(cut, bytes.substr(0, n));
    EXPECT_THROW(nn::load(*b, cut), ValueError) << "truncated to " << n << " of " << bytes.size();
    ASSERT_TRUE(unchanged(*b, before)) << "truncated to " << n;
  }
  nn::load(*b, good);
  EXPECT_TRUE(unchanged(*b, snapshot(*a)));
}

TEST_F(Checkpoint, EverySingleBitFlipIsDetected) {
  const auto a = small_model(1);
  const std::string good = path("good.safetensors"), bad = path("bad.safetensors");
  nn::save(*a, good);
  const std::string bytes = read_bytes(good);
  auto b = small_model(2);
  const auto before = snapshot(*b);
  int loaded = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    for (int bit = 0; bit < 8; ++bit) {
      std::string flipped = bytes;
      flipped[i] = static_cast<char>(flipped[i] ^ (1 << bit));
      write_bytes(bad, flipped);
      try {
        nn::load(*b, bad);
        ++loaded;
        ADD_FAILURE() << "flipping bit " << bit << " of byte " << i << " went unnoticed";
      } catch (const ValueError& e) {  // ShapeError derives from it too
        EXPECT_NE(std::string(e.what()).find(bad), std::string::npos) << e.what();
      }
      ASSERT_TRUE(unchanged(*b, before)) << "bit " << bit << " of byte " << i;
    }
  }
  EXPECT_EQ(loaded, 0);
}

TEST_F(Checkpoint, MismatchedFilesAreErrorsAndLeaveTheModelUntouched) {
  auto m = small_model(1);
  ASSERT_EQ(m->named_parameters()[0].first, "dense.kernel");
  ASSERT_EQ(m->named_parameters()[1].first, "dense.bias");
  const std::string file = path("m.safetensors");
  // The first tensor matches each time: a load that wrote as it went would change the model.
  nn::save_tensors(file, {{"dense.kernel", ones({2, 3})}});
  expect_load_fails(*m, file, "has no tensor 'dense.bias'");
  nn::save_tensors(
      file, {{"dense.kernel", ones({2, 3})}, {"dense.bias", ones({3})}, {"extra", ones({1})}});
  expect_load_fails(*m, file, "tensor 'extra' in " + file + " is not a parameter");
  nn::save_tensors(file, {{"dense.kernel", ones({2, 3})}, {"dense.bias", ones({4})}});
  expect_load_fails<ShapeError>(*m, file,
                                "parameter 'dense.bias' is (3,) in the model but (4,) in " + file);
  nn::save_tensors(file,
                   {{"dense.kernel", ones({2, 3})}, {"dense.bias", ones({3}, DType::Float64)}});
  expect_load_fails(*m, file,
                    "parameter 'dense.bias' is float32 in the model but float64 in " + file);
  // A duplicate name can only come from another writer.
  const std::string kernel = entry("dense.kernel", "F32", "[2,3]", "[0,24]");
  write_bytes(file,
              safetensors_bytes("{" + kernel + "," + entry("dense.bias", "F32", "[3]", "[24,36]") +
                                    "," + entry("dense.bias", "F32", "[3]", "[36,48]") + "}",
                                std::string(48, '\0')));
  expect_load_fails(*m, file, "names 'dense.bias' twice");
  // Trailing garbage, after an encore file and after another writer's.
  nn::save(*small_model(5), file);
  write_bytes(file, read_bytes(file) + "x");
  expect_load_fails(*m, file, "1 bytes of trailing data");
  write_bytes(file, safetensors_bytes(
                        "{" + kernel + "," + entry("dense.bias", "F32", "[3]", "[24,36]") + "}",
                        std::string(40, '\0')));
  expect_load_fails(*m, file, "4 bytes of trailing data");
  expect_load_fails<FileError>(*m, path("missing.safetensors"), "No such file or directory");
  expect_load_fails<FileError>(*m, dir_, "it is a directory");
  // A model that is not built has no parameters to load into.
  nn::Sequential unbuilt;
  unbuilt.add<nn::Dense>(3);
  nn::save(*m, file);
  expect_load_fails(unbuilt, file, "build it first");
}

TEST_F(Checkpoint, OtherWritersFilesLoadWithoutChecksums) {
  const std::vector<float> kernel = {1, 2, 3, 4, 5, 6}, bias = {-1, -2, -3};
  const std::string file = path("other.safetensors");
  // Any key order, any data order, optional padding, metadata of their own.
  write_bytes(file, safetensors_bytes("{" + entry("dense.bias", "F32", "[3]", "[0,12]") +
                                          R"(,"__metadata__":{"format":"pt"},)" +
                                          entry("dense.kernel", "F32", "[2,3]", "[12,36]") + "}   ",
                                      bytes_of(bias) + bytes_of(kernel)));
  auto m = small_model(1);
  nn::load(*m, file);
  test::expect_values(m->named_parameters()[0].second, {1, 2, 3, 4, 5, 6}, 0);
  test::expect_values(m->named_parameters()[1].second, {-1, -2, -3}, 0);
  EXPECT_EQ(nn::load_tensors(file).metadata, (nn::Metadata{{"format", "pt"}}));
}

TEST_F(Checkpoint, HostileHeadersAreErrorsWithoutHugeAllocations) {
  const std::string file = path("hostile.safetensors");
  const auto expect_error = [&](const std::string& bytes, const std::string& needle) {
    expect_load_tensors_fails(file, bytes, needle);
  };
  const auto only = [](const std::string& dtype, const std::string& shape,
                       const std::string& offsets) {
    return "{" + entry("t", dtype, shape, offsets) + "}";
  };
  expect_error("", "fewer than the 8");
  expect_error(safetensors_bytes("{}", "", ~uint64_t{0}),
               "header size 18446744073709551615 exceeds");
  expect_error(safetensors_bytes("{}", "", 100'000'001), "exceeds 100000000 bytes");
  expect_error(safetensors_bytes("{}", "", 99'999'999),
               "is truncated: its header has 99999999 bytes");
  expect_error(safetensors_bytes("[1, 2]"), "not a JSON object");
  expect_error(safetensors_bytes("{\"t\":"), "not valid JSON");
  expect_error(safetensors_bytes(only("F32", "[1]", "[0,4]"), "\x01\x02"),
               "is truncated: its tensors need 4 bytes of data but it has 2");
  expect_error(safetensors_bytes(only("F32", "[1099511627776]", "[0,4398046511104]")),
               "need 4398046511104 bytes of data but it has 0");
  expect_error(safetensors_bytes(only("F32", "[1]", "[18446744073709551612,0]")), "need 4 bytes");
  expect_error(safetensors_bytes(only("F32", "[1]", "[18446744073709551615,3]")), "need 4 bytes");
  expect_error(safetensors_bytes(only("F32", "[4611686018427387904,4]", "[0,0]")),
               "element count overflows");
  expect_error(safetensors_bytes(only("F64", "[1152921504606846976]", "[0,0]")),
               "element count overflows");
  // Empty, yet its strides would overflow.
  expect_error(safetensors_bytes(only("F32", "[0,4294967296,4294967296]", "[0,0]")),
               "element count overflows");
  expect_error(safetensors_bytes(only("F32", "[-1]", "[0,0]")), "not a natural number");
  expect_error(safetensors_bytes(only("F32", "[1.5]", "[0,0]")), "not a natural number");
  expect_error(safetensors_bytes(only("F32", "[1,1,1,1,1,1,1,1,1]", "[0,4]"), "abcd"),
               "at most 8 sizes");
  expect_error(safetensors_bytes(only("F16", "[2]", "[0,4]"), "abcd"),
               "tensor 't' in " + file + " has dtype F16, which encore does not support");
  expect_error(safetensors_bytes(only("F32", "[1]", "[0]"), "abcd"), "not two natural numbers");
  expect_error(safetensors_bytes(R"({"t":{"dtype":"F32","shape":[1]}})"), "has no 'data_offsets'");
  expect_error(
      safetensors_bytes(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4],"x":1}})", "abcd"),
      "fields other than");
  expect_error(safetensors_bytes(R"({"t":[]})"), "not described by a JSON object");
  expect_error(safetensors_bytes(R"({"__metadata__":{"a":1}})"), "entry 'a' that is not a string");
  expect_error(safetensors_bytes("{" + entry("a", "F32", "[1]", "[0,4]") + "," +
                                     entry("b", "F32", "[1]", "[2,6]") + "}",
                                 std::string(6, '\0')),
               "tensor 'b' in " + file + " overlaps");
  expect_error(safetensors_bytes(only("F32", "[1]", "[4,8]"), std::string(8, '\0')),
               "leaves 4 bytes unused before it");
  // Claims to be encore's but lacks the checksums.
  expect_error(safetensors_bytes(R"({"__metadata__":{"encore.format":"1"}})"),
               "lacks 'encore.version'");
}

TEST_F(Checkpoint, EncoreFilesAreVerified) {
  const std::string file = path("f.safetensors");
  const auto expect_error = [&](const std::string& bytes, const std::string& needle) {
    expect_load_tensors_fails(file, bytes, needle);
  };
  nn::save_tensors(file, {{"a", ones({2})}});
  const std::string bytes = read_bytes(file);
  const uint64_t header_size =
      static_cast<unsigned char>(bytes[0]) | static_cast<unsigned char>(bytes[1]) << 8;
  const std::string header = bytes.substr(8, header_size), data = bytes.substr(8 + header_size);
  std::string last_changed = bytes;
  last_changed.back() = static_cast<char>(last_changed.back() ^ 1);
  expect_error(last_changed, "the data checksum is");
  // The same JSON written differently, as another tool rewriting the file would.
  expect_error(safetensors_bytes(" " + header, data), "its header is not as encore wrote it");
  std::string forged = header;
  forged.replace(forged.find(R"("encore.format":"1")"), 19, R"("encore.format":"7")");
  expect_error(safetensors_bytes(forged, data), "the header checksum is");
}

// ---- atomic saves ----------------------------------------------------------------------------

// "<digits>-<digits>": the pid and counter of a temporary file's name.
bool pid_and_counter(std::string_view s) {
  const size_t dash = s.find('-');
  auto digits = [](std::string_view d) {
    return !d.empty() &&
           std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  return dash != std::string_view::npos && digits(s.substr(0, dash)) && digits(s.substr(dash + 1));
}

// Files other than `target` in the folder must be temporary files of the documented pattern,
// "<target>.<pid>-<n>.tmp".
void expect_only_temporary_files(const std::vector<std::string>& names, const std::string& target) {
  for (const auto& n : names) {
    if (n == target) continue;
    const std::string_view v = n;
    const bool temporary =
        v.size() > target.size() + 5 && v.substr(0, target.size() + 1) == target + "." &&
        v.substr(v.size() - 4) == ".tmp" &&
        pid_and_counter(v.substr(target.size() + 1, v.size() - target.size() - 5));
    EXPECT_TRUE(temporary) << "unexpected file " << n;
  }
}

TEST_F(Checkpoint, SigkillDuringSavesLeavesTheOldOrTheNewFile) {
  // Two checkpoints of 8 MB each, distinguishable everywhere.
  const nn::NamedTensors a = {{"w", full({1 << 20}, 1.0, DType::Float32)},
                              {"v", full({1 << 20}, 2.0, DType::Float32)}};
  const nn::NamedTensors b = {{"w", full({1 << 20}, 3.0, DType::Float32)},
                              {"v", full({1 << 20}, 4.0, DType::Float32)}};
  const std::string file = path("ckpt.safetensors");
  const auto start = std::chrono::steady_clock::now();
  nn::save_tensors(file, a);
  // Kill moments spread over a few saves' time, so that kills land in every phase of one.
  const auto save_us = std::chrono::duration_cast<std::chrono::microseconds>(
      std::chrono::steady_clock::now() - start);
  std::uniform_int_distribution<int64_t> moment(0, 4 * save_us.count() + 1000);
  std::mt19937 rng(12345);
  int got_a = 0, got_b = 0;
  for (int kill = 0; kill < 40; ++kill) {
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      // Saves until killed; bounded so that an orphan ends on its own.
      for (int i = 0; i < 2000; ++i) nn::save_tensors(file, i % 2 ? a : b);
      ::_exit(0);
    }
    ::usleep(static_cast<useconds_t>(moment(rng)));
    ASSERT_EQ(::kill(child, SIGKILL), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << "the child ended on its own";
    const nn::TensorFile loaded = nn::load_tensors(file);  // never torn, never missing
    ASSERT_EQ(loaded.tensors.size(), 2u);
    const bool is_a = test::bitwise_equal(loaded.tensors[0].second, a[0].second) &&
                      test::bitwise_equal(loaded.tensors[1].second, a[1].second);
    const bool is_b = test::bitwise_equal(loaded.tensors[0].second, b[0].second) &&
                      test::bitwise_equal(loaded.tensors[1].second, b[1].second);
    ASSERT_TRUE(is_a || is_b) << "after kill " << kill;
    got_a += is_a;
    got_b += is_b;
  }
  EXPECT_EQ(got_a + got_b, 40);
  expect_only_temporary_files(files(), "ckpt.safetensors");
  // The next save removes the temporaries the killed ones left (their writers are gone) and
  // leaves none of its own.
  nn::save_tensors(file, b);
  EXPECT_EQ(files(), std::vector<std::string>{"ckpt.safetensors"});
  EXPECT_TRUE(test::bitwise_equal(nn::load_tensors(file).tensors[0].second, b[0].second));
}

// Lowers the file size limit of this process, and ignores SIGXFSZ so that a write past it fails
// with EFBIG instead of killing the process; both are restored afterwards.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &saved_);
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);
    rlimit limit = saved_;
    limit.rlim_cur = bytes;
    ::setrlimit(RLIMIT_FSIZE, &limit);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &saved_);
    ::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit saved_{};
  sighandler_t old_handler_;
};

TEST_F(Checkpoint, AFullDiskIsAnErrorAndKeepsThePreviousFile) {
  const std::string file = path("ckpt.safetensors");
  const nn::NamedTensors small = {{"w", ones({4})}};
  nn::save_tensors(file, small);
  const std::string before = read_bytes(file);
  {
    FileSizeLimit limit(64 * 1024);
    try {
      nn::save_tensors(file, {{"w", ones({1 << 20})}});
      ADD_FAILURE() << "a save past the file size limit reported success";
    } catch (const FileError& e) {
      EXPECT_NE(std::string(e.what()).find("[save] cannot write " + file), std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("File too large"), std::string::npos) << e.what();
      EXPECT_EQ(e.code(), EFBIG);
      EXPECT_EQ(e.path(), file);
    }
  }
  EXPECT_EQ(read_bytes(file), before);
  EXPECT_EQ(files(), std::vector<std::string>{"ckpt.safetensors"});
}

TEST_F(Checkpoint, FailedSavesLeaveNoTemporaryFile) {
  const nn::NamedTensors t = {{"w", ones({4})}};
  // A missing folder.
  try {
    nn::save_tensors(path("missing/ckpt.safetensors"), t);
    ADD_FAILURE() << "saving into a missing folder succeeded";
  } catch (const FileError& e) {
    EXPECT_EQ(e.code(), ENOENT) << e.what();
  }
  // A folder is not replaced: refused before anything is written.
  fs::create_directory(path("taken"));
  try {
    nn::save_tensors(path("taken"), t);
    ADD_FAILURE() << "saving over a folder succeeded";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("it is a directory"), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), EISDIR);
  }
  EXPECT_EQ(files(), std::vector<std::string>{"taken"});
  // No permission to write in the folder (root ignores permissions).
  if (::geteuid() != 0) {
    const std::string file = path("ckpt.safetensors");
    nn::save_tensors(file, t);
    const std::string before = read_bytes(file);
    ::chmod(dir_.c_str(), 0500);
    try {
      nn::save_tensors(file, {{"w", zeros({4})}});
      ADD_FAILURE() << "saving into a read-only folder succeeded";
    } catch (const FileError& e) {
      EXPECT_EQ(e.code(), EACCES) << e.what();
    }
    ::chmod(dir_.c_str(), 0700);
    EXPECT_EQ(read_bytes(file), before);
    EXPECT_EQ(files(), (std::vector<std::string>{"ckpt.safetensors", "taken"}));
  }
}

}  // namespace
}  // namespace encore
