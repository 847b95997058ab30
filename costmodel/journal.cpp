#include "costmodel/journal.h"

#include <unistd.h>
#include <fstream>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan {

Journal::Journal(std::filesystem::path path, bool resume) : path_(std::move(path)) {
  if (resume && std::filesystem::exists(path_)) {
    std::ifstream in(path_);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      Json j = Json::parse(line, nullptr, /*allow_exceptions=*/false);
      if (j.is_discarded() || !j.is_object() || !j.contains("key") || !j["key"].is_string() ||
          !j.contains("record")) {
        ++dropped_lines_;
        continue;
      }
      const std::string key = j["key"].get<std::string>();
      auto it = index_.find(key);
      if (it != index_.end()) {
        records_[it->second].second = j["record"];
      } else {
        index_[key] = records_.size();
        records_.emplace_back(key, j["record"]);
      }
    }
  }
  file_ = std::fopen(path_.c_str(), resume ? "a" : "w");
  if (!file_)
    throw RuntimeFailure(fmt::format("cannot open journal {} for writing", path_.string()));
  // A torn last line has no newline: start our appends on a fresh line.
  if (resume && dropped_lines_ > 0) std::fputc('\n', file_);
}

Journal::~Journal() {
  if (file_) std::fclose(file_);
}

const Json* Journal::find(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &records_[it->second].second;
}

void Journal::append(const std::string& key, const Json& record) {
  const std::string line = Json{{"key", key}, {"record", record}}.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    throw RuntimeFailure(fmt::format("cannot write to journal {}", path_.string()));
  ::fsync(fileno(file_));
  auto it = index_.find(key);
  if (it != index_.end()) {
    records_[it->second].second = record;
  } else {
    index_[key] = records_.size();
    records_.emplace_back(key, record);
  }
}

std::vector<std::pair<std::string, Json>> Journal::entries() const { return records_; }

}  // namespace hetplan
