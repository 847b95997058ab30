#include "costmodel/atomic_file.h"

#include <fstream>
#include <system_error>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan {

std::filesystem::path write_target(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  constexpr int kMaxLinks = 40;  // Linux's limit (ELOOP)
  fs::path p = path;
  for (int hop = 0; hop < kMaxLinks; ++hop) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return p;
    const fs::path link = fs::read_symlink(p, ec);
    if (ec) return p;
    p = link.is_absolute() ? link : p.parent_path() / link;
  }
  throw RuntimeFailure(fmt::format("{}: too many levels of symbolic links", path.string()));
}

void write_text_atomically(const std::string& text, const std::filesystem::path& output) {
  // Renaming over a symbolic link would replace the link with a regular file and leave the file
  // it leads to as it was: the temporary file goes beside the target, and the rename replaces it.
  const std::filesystem::path path = write_target(output);
  // A device or pipe (/dev/null, /dev/stdout) is written in place: renaming over it would
  // replace it with a regular file.
  std::error_code status_error;
  const auto status = std::filesystem::status(path, status_error);
  if (std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out) throw RuntimeFailure(fmt::format("error while writing {}", path.string()));
    return;
  }
  const std::filesystem::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw RuntimeFailure(fmt::format("cannot write {}", tmp.string()));
    out << text;
    if (!out) throw RuntimeFailure(fmt::format("error while writing {}", tmp.string()));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec)
    throw RuntimeFailure(
        fmt::format("cannot rename {} to {}: {}", tmp.string(), path.string(), ec.message()));
}

void write_json_atomically(const Json& json, const std::filesystem::path& path) {
  write_text_atomically(json.dump(1) + '\n', path);
}

}  // namespace hetplan
