#include "report/import/npy.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "report/import/log_text.h"

namespace hetplan {
namespace {

uint32_t little_endian(std::string_view bytes, size_t offset, size_t width) {
  uint32_t v = 0;
  for (size_t i = 0; i < width; ++i)
    v |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  return v;
}

// The quoted string after 'key': in the header dict.
std::string header_string(std::string_view header, std::string_view key,
                          const std::string& origin) {
  const std::string pattern = fmt::format("'{}':", key);
  size_t pos = header.find(pattern);
  if (pos == std::string_view::npos)
    throw InputError(origin, "header", fmt::format("no '{}' in the header {}", key, header));
  pos = header.find_first_of("'\"", pos + pattern.size());
  const size_t end = pos == std::string_view::npos ? pos : header.find(header[pos], pos + 1);
  if (end == std::string_view::npos)
    throw InputError(origin, "header", fmt::format("'{}' is not a quoted string", key));
  return std::string(header.substr(pos + 1, end - pos - 1));
}

std::string_view header_value(std::string_view header, std::string_view key,
                              const std::string& origin) {
  const std::string pattern = fmt::format("'{}':", key);
  const size_t pos = header.find(pattern);
  if (pos == std::string_view::npos)
    throw InputError(origin, "header", fmt::format("no '{}' in the header {}", key, header));
  return logs::trim(header.substr(pos + pattern.size()));
}

}  // namespace

NpyArray parse_npy(std::string_view bytes, const std::string& origin) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != std::string_view("\x93NUMPY", 6))
    throw InputError(origin, "", "not a .npy file (no \\x93NUMPY magic)");
  const int major = static_cast<unsigned char>(bytes[6]);
  if (major < 1 || major > 3)
    throw InputError(origin, "",
                     fmt::format("unsupported .npy format version {}.{}", major,
                                 static_cast<unsigned char>(bytes[7])));
  const size_t width = major == 1 ? 2 : 4;
  const size_t header_len = little_endian(bytes, 8, width);
  const size_t data_start = 8 + width + header_len;
  if (bytes.size() < data_start)
    throw InputError(origin, "header",
                     fmt::format("the file ends inside its {}-byte header", header_len));
  const std::string_view header = bytes.substr(8 + width, header_len);
  NpyArray a;
  const std::string descr = header_string(header, "descr", origin);
  size_t item = 0;
  if (descr == "<f8")
    item = 8;
  else if (descr == "<f4")
    item = 4;
  else
    throw InputError(origin, "header.descr",
                     fmt::format("expected little-endian float64 '<f8' "
                                 "(or '<f4'), found '{}'",
                                 descr));
  const std::string_view order = header_value(header, "fortran_order", origin);
  if (logs::starts_with(order, "True"))
    a.fortran_order = true;
  else if (!logs::starts_with(order, "False"))
    throw InputError(origin, "header.fortran_order", "expected True or False");
  std::string_view shape = header_value(header, "shape", origin);
  if (shape.empty() || shape.front() != '(')
    throw InputError(origin, "header.shape", "expected a tuple such as (30,)");
  shape = shape.substr(1, shape.find(')') - 1);
  int64_t count = 1;
  // A product past this many values would overflow the byte count (no file holds so many).
  constexpr int64_t kMaxValues = std::numeric_limits<int64_t>::max() / 8;
  while (!logs::trim(shape).empty()) {
    const size_t comma = shape.find(',');
    const auto dim = logs::parse_integer(shape.substr(0, comma));
    if (!dim || *dim < 0) throw InputError(origin, "header.shape", "expected whole numbers >= 0");
    a.shape.push_back(*dim);
    if (*dim > 0 && count > kMaxValues / *dim)
      throw InputError(origin, "header.shape",
                       "expected a shape of at most 2^60 values (no file holds more)");
    count *= *dim;
    if (comma == std::string_view::npos) break;
    shape.remove_prefix(comma + 1);
  }
  const size_t need = static_cast<size_t>(count) * item;
  if (bytes.size() - data_start != need) {
    // The shape as Python writes it: (30,) or (5, 6).
    std::string tuple;
    for (int64_t d : a.shape) tuple += (tuple.empty() ? "" : ", ") + std::to_string(d);
    if (a.shape.size() == 1) tuple += ",";
    throw InputError(origin, "",
                     fmt::format("expected {} bytes of data for shape ({}) ('{}'), found {}", need,
                                 tuple, descr, bytes.size() - data_start));
  }
  a.values.resize(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i) {
    const char* p = bytes.data() + data_start + static_cast<size_t>(i) * item;
    unsigned char raw[8];
    std::memcpy(raw, p, item);
    if constexpr (std::endian::native == std::endian::big)
      for (size_t b = 0; b < item / 2; ++b) std::swap(raw[b], raw[item - 1 - b]);
    if (item == 8) {
      double d;
      std::memcpy(&d, raw, 8);
      a.values[i] = d;
    } else {
      float f;
      std::memcpy(&f, raw, 4);
      a.values[i] = f;
    }
  }
  return a;
}

NpyArray read_npy(const std::filesystem::path& path) {
  return parse_npy(logs::read_text_file(path), path.string());
}

std::vector<std::filesystem::path> files_in(const std::vector<std::filesystem::path>& inputs,
                                            std::initializer_list<std::string_view> extensions,
                                            std::string_view what) {
  std::vector<std::filesystem::path> out;
  for (const auto& input : inputs) {
    if (!std::filesystem::is_directory(input)) {
      out.push_back(input);
      continue;
    }
    std::vector<std::filesystem::path> found;
    for (const auto& e : std::filesystem::directory_iterator(input))
      if (e.is_regular_file() && std::find(extensions.begin(), extensions.end(),
                                           e.path().extension().string()) != extensions.end())
        found.push_back(e.path());
    if (found.empty())
      throw InputError(input.string(), "", fmt::format("no {} in this folder", what));
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  }
  return out;
}

std::vector<std::filesystem::path> npy_files(const std::vector<std::filesystem::path>& inputs) {
  return files_in(inputs, {".npy"}, ".npy file");
}

}  // namespace hetplan
