#include "costmodel/journal.h"

#include <unistd.h>
#include <fstream>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan {

Journal::Journal(std::filesystem::path path, bool resume) : path_(std::move(path)) {
  if (resume && std::filesystem::exists(path_)) load();
  file_ = std::fopen(path_.c_str(), resume ? "a" : "w");
  if (!file_)
    throw RuntimeFailure(fmt::format("cannot open journal {} for writing", path_.string()));
  // A torn last line has no newline: start our appends on a fresh line.
  if (resume && dropped_lines_ > 0) std::fputc('\n', file_);
}

std::unique_ptr<Journal> Journal::read_only(const std::filesystem::path& path) {
  if (!std::filesystem::is_regular_file(path))
    throw InputError(fmt::format("{}: no such journal (a file)", path.string()));
  std::unique_ptr<Journal> journal(new Journal());
  journal->path_ = path;
  journal->load();
  return journal;
}

void Journal::load() {
  std::ifstream in(path_);
  if (!in) throw RuntimeFailure(fmt::format("cannot read journal {}", path_.string()));
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
  if (in.bad()) throw RuntimeFailure(fmt::format("cannot read journal {}", path_.string()));
}

Journal::~Journal() {
  if (file_) std::fclose(file_);
}

const Json* Journal::find(const std::string& key) const {
  auto it = index_.find(key);
  return it == index_.end() ? nullptr : &records_[it->second].second;
}

void Journal::append(const std::string& key, const Json& record) {
  if (!file_)
    throw RuntimeFailure(fmt::format("journal {} was opened to be read only", path_.string()));
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

}  // namespace hetplan
