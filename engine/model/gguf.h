#pragma once
// GGUF v2/v3 reader (mmap) and writer.
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cpu/quant.h"
#include "base/error.h"

namespace vkmoe {

enum class GgufType : uint32_t {
  UINT8 = 0, INT8 = 1, UINT16 = 2, INT16 = 3, UINT32 = 4, INT32 = 5,
  FLOAT32 = 6, BOOL = 7, STRING = 8, ARRAY = 9, UINT64 = 10, INT64 = 11, FLOAT64 = 12,
};
const char* gguf_type_name(GgufType t);

// The elements of an array value in their GGUF encoding, decoded on access:
// a view into the file's bytes for a parsed value (valid while its GgufFile
// lives), shared storage for a built one. Arrays of arrays (one level) are
// bounds-checked and skipped by the reader: type ARRAY with no elements.
class GgufArray {
 public:
  GgufArray() = default;
  // Built arrays: of_ints takes integer or bool types and throws Error when a
  // value does not fit; of_floats takes FLOAT32 or FLOAT64.
  static GgufArray of_ints(GgufType t, const std::vector<int64_t>& v);
  static GgufArray of_floats(GgufType t, const std::vector<double>& v);
  template <class Strings>  // any range of things convertible to std::string_view
  static GgufArray of_strings(const Strings& v);

  GgufType type() const { return type_; }
  size_t size() const { return n_; }
  int64_t int_at(size_t i) const;  // integer and bool elements (UINT64: the bit pattern)
  double float_at(size_t i) const;  // FLOAT32 / FLOAT64 elements
  std::string_view str_at(size_t i) const;  // STRING elements
  // All elements decoded (convenience for small arrays).
  std::vector<int64_t> ints() const;
  std::vector<double> floats() const;
  std::vector<std::string> strings() const;
  // The encoded elements, as written after the element type and count.
  const uint8_t* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }

 private:
  friend class GgufFile;
  static GgufArray owning(GgufType t, size_t n, std::vector<uint8_t> bytes);
  void index_strings();  // fills str_off_ from well-formed bytes
  GgufType type_ = GgufType::UINT8;
  size_t n_ = 0;
  const uint8_t* data_ = nullptr;
  size_t nbytes_ = 0;
  std::vector<uint64_t> str_off_;  // STRING: offset of each element's length prefix
  std::shared_ptr<const std::vector<uint8_t>> owned_;
};

template <class Strings>
GgufArray GgufArray::of_strings(const Strings& v) {
  std::vector<uint8_t> b;
  size_t n = 0;
  for (const auto& x : v) {
    const std::string_view s(x);
    const uint64_t len = s.size();
    const auto* p = reinterpret_cast<const uint8_t*>(&len);
    b.insert(b.end(), p, p + 8);
    b.insert(b.end(), s.begin(), s.end());
    ++n;
  }
  return owning(GgufType::STRING, n, std::move(b));
}

// One metadata value. Scalars live in i/u/f/b/s, arrays in arr. Signed values
// are also mirrored into u when non-negative; bools set b and i/u (0/1).
// The writer reads u for unsigned scalars, i for signed ones, b for BOOL.
struct GgufValue {
  GgufType type = GgufType::UINT32;
  int64_t i = 0;   // signed integer types and bool
  uint64_t u = 0;  // unsigned integer types (also mirrored into i when it fits)
  double f = 0;    // FLOAT32 / FLOAT64
  bool b = false;
  std::string s;
  GgufArray arr;

  bool is_array() const { return type == GgufType::ARRAY; }
};

struct GgufTensor {
  std::string name;
  std::vector<int64_t> ne;  // ne[0] is the contiguous (row) dimension
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;         // relative to the data section
  const uint8_t* data = nullptr;
  size_t nbytes = 0;
  int64_t nelements() const;
  int64_t nrows() const;       // product of ne[1..]
};

class GgufFile {
 public:
  // Maps the file read-only. Throws Error("<path>: <what is wrong>") for a
  // missing, truncated or corrupt file, bad magic, unsupported version,
  // unknown value/tensor types, tensors out of bounds or misaligned, or a
  // path that is not a regular file. While mapped, a SIGBUS in the mapping
  // (the file truncated by another process) ends the process with a
  // one-line message and status 1.
  static std::unique_ptr<GgufFile> open(const std::string& path);
  // Parses a copy held in memory (used by tests and fuzzing).
  static std::unique_ptr<GgufFile> from_memory(std::vector<uint8_t> bytes,
                                               const std::string& label = "<memory>");
  // Metadata and tensor shapes without tensor data (GgufWriter::header()):
  // every tensor's data is null. For planning models larger than memory.
  static std::unique_ptr<GgufFile> shapes_from_memory(std::vector<uint8_t> header, const std::string& label);
  bool has_data() const { return !shapes_only_; }
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  size_t file_size() const { return size_; }
  const uint8_t* base() const { return base_; }
  uint64_t data_offset() const { return data_offset_; }

