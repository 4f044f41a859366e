#include "engine/model/gguf.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <mutex>

namespace vkmoe {

namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint64_t kDefaultAlignment = 32;

bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

bool is_unsigned_int(GgufType t) {
  return t == GgufType::UINT8 || t == GgufType::UINT16 || t == GgufType::UINT32 ||
         t == GgufType::UINT64;
}
bool is_signed_int(GgufType t) {
  return t == GgufType::INT8 || t == GgufType::INT16 || t == GgufType::INT32 ||
         t == GgufType::INT64;
}
bool is_int(GgufType t) { return is_unsigned_int(t) || is_signed_int(t); }
bool is_float(GgufType t) { return t == GgufType::FLOAT32 || t == GgufType::FLOAT64; }

// Encoded size of a fixed-size scalar, 0 for STRING/ARRAY/unknown.
size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8:
    case GgufType::INT8:
    case GgufType::BOOL: return 1;
    case GgufType::UINT16:
    case GgufType::INT16: return 2;
    case GgufType::UINT32:
    case GgufType::INT32:
    case GgufType::FLOAT32: return 4;
    case GgufType::UINT64:
    case GgufType::INT64:
    case GgufType::FLOAT64: return 8;
    default: return 0;
  }
}

bool is_valid_value_type(uint32_t id) { return id <= static_cast<uint32_t>(GgufType::FLOAT64); }

// Smallest number of bytes one element of type t can occupy in a file.
uint64_t min_encoded_size(GgufType t) {
  if (t == GgufType::STRING) return 8;     // u64 length
  if (t == GgufType::ARRAY) return 4 + 8;  // element type + count
  return scalar_size(t);
}

// Names of ggml type ids that ggml defines but vkmoe may not, for messages.
const char* ggml_type_id_name(uint32_t id) {
  switch (id) {
    case 4: return "Q4_2 (removed from ggml)";
    case 5: return "Q4_3 (removed from ggml)";
    case 16: return "IQ2_XXS";
    case 17: return "IQ2_XS";
    case 18: return "IQ3_XXS";
    case 19: return "IQ1_S";
    case 20: return "IQ4_NL";
    case 21: return "IQ3_S";
    case 22: return "IQ2_S";
    case 23: return "IQ4_XS";
    case 24: return "I8";
    case 25: return "I16";
    case 26: return "I32";
    case 27: return "I64";
    case 28: return "F64";
    case 29: return "IQ1_M";
    case 34: return "TQ1_0";
    case 35: return "TQ2_0";
    case 39: return "MXFP4";
    default: return nullptr;
  }
}

uint64_t align_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Bounds-checked little-endian cursor over the file bytes.
class Cursor {
 public:
  Cursor(const uint8_t* p, size_t n, const std::string& path) : p_(p), n_(n), path_(path) {}

  [[noreturn]] void fail(const std::string& what) const { throw Error(path_ + ": " + what); }

  size_t pos() const { return pos_; }
  const uint8_t* here() const { return p_ + pos_; }
  size_t remaining() const { return n_ - pos_; }

  void need(uint64_t bytes, const char* what) const {
    if (bytes > remaining())
      fail("truncated or corrupt: " + std::string(what) + " at offset " + std::to_string(pos_) +
           " needs " + std::to_string(bytes) + " bytes but only " + std::to_string(remaining()) +
           " remain in the file");
  }
  void skip(uint64_t bytes, const char* what) {
    need(bytes, what);
    pos_ += bytes;
  }
  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof(T));  // the format and all our hosts are little-endian
    pos_ += sizeof(T);
    return v;
  }
  std::string read_str(const char* what) {
    uint64_t len = read<uint64_t>(what);
    need(len, what);
    std::string s(reinterpret_cast<const char*>(p_ + pos_), len);
    pos_ += len;
    return s;
  }
  void skip_str(const char* what) { skip(read<uint64_t>(what), what); }

 private:
  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0;
  const std::string& path_;
};

