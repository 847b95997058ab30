// Runs the built hetplan binary for CLI output tests.
#pragma once

#include <sys/wait.h>
#include <unistd.h>
#include <array>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hetplan::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

inline CommandResult run_hetplan(const std::string& args) {
  const std::string cmd = std::string(HETPLAN_BINARY) + " " + args + " 2>&1";
  CommandResult r;
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), pipe)) > 0) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A fresh temporary directory for one test.
inline std::filesystem::path temp_dir(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() /
             ("hetplan_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

// "bytes" or "..._bytes": a key whose value is a byte count, or a list of them.
inline bool is_bytes_key(const std::string& key) {
  return key == "bytes" || (key.size() > 6 && key.compare(key.size() - 6, 6, "_bytes") == 0);
}

// Key paths of the values under a bytes key (numbers, or lists of numbers) that are not JSON
// integers: byte counts are written whole (docs/formats.md). Empty when all are.
inline std::vector<std::string> fractional_bytes(const nlohmann::json& j,
                                                 const std::string& path = "") {
  std::vector<std::string> out;
  auto check = [&](const nlohmann::json& v, const std::string& at) {
    if (v.is_number() && !v.is_number_integer()) out.push_back(at);
    if (v.is_array())
      for (size_t i = 0; i < v.size(); ++i)
        if (v[i].is_number() && !v[i].is_number_integer())
          out.push_back(at + "[" + std::to_string(i) + "]");
  };
  if (j.is_object()) {
    for (const auto& [key, v] : j.items()) {
      const std::string at = path.empty() ? key : path + "." + key;
      if (is_bytes_key(key)) check(v, at);
      for (auto& p : fractional_bytes(v, at)) out.push_back(std::move(p));
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i)
      for (auto& p : fractional_bytes(j[i], path + "[" + std::to_string(i) + "]"))
        out.push_back(std::move(p));
  }
  return out;
}

// How many values fractional_bytes looks at: a test that finds none checked nothing.
inline size_t byte_values(const nlohmann::json& j) {
  size_t n = 0;
  if (j.is_object()) {
    for (const auto& [key, v] : j.items()) {
      if (is_bytes_key(key)) n += v.is_array() ? v.size() : v.is_number() ? 1 : 0;
      n += byte_values(v);
    }
  } else if (j.is_array()) {
    for (const auto& v : j) n += byte_values(v);
  }
  return n;
}

}  // namespace hetplan::testing