  const std::vector<std::string>& keys() const { return key_order_; }
  const GgufValue* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }
  // Typed getters: throw Error naming the key if missing or of an
  // incompatible type; the *_or forms return the fallback when missing.
  // Integer getters accept any integer type whose value fits.
  int64_t get_int(const std::string& key) const;
  int64_t get_int_or(const std::string& key, int64_t fallback) const;
  double get_float(const std::string& key) const;  // accepts ints too
  double get_float_or(const std::string& key, double fallback) const;
  bool get_bool_or(const std::string& key, bool fallback) const;
  std::string get_str(const std::string& key) const;
  std::string get_str_or(const std::string& key, const std::string& fallback) const;
  // Arrays of strings, of either float type, of any integer type.
  const GgufArray& get_arr_str(const std::string& key) const;
  const GgufArray& get_arr_float(const std::string& key) const;
  const GgufArray& get_arr_int(const std::string& key) const;

  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  const GgufTensor* tensor(const std::string& name) const;  // nullptr if absent
  // Reads a mapped tensor's pages once, in file order, so that later random
  // reads (a prompt's token rows) find them in memory instead of faulting them
  // in from disk one by one (as llama.cpp maps whole files with MAP_POPULATE).
  // Nothing to do for files held in memory.
  void prefetch(const GgufTensor& t) const;

 private:
  GgufFile() = default;
  void parse();
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  uint64_t data_offset_ = 0;
  bool shapes_only_ = false;
  void* map_ = nullptr;                // mmap'd region, or null
  int map_slot_ = -1;                  // its entry in the SIGBUS handler's table
  std::vector<uint8_t> owned_;         // from_memory storage
  std::vector<std::string> key_order_;
  std::unordered_map<std::string, GgufValue> kv_;
  std::vector<GgufTensor> tensors_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

// Builds a GGUF v3 file. Tensor data is aligned to `alignment`
// (general.alignment is written when it differs from 32).
class GgufWriter {
 public:
  explicit GgufWriter(uint64_t alignment = 32);
  void add_u32(const std::string& key, uint32_t v);
  void add_i32(const std::string& key, int32_t v);
  void add_u64(const std::string& key, uint64_t v);
  void add_f32(const std::string& key, float v);
  void add_bool(const std::string& key, bool v);
  void add_str(const std::string& key, const std::string& v);
  template <class Strings>
  void add_arr_str(const std::string& key, const Strings& v) { add_arr(key, GgufArray::of_strings(v)); }
  void add_arr_str(const std::string& key, std::initializer_list<std::string_view> v) {
    add_arr(key, GgufArray::of_strings(v));
  }
  void add_arr_f32(const std::string& key, const std::vector<float>& v);
  void add_arr_i32(const std::string& key, const std::vector<int32_t>& v);
  void add_arr(const std::string& key, GgufArray a);
  void add_value(const std::string& key, const GgufValue& v);  // any type
  // Copies f's metadata and tensors whose name passes keep (all when empty),
  // except general.alignment and arrays of arrays.
  void add_all(const GgufFile& f, const std::function<bool(const std::string&)>& keep = {});
  // `data` must hold row_bytes(type, ne[0]) * nrows bytes; it is copied.
  void add_tensor(const std::string& name, const std::vector<int64_t>& ne, GgmlType type,
                  std::vector<uint8_t> data);
  // The data is produced by fill(dst, nbytes) only while writing, so files
  // larger than memory can be streamed.
  using TensorFill = std::function<void(uint8_t* dst, size_t nbytes)>;
  void add_tensor_lazy(const std::string& name, const std::vector<int64_t>& ne, GgmlType type,
                       TensorFill fill);
  std::vector<uint8_t> to_bytes() const;
  std::vector<uint8_t> header() const { return header_bytes(); }  // without the data section
  void write(const std::string& path) const;  // throws Error on I/O failure

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> ne;
    GgmlType type;
    std::vector<uint8_t> data;
    size_t nbytes = 0;
    TensorFill fill;  // set for lazy tensors (data stays empty)
  };
  void add_tensor_impl(const std::string& name, const std::vector<int64_t>& ne, GgmlType type,
                       std::vector<uint8_t> data, TensorFill fill);
  std::vector<uint8_t> header_bytes() const;  // everything before the data section
  uint64_t alignment_;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> kv_;  // key, encoded type and value
  std::vector<Tensor> tensors_;
};

}  // namespace vkmoe
