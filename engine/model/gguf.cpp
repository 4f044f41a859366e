#include "engine/model/gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>

namespace vkmoe {

namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as little-endian u32
constexpr uint64_t kDefaultAlignment = 32;

// A name safe to quote in a one-line message: control bytes escaped, long names cut.
std::string printable(const std::string& name) {
  constexpr size_t kMax = 96;
  std::string out;
  for (size_t k = 0; k < name.size() && k < kMax; ++k) {
    unsigned char ch = static_cast<unsigned char>(name[k]);
    if (ch < 0x20 || ch == 0x7F || ch == '\\') {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02X", ch);
      out += buf;
    } else {
      out += static_cast<char>(ch);
    }
  }
  if (name.size() > kMax) out += "...";
  return out;
}

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

void read_array(Cursor& c, GgufValue& v, const std::string& key) {
  v.type = GgufType::ARRAY;
  v.arr_type = read_value_type(c, key, "array element type");
  const uint64_t count = read_array_count(c, v.arr_type, key);
  const GgufType t = v.arr_type;
  if (t == GgufType::ARRAY) {
    // Arrays of arrays are bounds-checked and skipped; nothing is stored.
    for (uint64_t k = 0; k < count; ++k) {
      GgufType inner = read_value_type(c, key, "nested array element type");
      skip_inner_array(c, inner, read_array_count(c, inner, key), key);
    }
    return;
  }
  if (t == GgufType::STRING) {
    v.arr_str.reserve(count);
    for (uint64_t k = 0; k < count; ++k) v.arr_str.push_back(c.read_str("array string"));
    return;
  }
  GgufValue elem;
  if (is_float(t)) {
    v.arr_float.reserve(count);
    for (uint64_t k = 0; k < count; ++k) {
      read_scalar(c, t, elem, key);
      v.arr_float.push_back(elem.f);
    }
  } else {
    v.arr_int.reserve(count);
    for (uint64_t k = 0; k < count; ++k) {
      read_scalar(c, t, elem, key);
      // UINT64 elements keep their bit pattern.
      v.arr_int.push_back(t == GgufType::UINT64 ? static_cast<int64_t>(elem.u) : elem.i);
    }
  }
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

size_t GgufValue::array_size() const {
  if (!is_array()) return 0;
  if (arr_type == GgufType::STRING) return arr_str.size();
  if (is_float(arr_type)) return arr_float.size();
  if (arr_type == GgufType::ARRAY) return 0;
  return arr_int.size();
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

// ---------------------------------------------------------------- reader

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
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

GgufFile::~GgufFile() {
  if (map_) munmap(map_, size_);
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
  if (n_tensors > c.remaining() / 32)
    c.fail("corrupt header: " + std::to_string(n_tensors) + " tensors cannot fit in a file of " +
           std::to_string(size_) + " bytes");

  key_order_.reserve(n_kv);
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key = c.read_str("metadata key");
    if (kv_.count(key)) c.fail("duplicate metadata key '" + printable(key) + "'");
    GgufType t = read_value_type(c, key, "value type");
    GgufValue v;
    if (t == GgufType::ARRAY)
      read_array(c, v, key);
    else
      read_scalar(c, t, v, key);
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
  if (v.is_array()) got = std::string("array of ") + gguf_type_name(v.arr_type);
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

const std::vector<std::string>& GgufFile::get_arr_str(const std::string& key) const {
  const GgufValue& v = require(path_, find(key), key);
  if (!v.is_array() || v.arr_type != GgufType::STRING) type_error(path_, key, v, "array of string");
  return v.arr_str;
}

const std::vector<double>& GgufFile::get_arr_float(const std::string& key) const {
  const GgufValue& v = require(path_, find(key), key);
  if (!v.is_array() || !is_float(v.arr_type)) type_error(path_, key, v, "array of float");
  return v.arr_float;
}

const std::vector<int64_t>& GgufFile::get_arr_int(const std::string& key) const {
  const GgufValue& v = require(path_, find(key), key);
  if (!v.is_array() || !is_int(v.arr_type)) type_error(path_, key, v, "array of integer");
  return v.arr_int;
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

[[noreturn]] void writer_fail(const std::string& key, const std::string& what) {
  throw Error("GGUF writer: key '" + printable(key) + "': " + what);
}

// Range-checks v for integer type t and appends its encoding.
void put_int(ByteSink& out, GgufType t, int64_t v, const std::string& key) {
  auto check = [&](int64_t lo, int64_t hi) {
    if (v < lo || v > hi)
      writer_fail(key, std::to_string(v) + " does not fit in " + gguf_type_name(t));
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
    default: writer_fail(key, "internal: not an integer type");
  }
}

void put_value(ByteSink& out, const std::string& key, const GgufValue& v) {
  if (!is_valid_value_type(static_cast<uint32_t>(v.type))) writer_fail(key, "invalid value type");
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
          writer_fail(key, std::to_string(v.u) + " does not fit in " + gguf_type_name(v.type));
        put_int(out, v.type, static_cast<int64_t>(v.u), key);
      } else {
        put_int(out, v.type, v.i, key);
      }
      return;
  }
  const GgufType t = v.arr_type;
  if (!is_valid_value_type(static_cast<uint32_t>(t)))
    writer_fail(key, "invalid array element type");
  if (t == GgufType::ARRAY) writer_fail(key, "nested arrays cannot be written");
  out.put<uint32_t>(static_cast<uint32_t>(t));
  if (t == GgufType::STRING) {
    out.put<uint64_t>(v.arr_str.size());
    for (const auto& s : v.arr_str) out.put_str(s);
  } else if (is_float(t)) {
    out.put<uint64_t>(v.arr_float.size());
    for (double x : v.arr_float) {
      if (t == GgufType::FLOAT32)
        out.put<float>(static_cast<float>(x));
      else
        out.put<double>(x);
    }
  } else {
    out.put<uint64_t>(v.arr_int.size());
    for (int64_t x : v.arr_int) put_int(out, t, x, key);
  }
}

}  // namespace

GgufWriter::GgufWriter(uint64_t alignment) : alignment_(alignment) {
  if (!is_power_of_two(alignment) || alignment > UINT32_MAX)
    throw Error("GGUF writer: alignment " + std::to_string(alignment) + " is not a power of two");
  if (alignment != kDefaultAlignment)
    add_u32("general.alignment", static_cast<uint32_t>(alignment));
}

void GgufWriter::add_value(const std::string& key, const GgufValue& v) {
  for (const auto& kv : kv_)
    if (kv.first == key) writer_fail(key, "duplicate key");
  ByteSink probe;  // validates now so errors point at the caller
  put_value(probe, key, v);
  kv_.emplace_back(key, v);
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
void GgufWriter::add_arr_str(const std::string& key, const std::vector<std::string>& v) {
  GgufValue x;
  x.type = GgufType::ARRAY;
  x.arr_type = GgufType::STRING;
  x.arr_str = v;
  add_value(key, x);
}
void GgufWriter::add_arr_f32(const std::string& key, const std::vector<float>& v) {
  GgufValue x;
  x.type = GgufType::ARRAY;
  x.arr_type = GgufType::FLOAT32;
  x.arr_float.assign(v.begin(), v.end());
  add_value(key, x);
}
void GgufWriter::add_arr_i32(const std::string& key, const std::vector<int32_t>& v) {
  GgufValue x;
  x.type = GgufType::ARRAY;
  x.arr_type = GgufType::INT32;
  x.arr_int.assign(v.begin(), v.end());
  add_value(key, x);
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
  for (const auto& [key, v] : kv_) {
    out.put_str(key);
    put_value(out, key, v);
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
  if (std::fclose(fp) != 0 && ok) {
    ok = false;
    err = errno;
  }
  if (ok && std::rename(tmp.c_str(), path.c_str()) != 0) {
    ok = false;
    err = errno;
  }
  if (!ok) {
    std::remove(tmp.c_str());
    throw Error(path + ": write failed: " + std::strerror(err));
  }
}

}  // namespace vkmoe