// Reads one scalar of type t into v (fields as documented in gguf.h).
void read_scalar(Cursor& c, GgufType t, GgufValue& v, const std::string& key) {
  v.type = t;
  auto set_signed = [&](int64_t x) {
    v.i = x;
    if (x >= 0) v.u = static_cast<uint64_t>(x);
  };
  auto set_unsigned = [&](uint64_t x) {
    v.u = x;
    if (x <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      v.i = static_cast<int64_t>(x);
  };
  switch (t) {
    case GgufType::UINT8: set_unsigned(c.read<uint8_t>("value")); break;
    case GgufType::INT8: set_signed(c.read<int8_t>("value")); break;
    case GgufType::UINT16: set_unsigned(c.read<uint16_t>("value")); break;
    case GgufType::INT16: set_signed(c.read<int16_t>("value")); break;
    case GgufType::UINT32: set_unsigned(c.read<uint32_t>("value")); break;
    case GgufType::INT32: set_signed(c.read<int32_t>("value")); break;
    case GgufType::UINT64: set_unsigned(c.read<uint64_t>("value")); break;
    case GgufType::INT64: set_signed(c.read<int64_t>("value")); break;
    case GgufType::FLOAT32: v.f = c.read<float>("value"); break;
    case GgufType::FLOAT64: v.f = c.read<double>("value"); break;
    case GgufType::BOOL: {
      uint8_t b = c.read<uint8_t>("value");
      if (b > 1)
        c.fail("key '" + printable(key) + "': bool value " + std::to_string(b) +
               " is neither 0 nor 1");
      v.b = b != 0;
      v.i = v.u = b;
      break;
    }
    case GgufType::STRING: v.s = c.read_str("string value"); break;
    default: c.fail("key '" + printable(key) + "': unexpected value type");
  }
}

// Skips the body of an inner array (after its element type and count were read).
void skip_inner_array(Cursor& c, GgufType elem, uint64_t count, const std::string& key) {
  if (elem == GgufType::ARRAY)
    c.fail("key '" + printable(key) +
           "': arrays nested more than one level deep are not supported");
  if (elem == GgufType::STRING) {
    c.need(count * 8, "nested string array");  // count <= remaining / 8 checked by caller
    for (uint64_t k = 0; k < count; ++k) c.skip_str("nested string array element");
  } else {
    c.skip(count * scalar_size(elem), "nested array");
  }
}

GgufType read_value_type(Cursor& c, const std::string& key, const char* what) {
  uint32_t id = c.read<uint32_t>(what);
  if (!is_valid_value_type(id))
    c.fail("key '" + printable(key) + "': unknown value type " + std::to_string(id));
  return static_cast<GgufType>(id);
}

// Reads an array's count and checks it against the bytes left before any allocation.
uint64_t read_array_count(Cursor& c, GgufType elem, const std::string& key) {
  uint64_t count = c.read<uint64_t>("array length");
  uint64_t min_size = min_encoded_size(elem);
  if (count > c.remaining() / min_size)
    c.fail("key '" + printable(key) + "': array of " + std::to_string(count) + " " +
           gguf_type_name(elem) + " elements cannot fit in the " + std::to_string(c.remaining()) +
           " bytes left in the file (corrupt length)");
  return count;
}

// Checks an array's encoded elements and returns where they are; nothing is copied.
struct ArraySpan {
  GgufType type;
  uint64_t count = 0;
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
};
ArraySpan read_array(Cursor& c, const std::string& key) {
  ArraySpan a{read_value_type(c, key, "array element type")};
  a.count = read_array_count(c, a.type, key);
  if (a.type == GgufType::ARRAY) {
    // Arrays of arrays are bounds-checked and skipped; nothing is kept.
    for (uint64_t k = 0; k < a.count; ++k) {
      GgufType inner = read_value_type(c, key, "nested array element type");
      skip_inner_array(c, inner, read_array_count(c, inner, key), key);
    }
    a.count = 0;
    return a;
  }
  a.data = c.here();
  const size_t start = c.pos();
  if (a.type == GgufType::STRING) {
    for (uint64_t k = 0; k < a.count; ++k) c.skip_str("array string");
  } else {
    c.skip(a.count * scalar_size(a.type), "array");  // count <= remaining / size: no overflow
    if (a.type == GgufType::BOOL)
      for (uint64_t k = 0; k < a.count; ++k)
        if (a.data[k] > 1)
          c.fail("key '" + printable(key) + "': bool value " + std::to_string(a.data[k]) +
                 " is neither 0 nor 1");
  }
  a.nbytes = c.pos() - start;
  return a;
}

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::UINT8: return "uint8";
    case GgufType::INT8: return "int8";
    case GgufType::UINT16: return "uint16";
    case GgufType::INT16: return "int16";
    case GgufType::UINT32: return "uint32";
    case GgufType::INT32: return "int32";
    case GgufType::FLOAT32: return "float32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::UINT64: return "uint64";
    case GgufType::INT64: return "int64";
    case GgufType::FLOAT64: return "float64";
  }
  return "unknown";
}

GgufArray GgufArray::owning(GgufType t, size_t n, std::vector<uint8_t> bytes) {
  GgufArray a;
  a.type_ = t;
  a.n_ = n;
  a.owned_ = std::make_shared<const std::vector<uint8_t>>(std::move(bytes));
  a.data_ = a.owned_->data();
  a.nbytes_ = a.owned_->size();
  a.index_strings();
  return a;
}

void GgufArray::index_strings() {
  if (type_ != GgufType::STRING) return;
  str_off_.resize(n_);
  uint64_t off = 0;
  for (size_t k = 0; k < n_; ++k) {
    str_off_[k] = off;
    off += 8 + load<uint64_t>(data_ + off);
  }
}

namespace {
[[noreturn]] void array_misuse(GgufType t, size_t i, size_t n, const char* as) {
  if (i >= n)
    throw Error("array index " + std::to_string(i) + " out of range (" + std::to_string(n) + " elements)");
  throw Error(std::string("array of ") + gguf_type_name(t) + " read as " + as);
}
}  // namespace

