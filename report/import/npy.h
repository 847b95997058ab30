// A reader for numpy's .npy format (numpy/lib/format.py, format versions 1.0-3.0): the magic
// "\x93NUMPY", the version, the header length (2 bytes little-endian in 1.0, 4 bytes after),
// the header (a Python dict literal: 'descr', 'fortran_order', 'shape'), then the raw data.
// Reads little-endian float64 ('<f8') and float32 ('<f4') arrays.
#pragma once

#include <cstdint>
#include <filesystem>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace hetplan {

struct NpyArray {
  std::vector<int64_t> shape;
  bool fortran_order = false;
  std::vector<double> values;  // in file order
};

// Throws InputError naming `origin` for anything that is not a well-formed supported array.
NpyArray parse_npy(std::string_view bytes, const std::string& origin);
NpyArray read_npy(const std::filesystem::path& path);

// The files `inputs` name: a file stands for itself, a folder for its files with one of
// `extensions` (".npy") in name order (InputError naming a folder that holds none, `what` saying
// what was looked for).
std::vector<std::filesystem::path> files_in(const std::vector<std::filesystem::path>& inputs,
                                            std::initializer_list<std::string_view> extensions,
                                            std::string_view what);
// The arrays `inputs` name: files_in with .npy.
std::vector<std::filesystem::path> npy_files(const std::vector<std::filesystem::path>& inputs);

}  // namespace hetplan
