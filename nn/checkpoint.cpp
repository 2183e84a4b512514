#include "nn/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <tuple>
#include <utility>

#include "core/file.h"
#include "core/modes.h"
#include "ops/build_info.h"

namespace encore::nn {

// Tensor bytes are written and read as the host holds them.
static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

using json = nlohmann::json;

// The reference implementation's limit: a corrupt size cannot make us parse gigabytes.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr const char* kMetadata = "__metadata__";
constexpr std::string_view kReserved = "encore.";
constexpr const char* kFormatKey = "encore.format";
constexpr const char* kFormat = "1";
constexpr const char* kVersionKey = "encore.version";
constexpr const char* kDataCrcKey = "encore.data_crc32";
constexpr const char* kHeaderCrcKey = "encore.header_crc32";

constexpr std::pair<DType, const char*> kDTypes[] = {
    {DType::Float32, "F32"}, {DType::Float64, "F64"}, {DType::Int32, "I32"}, {DType::Int64, "I64"}};

const char* dtype_name(DType t) {
  for (const auto& [d, n] : kDTypes)
    if (d == t) return n;
  return "?";
}

std::optional<DType> dtype_from_name(const std::string& s) {
  for (const auto& [d, n] : kDTypes)
    if (s == n) return d;
  return std::nullopt;
}

uint32_t crc32_update(uint32_t crc, const void* data, size_t n) {
  // zlib returns the initial value, not an update, for a null buffer (an empty tensor's).
  if (n == 0) return crc;
  return static_cast<uint32_t>(::crc32_z(crc, static_cast<const Bytef*>(data), n));
}
uint32_t crc32_of(const std::string& s) { return crc32_update(0, s.data(), s.size()); }

std::string hex32(uint32_t v) {
  std::string s(8, '0');
  for (int i = 7; i >= 0; --i, v >>= 4) s[i] = "0123456789abcdef"[v & 15];
  return s;
}

std::optional<uint32_t> parse_hex32(const std::string& s) {
  if (s.size() != 8) return std::nullopt;
  uint32_t v = 0;
  for (char c : s) {
    const auto d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
    if (d < 0) return std::nullopt;
    v = v << 4 | static_cast<uint32_t>(d);
  }
  return v;
}

// The header as encore writes it: compact JSON (keys sorted) padded with spaces to 8 bytes, so
// that the data starts aligned, as the reference implementation does.
std::string header_text(const json& header) {
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

// ---- writing -------------------------------------------------------------------------------

std::string dump(const json& header, const std::string& path) {
  try {
    return header_text(header);
  } catch (const json::exception&) {
    throw ValueError(detail::cat("[save] cannot write ", path,
                                 ": a tensor name or metadata entry is not valid UTF-8"));
  }
}

// ---- reading -------------------------------------------------------------------------------

class ReadFile {
 public:
  explicit ReadFile(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    const int open_err = errno;
    if (fd_ < 0) throw_file_error("load", "read", path, "", open_err);
    struct stat st {};
    const int err = ::fstat(fd_, &st) != 0 ? errno : 0;
    try {
      if (err != 0) throw_file_error("load", "read", path, "", err);
      check_regular_file(st.st_mode, "load", "read", path);
    } catch (...) {
      ::close(fd_);
      throw;
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ReadFile(const ReadFile&) = delete;
  ReadFile& operator=(const ReadFile&) = delete;
  ~ReadFile() { ::close(fd_); }

  uint64_t size() const { return size_; }

  void read(void* dst, size_t n, uint64_t offset) const {
    char* p = static_cast<char*>(dst);
    while (n > 0) {
      const ssize_t r =
          ::pread(fd_, p, std::min<size_t>(n, size_t{1} << 30), static_cast<off_t>(offset));
      const int err = errno;
      if (r < 0 && err == EINTR) continue;
      if (r < 0) throw_file_error("load", "read", path_, "", err);
      ENCORE_CHECK(r > 0, ValueError, "[load] ", path_, " is truncated: it ended while being read");
      p += r;
      n -= static_cast<size_t>(r);
      offset += static_cast<uint64_t>(r);
    }
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// nlohmann keeps the last of two equal keys; the spec forbids them, so they are found here.
json parse_header(const std::string& text, const std::string& path) {
  std::vector<std::set<std::string>> keys;  // per open object
  std::optional<std::string> duplicate;
  const json::parser_callback_t find_duplicates = [&](int, json::parse_event_t event,
                                                      json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      keys.pop_back();
    } else if (event == json::parse_event_t::key &&
               !keys.back().insert(parsed.get<std::string>()).second) {
      if (!duplicate) duplicate = parsed.get<std::string>();
    }
    return true;
  };
  json header;
  try {
    header = json::parse(text, find_duplicates);
  } catch (const json::parse_error& e) {
    throw ValueError(detail::cat("[load] ", path, " is not a safetensors file: its header is not ",
                                 "valid JSON (error at byte ", e.byte, " of ", text.size(), ")"));
  }
  ENCORE_CHECK(!duplicate, ValueError, "[load] ", path, " names '", *duplicate,
               "' twice in its header");
  ENCORE_CHECK(header.is_object(), ValueError, "[load] ", path,
               " is not a safetensors file: its header is not a JSON object");
  return header;
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

Entry parse_entry(const std::string& name, const json& info, const std::string& path) {
  const auto fail = [&](const auto&... what) {
    return ValueError(detail::cat("[load] tensor '", name, "' in ", path, " ", what...));
  };
  const auto field = [&](const char* key) -> const json& {
    const auto it = info.find(key);
    if (it == info.end()) throw fail("has no '", key, "'");
    return *it;
  };
  if (!info.is_object()) throw fail("is not described by a JSON object");
  const json &dtype = field("dtype"), &dims = field("shape"), &offsets = field("data_offsets");
  if (info.size() != 3) throw fail("has fields other than dtype, shape and data_offsets");

  if (!dtype.is_string()) throw fail("has a dtype that is not a string");
  const auto t = dtype_from_name(dtype.get<std::string>());
  if (!t)
    throw fail("has dtype ", dtype.get<std::string>(),
               ", which encore does not support (F32, F64, I32, I64)");

  if (!dims.is_array() || dims.size() > static_cast<size_t>(kMaxDims))
    throw fail("has a shape that is not a list of at most ", kMaxDims, " sizes");
  Shape shape;
  // Strides are products of sizes, so the nonzero sizes' product (times the item size) must fit
  // in int64 even when a zero size makes the tensor empty.
  uint64_t product = itemsize(*t);
  bool empty = false;
  for (const json& d : dims) {
    if (!d.is_number_unsigned()) throw fail("has a shape with a size that is not a natural number");
    const auto n = d.get<uint64_t>();
    if (n != 0 && (__builtin_mul_overflow(product, n, &product) ||
                   product > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())))
      throw fail("has a shape whose element count overflows");
    empty |= n == 0;
    shape.push_back(static_cast<int64_t>(n));
  }
  const uint64_t nbytes = empty ? 0 : product;

  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned())
    throw fail("has data_offsets that are not two natural numbers");
  const auto begin = offsets[0].get<uint64_t>(), end = offsets[1].get<uint64_t>();
  if (end < begin || end - begin != nbytes)
    throw fail("has data_offsets [", begin, ", ", end, "] but its shape ", shape.str(),
               " and dtype ", dtype.get<std::string>(), " need ", nbytes, " bytes");
  return {name, *t, shape, begin, end};
}

Metadata parse_metadata(const json& header, const std::string& path) {
  Metadata metadata;
  const auto it = header.find(kMetadata);
  if (it == header.end()) return metadata;
  ENCORE_CHECK(it->is_object(), ValueError, "[load] ", path, " has a ", kMetadata,
               " that is not a map");
  for (const auto& [key, value] : it->items()) {
    ENCORE_CHECK(value.is_string(), ValueError, "[load] ", path, " has a ", kMetadata, " entry '",
                 key, "' that is not a string");
    metadata.emplace(key, value.get<std::string>());
  }
  return metadata;
}

// Checks what encore wrote into the header: the header is exactly as encore writes it (so any
// change to its bytes shows) and its checksum matches. Returns the expected data checksum.
uint32_t verify_encore_header(const json& header, const std::string& text, const Metadata& metadata,
                              const std::string& path) {
  for (const char* key : {kFormatKey, kVersionKey, kDataCrcKey, kHeaderCrcKey})
    ENCORE_CHECK(metadata.count(key), ValueError, "[load] ", path,
                 " is corrupt: its encore metadata lacks '", key, "'");
  ENCORE_CHECK(
      header_text(header) == text, ValueError, "[load] ", path,
      " is corrupt: its header is not as encore wrote it (a file rewritten by another tool ",
      "loads once its encore.* metadata is removed)");
  json unsigned_header = header;
  unsigned_header[kMetadata].erase(kHeaderCrcKey);
  const auto stored = parse_hex32(metadata.at(kHeaderCrcKey));
  const uint32_t computed = crc32_of(header_text(unsigned_header));
  ENCORE_CHECK(stored == computed, ValueError, "[load] ", path,
               " is corrupt: the header checksum is ", metadata.at(kHeaderCrcKey),
               " but the header gives ", hex32(computed));
  ENCORE_CHECK(metadata.at(kFormatKey) == kFormat, ValueError, "[load] ", path,
               " has encore format ", metadata.at(kFormatKey), " (written by encore ",
               metadata.at(kVersionKey), "); this encore (", version(), ") reads format ", kFormat);
  const auto data_crc = parse_hex32(metadata.at(kDataCrcKey));
  ENCORE_CHECK(data_crc, ValueError, "[load] ", path, " is corrupt: '", kDataCrcKey,
               "' is not a checksum");
  return *data_crc;
}

}  // namespace

void save_tensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
  check_path(path, "save");
  json header = json::object();
  std::vector<Tensor> host;
  uint64_t offset = 0;
  uint32_t data_crc = 0;
  for (const auto& [name, t] : tensors) {
    ENCORE_CHECK(!name.empty() && name != kMetadata, ValueError, "[save] '", name,
                 "' cannot name a tensor in ", path);
    ENCORE_CHECK(!header.contains(name), ValueError, "[save] tensor '", name,
                 "' is given twice for ", path);
    ENCORE_CHECK(t.defined(), ValueError, "[save] tensor '", name, "' is undefined");
    Tensor h = t.detach().to(Device::cpu()).contiguous();
    header[name] = {{"dtype", dtype_name(h.dtype())},
                    {"shape", h.shape().vec()},
                    {"data_offsets", json::array({offset, offset + h.nbytes()})}};
    offset += h.nbytes();
    data_crc = crc32_update(data_crc, h.data_ptr(), h.nbytes());
    host.push_back(std::move(h));
  }
  json& meta = header[kMetadata] = json::object();
  for (const auto& [key, value] : metadata) {
    ENCORE_CHECK(!key.starts_with(kReserved), ValueError, "[save] metadata key '", key,
                 "' is reserved: keys starting with 'encore.' are written by encore");
    meta[key] = value;
  }
  meta[kFormatKey] = kFormat;
  meta[kVersionKey] = version();
  meta[kDataCrcKey] = hex32(data_crc);
  // The header checksum covers the header as written, less the checksum itself.
  meta[kHeaderCrcKey] = hex32(crc32_of(dump(header, path)));
  const std::string text = dump(header, path);
  ENCORE_CHECK(text.size() <= kMaxHeaderBytes, ValueError, "[save] the header of ", path,
               " would have ", text.size(), " bytes, more than the ", kMaxHeaderBytes,
               " bytes load accepts: shorten the metadata or the tensor names");

  unsigned char size[8];
  for (int i = 0; i < 8; ++i) size[i] = static_cast<unsigned char>(text.size() >> (8 * i));
  AtomicFile file(path, "save");
  file.write(size, sizeof size);
  file.write(text.data(), text.size());
  for (const Tensor& h : host) file.write(h.data_ptr(), h.nbytes());
  file.commit();
}

TensorFile load_tensors(const std::string& path) {
  check_path(path, "load");
  const ReadFile file(path);
  ENCORE_CHECK(file.size() >= 8, ValueError, "[load] ", path, " is not a safetensors file: it has ",
               file.size(), " bytes, fewer than the 8 of its header size");
  unsigned char size[8];
  file.read(size, sizeof size, 0);
  uint64_t header_size = 0;
  for (int i = 7; i >= 0; --i) header_size = header_size << 8 | size[i];
  ENCORE_CHECK(header_size <= kMaxHeaderBytes, ValueError, "[load] ", path,
               " is not a safetensors file: its header size ", header_size, " exceeds ",
               kMaxHeaderBytes, " bytes");
  ENCORE_CHECK(header_size <= file.size() - 8, ValueError, "[load] ", path,
               " is truncated: its header has ", header_size, " bytes but the file only ",
               file.size() - 8, " after the header size");
  std::string text(header_size, '\0');
  file.read(text.data(), text.size(), 8);

  const json header = parse_header(text, path);
  TensorFile out;
  out.metadata = parse_metadata(header, path);
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items())
    if (name != kMetadata) entries.push_back(parse_entry(name, info, path));

  const bool by_encore = std::any_of(out.metadata.begin(), out.metadata.end(), [](const auto& kv) {
    return kv.first.starts_with(kReserved);
  });
  const uint32_t expected_crc =
      by_encore ? verify_encore_header(header, text, out.metadata, path) : 0;

  // The tensors must tile the data section exactly: no overlap, no gap, nothing after.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  const uint64_t data_size = file.size() - 8 - header_size;
  uint64_t at = 0;
  for (const Entry& e : entries) {
    ENCORE_CHECK(e.begin <= at, ValueError, "[load] tensor '", e.name, "' in ", path, " leaves ",
                 e.begin - at, " bytes unused before it");
    ENCORE_CHECK(e.begin == at, ValueError, "[load] tensor '", e.name, "' in ", path,
                 " overlaps the tensor before it");
    at = e.end;
  }
  ENCORE_CHECK(at <= data_size, ValueError, "[load] ", path, " is truncated: its tensors need ", at,
               " bytes of data but it has ", data_size);
  ENCORE_CHECK(at == data_size, ValueError, "[load] ", path, " has ", data_size - at,
               " bytes of trailing data after its last tensor");

  uint32_t crc = 0;
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    file.read(t.data_ptr(), e.end - e.begin, 8 + header_size + e.begin);
    crc = crc32_update(crc, t.data_ptr(), e.end - e.begin);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  ENCORE_CHECK(!by_encore || expected_crc == crc, ValueError, "[load] ", path,
               " is corrupt: the data checksum is ", hex32(expected_crc), " but the data gives ",
               hex32(crc));
  return out;
}

void save(const Module& module, const std::string& path) {
  save_tensors(path, module.named_weights());
}

void load(Module& module, const std::string& path) {
  const TensorFile file = load_tensors(path);
  // A training checkpoint (nn/resume.h): its model part.
  const std::string prefix = file.metadata.count("checkpoint.parts") ? "model/" : "";
  std::map<std::string, const Tensor*> in_file;
  for (const auto& [name, t] : file.tensors)
    if (name.starts_with(prefix)) in_file.emplace(name.substr(prefix.size()), &t);
  const NamedTensors params = module.named_weights();
  std::set<std::string> names;
  for (const auto& [name, p] : params) {
    ENCORE_CHECK(names.insert(name).second, ValueError,
                 "[load] the model has two parameters named '", name, "'");
    const auto it = in_file.find(name);
    ENCORE_CHECK(it != in_file.end(), ValueError, "[load] ", path, " has no tensor '", name,
                 "' for the model's parameter ", describe(p));
    const Tensor& t = *it->second;
    ENCORE_CHECK(t.shape() == p.shape(), ShapeError, "[load] parameter '", name, "' is ",
                 p.shape().str(), " in the model but ", t.shape().str(), " in ", path);
    ENCORE_CHECK(t.dtype() == p.dtype(), ValueError, "[load] parameter '", name, "' is ",
                 encore::name(p.dtype()), " in the model but ", encore::name(t.dtype()), " in ",
                 path);
  }
  for (const auto& [name, t] : in_file)
    ENCORE_CHECK(names.count(name), ValueError, "[load] tensor '", prefix + name, "' in ", path,
                 " is not a parameter of the model",
                 params.empty() ? " (the model has none: build it first)" : "");
  NoGradGuard no_grad;
  for (const auto& [name, p] : params) Tensor(p).copy_(*in_file.at(name));
}

}  // namespace encore::nn