int64_t GgufArray::int_at(size_t i) const {
  if (i >= n_) array_misuse(type_, i, n_, "integers");
  const uint8_t* p = data_ + i * scalar_size(type_);
  switch (type_) {
    case GgufType::UINT8:
    case GgufType::BOOL: return *p;
    case GgufType::INT8: return static_cast<int8_t>(*p);
    case GgufType::UINT16: return load<uint16_t>(p);
    case GgufType::INT16: return load<int16_t>(p);
    case GgufType::UINT32: return load<uint32_t>(p);
    case GgufType::INT32: return load<int32_t>(p);
    case GgufType::UINT64: return static_cast<int64_t>(load<uint64_t>(p));
    case GgufType::INT64: return load<int64_t>(p);
    default: array_misuse(type_, i, n_, "integers");
  }
}

double GgufArray::float_at(size_t i) const {
  if (i < n_ && type_ == GgufType::FLOAT32) return load<float>(data_ + i * 4);
  if (i < n_ && type_ == GgufType::FLOAT64) return load<double>(data_ + i * 8);
  array_misuse(type_, i, n_, "floats");
}

std::string_view GgufArray::str_at(size_t i) const {
  if (i >= n_ || type_ != GgufType::STRING) array_misuse(type_, i, n_, "strings");
  const uint8_t* p = data_ + str_off_[i];
  return {reinterpret_cast<const char*>(p + 8), static_cast<size_t>(load<uint64_t>(p))};
}

std::vector<int64_t> GgufArray::ints() const {
  std::vector<int64_t> v(n_);
  for (size_t k = 0; k < n_; ++k) v[k] = int_at(k);
  return v;
}
std::vector<double> GgufArray::floats() const {
  std::vector<double> v(n_);
  for (size_t k = 0; k < n_; ++k) v[k] = float_at(k);
  return v;
}
std::vector<std::string> GgufArray::strings() const {
  std::vector<std::string> v(n_);
  for (size_t k = 0; k < n_; ++k) v[k] = str_at(k);
  return v;
}

int64_t GgufTensor::nelements() const {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

int64_t GgufTensor::nrows() const {
  int64_t n = 1;
  for (size_t k = 1; k < ne.size(); ++k) n *= ne[k];
  return n;
}

// ---------------------------------------------------------------- SIGBUS

namespace {

// Mapped model files, read by the SIGBUS handler: a fault inside one means
// the file shrank under the mapping. Slots are claimed under a mutex and
// published through `begin`, which the handler reads without locking.
struct WatchedMapping {
  std::atomic<const uint8_t*> begin{nullptr};
  size_t size = 0;
  char msg[400];
  size_t msg_len = 0;
};
WatchedMapping g_mappings[64];
std::mutex g_mappings_mutex;
struct sigaction g_prev_sigbus;

void on_sigbus(int, siginfo_t* info, void*) {
  const auto* addr = static_cast<const uint8_t*>(info->si_addr);
  for (WatchedMapping& m : g_mappings) {
    const uint8_t* b = m.begin.load(std::memory_order_acquire);
    if (b && addr >= b && addr < b + m.size) {
      (void)!::write(STDERR_FILENO, m.msg, m.msg_len);
      _exit(1);
    }
  }
  sigaction(SIGBUS, &g_prev_sigbus, nullptr);  // not ours: the fault repeats under the old handler
}

// Returns the slot watching [base, base + size), or -1 when all are taken.
int watch_mapping(const uint8_t* base, size_t size, const std::string& path) {
  std::lock_guard<std::mutex> lock(g_mappings_mutex);
  static const bool installed = [] {
    struct sigaction sa = {};
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    return sigaction(SIGBUS, &sa, &g_prev_sigbus) == 0;
  }();
  if (!installed) return -1;
  for (int k = 0; k < static_cast<int>(std::size(g_mappings)); ++k) {
    WatchedMapping& m = g_mappings[k];
    if (m.begin.load(std::memory_order_relaxed)) continue;
    m.size = size;
    const int n = std::snprintf(m.msg, sizeof m.msg,
                                "vkmoe: error: model file %s was truncated or changed while in use\n",
                                printable(path).c_str());
    m.msg_len = std::min(static_cast<size_t>(std::max(n, 0)), sizeof m.msg - 1);
    m.begin.store(base, std::memory_order_release);
    return k;
  }
  return -1;
}

void unwatch_mapping(int slot) {
  if (slot < 0) return;
  std::lock_guard<std::mutex> lock(g_mappings_mutex);
  g_mappings[slot].begin.store(nullptr, std::memory_order_release);
}

}  // namespace

// ---------------------------------------------------------------- reader

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  // O_NONBLOCK: opening a FIFO must not wait for a writer (regular files ignore it).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
  struct FdCloser {
    int fd;
    ~FdCloser() { ::close(fd); }
  } closer{fd};
  struct stat st;
  if (fstat(fd, &st) != 0) throw Error(path + ": cannot stat: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw Error(path + ": not a regular file");
  const size_t size = static_cast<size_t>(st.st_size);
  if (size == 0) throw Error(path + ": empty file, not a GGUF model");
  void* m = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  if (m != MAP_FAILED) {
    f->map_ = m;
    f->base_ = static_cast<const uint8_t*>(m);
    f->map_slot_ = watch_mapping(f->base_, size, path);
  } else {
    // Fallback: read the whole file into memory.
    f->owned_.resize(size);
    size_t done = 0;
    while (done < size) {
      ssize_t r = ::pread(fd, f->owned_.data() + done, size - done, static_cast<off_t>(done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) throw Error(path + ": read failed: " + std::strerror(errno));
      if (r == 0) throw Error(path + ": file shrank while being read");
      done += static_cast<size_t>(r);
    }
    f->base_ = f->owned_.data();
  }
  f->size_ = size;
  f->parse();
  return f;
}

void GgufFile::prefetch(const GgufTensor& t) const {
  if (!map_ || !t.data || t.nbytes == 0) return;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const volatile uint8_t* p = t.data;
  uint8_t sink = 0;
  for (size_t i = 0; i < t.nbytes; i += page) sink ^= p[i];
  sink ^= p[t.nbytes - 1];
  (void)sink;
}

std::unique_ptr<GgufFile> GgufFile::from_memory(std::vector<uint8_t> bytes,
                                                const std::string& label) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = label;
  f->owned_ = std::move(bytes);
  f->base_ = f->owned_.data();
  f->size_ = f->owned_.size();
  f->parse();
  return f;
}

std::unique_ptr<GgufFile> GgufFile::shapes_from_memory(std::vector<uint8_t> header, const std::string& label) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = label;
  f->shapes_only_ = true;
  f->owned_ = std::move(header);
  f->base_ = f->owned_.data();
  f->size_ = f->owned_.size();
  f->parse();
  return f;
}

