// Append-only journal of finished measurements (JSON lines). Each finished measurement is written
// and flushed to disk at once, so an interrupted calibration loses nothing: `--resume` reloads the
// journal and skips every key already in it. A torn last line (the process died mid-write) is
// ignored with a warning.
#pragma once

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "costmodel/document.h"

namespace hetplan {

class Journal {
 public:
  // Opens `path`. With `resume`, existing entries are loaded; without, the file is started afresh.
  Journal(std::filesystem::path path, bool resume);
  // Loads the entries of an existing journal to read them alone (`calibrate --from-journal`):
  // nothing is appended, and the file is not opened for writing. Throws InputError if it does
  // not exist, RuntimeFailure if it cannot be read.
  static std::unique_ptr<Journal> read_only(const std::filesystem::path& path);
  ~Journal();
  Journal(const Journal&) = delete;
  Journal& operator=(const Journal&) = delete;

  bool contains(const std::string& key) const { return index_.count(key) != 0; }
  // The record stored under `key`, or nullptr.
  const Json* find(const std::string& key) const;
  // Appends one record and flushes it to disk (fsync) before returning (RuntimeFailure on a
  // journal opened read_only).
  void append(const std::string& key, const Json& record);
  // Records in the order they were written (a key written twice keeps its last record).
  const std::vector<std::pair<std::string, Json>>& entries() const { return records_; }
  size_t size() const { return index_.size(); }
  // Lines dropped while loading (torn or malformed), reported to the user by the caller.
  int dropped_lines() const { return dropped_lines_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  Journal() = default;
  void load();

  std::filesystem::path path_;
  std::FILE* file_ = nullptr;
  std::vector<std::pair<std::string, Json>> records_;
  std::unordered_map<std::string, size_t> index_;
  int dropped_lines_ = 0;
};

}  // namespace hetplan