GgufFile::~GgufFile() {
  if (!map_) return;
  unwatch_mapping(map_slot_);
  munmap(map_, size_);
}

void GgufFile::parse() {
  Cursor c(base_, size_, path_);
  if (size_ < 8) c.fail("not a GGUF file (only " + std::to_string(size_) + " bytes)");
  uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kGgufMagic) {
    char shown[5] = {};
    for (int k = 0; k < 4; ++k) {
      char ch = static_cast<char>(base_[k]);
      shown[k] = (ch >= 32 && ch < 127) ? ch : '?';
    }
    c.fail(std::string("not a GGUF file (bad magic \"") + shown + "\", expected \"GGUF\")");
  }
  version_ = c.read<uint32_t>("version");
  if (version_ == 1)
    c.fail(
        "GGUF version 1 is not supported (only versions 2 and 3); re-convert the model with "
        "a current llama.cpp");
  if (version_ != 2 && version_ != 3) {
    if (version_ == 0x02000000u || version_ == 0x03000000u)
      c.fail("big-endian GGUF files are not supported");
    c.fail("unsupported GGUF version " + std::to_string(version_) + " (supported: 2 and 3)");
  }
  const uint64_t n_tensors = c.read<uint64_t>("tensor count");
  const uint64_t n_kv = c.read<uint64_t>("metadata count");
  // Each kv takes >= 13 bytes (key length, type, 1-byte value); each tensor info >= 32.
  if (n_kv > c.remaining() / 13)
    c.fail("corrupt header: " + std::to_string(n_kv) +
           " metadata entries cannot fit in a file of " + std::to_string(size_) + " bytes");
  // Real models have a few dozen keys; the cap bounds what parsed entries cost.
  constexpr uint64_t kMaxKeys = 1 << 16;
  if (n_kv > kMaxKeys)
    c.fail("corrupt header: " + std::to_string(n_kv) + " metadata entries (at most " +
           std::to_string(kMaxKeys) + " are supported)");
  if (n_tensors > c.remaining() / 32)
    c.fail("corrupt header: " + std::to_string(n_tensors) + " tensors cannot fit in a file of " +
           std::to_string(size_) + " bytes");

  key_order_.reserve(n_kv);
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.read_str("metadata key");
    if (kv_.count(key)) c.fail("duplicate metadata key '" + printable(key) + "'");
    GgufType t = read_value_type(c, key, "value type");
    GgufValue v;
    if (t == GgufType::ARRAY) {
      const ArraySpan a = read_array(c, key);
      v.type = GgufType::ARRAY;
      v.arr.type_ = a.type;
      v.arr.n_ = a.count;
      v.arr.data_ = a.data;
      v.arr.nbytes_ = a.nbytes;
      v.arr.index_strings();
    } else {
      read_scalar(c, t, v, key);
    }
    key_order_.push_back(key);
    kv_.emplace(std::move(key), std::move(v));
  }

  alignment_ = kDefaultAlignment;
  if (const GgufValue* a = find("general.alignment")) {
    if (!is_int(a->type))
      c.fail("general.alignment has type " + std::string(gguf_type_name(a->type)) +
             ", expected uint32");
    if (a->i <= 0 || a->i > std::numeric_limits<uint32_t>::max() ||
        !is_power_of_two(static_cast<uint64_t>(a->i)))
      c.fail("general.alignment = " + std::to_string(a->i) + " is not a power of two");
    alignment_ = static_cast<uint64_t>(a->i);
  }

  if (n_tensors > c.remaining() / 32)
    c.fail("corrupt header: " + std::to_string(n_tensors) + " tensor infos cannot fit in the " +
           std::to_string(c.remaining()) + " bytes after the metadata");
  tensors_.reserve(n_tensors);
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensor t;
    t.name = c.read_str("tensor name");
    if (tensor_index_.count(t.name)) c.fail("duplicate tensor name '" + printable(t.name) + "'");
    const std::string tn = "tensor '" + printable(t.name) + "'";
    uint32_t n_dims = c.read<uint32_t>("tensor dimension count");
    if (n_dims < 1 || n_dims > 4)
      c.fail(tn + " has " + std::to_string(n_dims) + " dimensions (must be 1 to 4)");
    int64_t nel = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      int64_t ne = static_cast<int64_t>(c.read<uint64_t>("tensor dimension"));
      if (ne <= 0) c.fail(tn + " has invalid dimension " + std::to_string(ne));
      if (__builtin_mul_overflow(nel, ne, &nel))
        c.fail(tn + " has too many elements (dimension product overflows)");
      t.ne.push_back(ne);
    }
    uint32_t type_id = c.read<uint32_t>("tensor type");
    if (!is_known_type(type_id)) {
      const char* known = ggml_type_id_name(type_id);
      if (known)
        c.fail(tn + " uses ggml type " + known + " (id " + std::to_string(type_id) +
               "), which vkmoe does not support");
      c.fail(tn + " has unknown ggml type id " + std::to_string(type_id));
    }
    t.type = static_cast<GgmlType>(type_id);
    const TypeTraits& tr = type_traits(t.type);
    if (tr.block_size <= 0 || tr.type_size <= 0)
      c.fail(tn + " has ggml type " + type_name(t.type) + " without a known block layout");
    if (t.ne[0] % tr.block_size != 0)
      c.fail(tn + " row length " + std::to_string(t.ne[0]) + " is not a multiple of the " +
             type_name(t.type) + " block size " + std::to_string(tr.block_size));
    uint64_t row, nbytes;
    if (__builtin_mul_overflow(static_cast<uint64_t>(t.ne[0] / tr.block_size),
                               static_cast<uint64_t>(tr.type_size), &row) ||
        __builtin_mul_overflow(row, static_cast<uint64_t>(t.nrows()), &nbytes) ||
        nbytes > std::numeric_limits<size_t>::max())
      c.fail(tn + " is too large (byte size overflows)");
    t.nbytes = static_cast<size_t>(nbytes);
    t.offset = c.read<uint64_t>("tensor offset");
    tensor_index_.emplace(t.name, tensors_.size());
    tensors_.push_back(std::move(t));
  }

  data_offset_ = align_up(c.pos(), alignment_);
  for (GgufTensor& t : tensors_) {
    if (t.offset % alignment_ != 0)
      c.fail("tensor '" + printable(t.name) + "' offset " + std::to_string(t.offset) +
             " is not a multiple of the alignment " + std::to_string(alignment_));
    uint64_t start, end;
    if (__builtin_add_overflow(data_offset_, t.offset, &start) ||
        __builtin_add_overflow(start, static_cast<uint64_t>(t.nbytes), &end))
      c.fail("tensor '" + printable(t.name) + "' offset " + std::to_string(t.offset) +
             " is corrupt");
    if (shapes_only_) continue;  // data stays null
    if (end > size_)
      c.fail("truncated: tensor '" + printable(t.name) + "' needs bytes up to " +
             std::to_string(end) + " but the file has " + std::to_string(size_) +
             " \u2014 re-download the file");
    t.data = base_ + start;
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

const GgufTensor* GgufFile::tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

namespace {

[[noreturn]] void type_error(const std::string& path, const std::string& key, const GgufValue& v,
                             const char* expected) {
  std::string got = gguf_type_name(v.type);
  if (v.is_array()) got = std::string("array of ") + gguf_type_name(v.arr.type());
  throw Error(path + ": metadata key '" + printable(key) + "' has type " + got + ", expected " +
              expected);
}

const GgufValue& require(const std::string& path, const GgufValue* v, const std::string& key) {
  if (!v) throw Error(path + ": missing metadata key '" + printable(key) + "'");
  return *v;
}

}  // namespace

int64_t GgufFile::get_int(const std::string& key) const {
  const GgufValue& v = require(path_, find(key), key);
  if (!is_int(v.type)) type_error(path_, key, v, "an integer");
  if (v.type == GgufType::UINT64 &&
      v.u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
    throw Error(path_ + ": metadata key '" + printable(key) + "' value " + std::to_string(v.u) +
                " is out of range");
  return v.i;
}

int64_t GgufFile::get_int_or(const std::string& key, int64_t fallback) const {
  return has(key) ? get_int(key) : fallback;
}

double GgufFile::get_float(const std::string& key) const {
  const GgufValue& v = require(path_, find(key), key);
  if (is_float(v.type)) return v.f;
  if (is_unsigned_int(v.type)) return static_cast<double>(v.u);
  if (is_signed_int(v.type)) return static_cast<double>(v.i);
  type_error(path_, key, v, "a number");
}

double GgufFile::get_float_or(const std::string& key, double fallback) const {
  return has(key) ? get_float(key) : fallback;
}

bool GgufFile::get_bool_or(const std::string& key, bool fallback) const {
  const GgufValue* v = find(key);
  if (!v) return fallback;
  if (v->type != GgufType::BOOL) type_error(path_, key, *v, "bool");
  return v->b;
}

std::string GgufFile::get_str(const std::string& key) const {
  const GgufValue& v = require(path_, find(key), key);
  if (v.type != GgufType::STRING) type_error(path_, key, v, "string");
  return v.s;
}

std::string GgufFile::get_str_or(const std::string& key, const std::string& fallback) const {
  return has(key) ? get_str(key) : fallback;
}

const GgufArray& GgufFile::get_arr_str(const std::string& key) const {
  const GgufValue& v = require(path_, find(key), key);
  if (!v.is_array() || v.arr.type() != GgufType::STRING) type_error(path_, key, v, "array of string");
  return v.arr;
}

const GgufArray& GgufFile::get_arr_float(const std::string& key) const {
  const GgufValue& v = require(path_, find(key), key);
  if (!v.is_array() || !is_float(v.arr.type())) type_error(path_, key, v, "array of float");
  return v.arr;
}

const GgufArray& GgufFile::get_arr_int(const std::string& key) const {
  const GgufValue& v = require(path_, find(key), key);
  if (!v.is_array() || !is_int(v.arr.type())) type_error(path_, key, v, "array of integer");
  return v.arr;
}

// ---------------------------------------------------------------- writer

namespace {

class ByteSink {
 public:
  std::vector<uint8_t> bytes;
  template <typename T>
  void put(T v) {
    const uint8_t* p = reinterpret_cast<const uint8_t*>(&v);
    bytes.insert(bytes.end(), p, p + sizeof(T));
  }
  void put_str(const std::string& s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
};

// `where` names the value in messages: "GGUF writer: key 'k'" or "GGUF array".
[[noreturn]] void fail_at(const std::string& where, const std::string& what) {
  throw Error(where + ": " + what);
}
std::string key_where(const std::string& key) { return "GGUF writer: key '" + printable(key) + "'"; }

// Range-checks v for integer type t and appends its encoding.
void put_int(ByteSink& out, GgufType t, int64_t v, const std::string& where) {
  auto check = [&](int64_t lo, int64_t hi) {
    if (v < lo || v > hi) fail_at(where, std::to_string(v) + " does not fit in " + gguf_type_name(t));
  };
  switch (t) {
    case GgufType::UINT8:
      check(0, UINT8_MAX);
      out.put<uint8_t>(static_cast<uint8_t>(v));
      break;
    case GgufType::INT8:
      check(INT8_MIN, INT8_MAX);
      out.put<int8_t>(static_cast<int8_t>(v));
      break;
    case GgufType::UINT16:
      check(0, UINT16_MAX);
      out.put<uint16_t>(static_cast<uint16_t>(v));
      break;
    case GgufType::INT16:
      check(INT16_MIN, INT16_MAX);
      out.put<int16_t>(static_cast<int16_t>(v));
      break;
    case GgufType::UINT32:
      check(0, UINT32_MAX);
      out.put<uint32_t>(static_cast<uint32_t>(v));
      break;
    case GgufType::INT32:
      check(INT32_MIN, INT32_MAX);
      out.put<int32_t>(static_cast<int32_t>(v));
      break;
    case GgufType::INT64: out.put<int64_t>(v); break;
    case GgufType::UINT64: out.put<uint64_t>(static_cast<uint64_t>(v)); break;  // bit pattern
    case GgufType::BOOL:
      check(0, 1);
      out.put<uint8_t>(static_cast<uint8_t>(v));
      break;
    default: fail_at(where, std::string(gguf_type_name(t)) + " is not an integer type");
  }
}

void put_value(ByteSink& out, const std::string& key, const GgufValue& v) {
  const std::string where = key_where(key);
  if (!is_valid_value_type(static_cast<uint32_t>(v.type))) fail_at(where, "invalid value type");
  out.put<uint32_t>(static_cast<uint32_t>(v.type));
  switch (v.type) {
    case GgufType::STRING: out.put_str(v.s); return;
    case GgufType::FLOAT32: out.put<float>(static_cast<float>(v.f)); return;
    case GgufType::FLOAT64: out.put<double>(v.f); return;
    case GgufType::BOOL: out.put<uint8_t>(v.b ? 1 : 0); return;
    case GgufType::UINT64: out.put<uint64_t>(v.u); return;
    case GgufType::ARRAY: break;
    default:
      if (is_unsigned_int(v.type)) {
        if (v.u > UINT32_MAX)
          fail_at(where, std::to_string(v.u) + " does not fit in " + gguf_type_name(v.type));
        put_int(out, v.type, static_cast<int64_t>(v.u), where);
      } else {
        put_int(out, v.type, v.i, where);
      }
      return;
  }
  const GgufArray& a = v.arr;
  if (a.type() == GgufType::ARRAY) fail_at(where, "nested arrays cannot be written");
  out.put<uint32_t>(static_cast<uint32_t>(a.type()));
  out.put<uint64_t>(a.size());
  if (a.nbytes()) out.bytes.insert(out.bytes.end(), a.data(), a.data() + a.nbytes());
}

}  // namespace

GgufArray GgufArray::of_ints(GgufType t, const std::vector<int64_t>& v) {
  ByteSink out;
  for (int64_t x : v) put_int(out, t, x, "GGUF array");
  return owning(t, v.size(), std::move(out.bytes));
}

GgufArray GgufArray::of_floats(GgufType t, const std::vector<double>& v) {
  if (!is_float(t)) fail_at("GGUF array", std::string(gguf_type_name(t)) + " is not a float type");
  ByteSink out;
  for (double x : v) {
    if (t == GgufType::FLOAT32)
      out.put<float>(static_cast<float>(x));
    else
      out.put<double>(x);
  }
  return owning(t, v.size(), std::move(out.bytes));
}

GgufWriter::GgufWriter(uint64_t alignment) : alignment_(alignment) {
  if (!is_power_of_two(alignment) || alignment > UINT32_MAX)
    throw Error("GGUF writer: alignment " + std::to_string(alignment) + " is not a power of two");
  if (alignment != kDefaultAlignment)
    add_u32("general.alignment", static_cast<uint32_t>(alignment));
}

void GgufWriter::add_value(const std::string& key, const GgufValue& v) {
  for (const auto& kv : kv_)
    if (kv.first == key) fail_at(key_where(key), "duplicate key");
  ByteSink out;  // encoded now: errors point at the caller, and arrays need not outlive this call
  put_value(out, key, v);
  kv_.emplace_back(key, std::move(out.bytes));
}

void GgufWriter::add_u32(const std::string& key, uint32_t v) {
  GgufValue x;
  x.type = GgufType::UINT32;
  x.u = v;
  x.i = v;
  add_value(key, x);
}
void GgufWriter::add_i32(const std::string& key, int32_t v) {
  GgufValue x;
  x.type = GgufType::INT32;
  x.i = v;
  add_value(key, x);
}
void GgufWriter::add_u64(const std::string& key, uint64_t v) {
  GgufValue x;
  x.type = GgufType::UINT64;
  x.u = v;
  add_value(key, x);
}
void GgufWriter::add_f32(const std::string& key, float v) {
  GgufValue x;
  x.type = GgufType::FLOAT32;
  x.f = v;
  add_value(key, x);
}
void GgufWriter::add_bool(const std::string& key, bool v) {
  GgufValue x;
  x.type = GgufType::BOOL;
  x.b = v;
  x.i = v;
  add_value(key, x);
}
void GgufWriter::add_str(const std::string& key, const std::string& v) {
  GgufValue x;
  x.type = GgufType::STRING;
  x.s = v;
  add_value(key, x);
}
void GgufWriter::add_arr(const std::string& key, GgufArray a) {
  GgufValue x;
  x.type = GgufType::ARRAY;
  x.arr = std::move(a);
  add_value(key, x);
}
void GgufWriter::add_arr_f32(const std::string& key, const std::vector<float>& v) {
  add_arr(key, GgufArray::of_floats(GgufType::FLOAT32, std::vector<double>(v.begin(), v.end())));
}
void GgufWriter::add_arr_i32(const std::string& key, const std::vector<int32_t>& v) {
  add_arr(key, GgufArray::of_ints(GgufType::INT32, std::vector<int64_t>(v.begin(), v.end())));
}

void GgufWriter::add_all(const GgufFile& f, const std::function<bool(const std::string&)>& keep) {
  for (const std::string& k : f.keys()) {
    const GgufValue& v = *f.find(k);
    if (k == "general.alignment" || (v.is_array() && v.arr.type() == GgufType::ARRAY)) continue;
    if (!keep || keep(k)) add_value(k, v);
  }
  for (const GgufTensor& t : f.tensors())
    if (!keep || keep(t.name))
      add_tensor(t.name, t.ne, t.type, std::vector<uint8_t>(t.data, t.data + t.nbytes));
}

void GgufWriter::add_tensor(const std::string& name, const std::vector<int64_t>& ne, GgmlType type,
                            std::vector<uint8_t> data) {
  add_tensor_impl(name, ne, type, std::move(data), nullptr);
}

void GgufWriter::add_tensor_lazy(const std::string& name, const std::vector<int64_t>& ne, GgmlType type,
                                 TensorFill fill) {
  add_tensor_impl(name, ne, type, {}, std::move(fill));
}

void GgufWriter::add_tensor_impl(const std::string& name, const std::vector<int64_t>& ne, GgmlType type,
                                 std::vector<uint8_t> data, TensorFill fill) {
  auto fail = [&](const std::string& what) {
    throw Error("GGUF writer: tensor '" + printable(name) + "': " + what);
  };
  for (const auto& t : tensors_)
    if (t.name == name) fail("duplicate tensor name");
  if (ne.empty() || ne.size() > 4) fail("must have 1 to 4 dimensions");
  int64_t nrows = 1;
  for (size_t k = 0; k < ne.size(); ++k) {
    if (ne[k] <= 0) fail("dimension " + std::to_string(ne[k]) + " is not positive");
    if (k > 0 && __builtin_mul_overflow(nrows, ne[k], &nrows)) fail("too many rows");
  }
  if (!is_known_type(static_cast<uint32_t>(type))) fail("unknown ggml type");
  size_t expect = row_bytes(type, ne[0]) * static_cast<size_t>(nrows);
  if (!fill && data.size() != expect)
    fail("data holds " + std::to_string(data.size()) + " bytes, expected " +
         std::to_string(expect));
  tensors_.push_back({name, ne, type, std::move(data), expect, std::move(fill)});
}

// Metadata + tensor infos + padding up to the data section.
std::vector<uint8_t> GgufWriter::header_bytes() const {
  ByteSink out;
  out.put<uint32_t>(kGgufMagic);
  out.put<uint32_t>(3);
  out.put<uint64_t>(tensors_.size());
  out.put<uint64_t>(kv_.size());
  for (const auto& [key, encoded] : kv_) {
    out.put_str(key);
    out.bytes.insert(out.bytes.end(), encoded.begin(), encoded.end());
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    out.put_str(t.name);
    out.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t d : t.ne) out.put<uint64_t>(static_cast<uint64_t>(d));
    out.put<uint32_t>(static_cast<uint32_t>(t.type));
    out.put<uint64_t>(offset);
    offset += align_up(t.nbytes, alignment_);
  }
  out.bytes.resize(align_up(out.bytes.size(), alignment_), 0);
  return std::move(out.bytes);
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  std::vector<uint8_t> out = header_bytes();
  for (const auto& t : tensors_) {
    const size_t at = out.size();
    if (t.fill) {
      out.resize(at + t.nbytes);
      t.fill(out.data() + at, t.nbytes);
    } else {
      out.insert(out.end(), t.data.begin(), t.data.end());
    }
    out.resize(align_up(out.size(), alignment_), 0);
  }
  return out;
}

void GgufWriter::write(const std::string& path) const {
  const std::vector<uint8_t> head = header_bytes();

  const std::string tmp = path + ".tmp";
  FILE* fp = std::fopen(tmp.c_str(), "wb");
  if (!fp) throw Error(path + ": cannot create " + tmp + ": " + std::strerror(errno));
  // Until the rename, any exit (a failed write, or a fill that throws, e.g.
  // out of memory) closes and removes the partial file.
  struct PartialFile {
    FILE*& fp;
    const std::string& tmp;
    ~PartialFile() {
      if (fp) std::fclose(fp);
      if (!tmp.empty()) std::remove(tmp.c_str());
    }
  };
  std::string pending = tmp;
  PartialFile partial{fp, pending};
  bool ok = std::fwrite(head.data(), 1, head.size(), fp) == head.size();
  const std::vector<uint8_t> zeros(alignment_, 0);
  std::vector<uint8_t> lazy;
  for (const auto& t : tensors_) {
    if (!ok) break;
    const uint8_t* bytes = t.data.data();
    if (t.fill) {
      lazy.assign(t.nbytes, 0);
      t.fill(lazy.data(), t.nbytes);
      bytes = lazy.data();
    }
    ok = std::fwrite(bytes, 1, t.nbytes, fp) == t.nbytes;
    size_t pad = align_up(t.nbytes, alignment_) - t.nbytes;
    if (ok && pad) ok = std::fwrite(zeros.data(), 1, pad, fp) == pad;
  }
  int err = ok ? 0 : errno;
  const int closed = std::fclose(fp);
  fp = nullptr;
  if (closed != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) throw Error(path + ": write failed: " + std::strerror(err));
  pending.clear();
}

}  // namespace vkmoe
