// The generic and async proxies under the emulator (rules in simt_sm90.h): per byte of shared
// memory, the thread that last wrote it through the generic proxy and has not executed
// fence.proxy.async since; an async-proxy access (wgmma, a bulk copy) to such a byte throws.
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "kernels/experimental/emulator/simt_sm90.h"

namespace hetplan::kernels::emu {
namespace {

struct BlockState {
  // Per byte of shared memory: 1 + the unfenced writer, or 0.
  std::vector<int16_t> unfenced_writer;
  // Per thread: the bytes it wrote since its last fence, [offset, offset + bytes).
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> unfenced;
};

BlockState g_block;
uint64_t g_serial = ~uint64_t{0};

BlockState& block() {
  if (g_serial != block_serial()) {
    g_block = BlockState{};
    g_block.unfenced.resize(1024);
    g_serial = block_serial();
  }
  return g_block;
}

class Proxies : public Extension {
 public:
  void generic_smem_write(uint32_t offset, size_t bytes) override {
    BlockState& s = block();
    const int linear = linear_thread();
    if (s.unfenced_writer.size() < offset + bytes) s.unfenced_writer.resize(offset + bytes, 0);
    for (size_t i = 0; i < bytes; ++i)
      s.unfenced_writer[offset + i] = static_cast<int16_t>(linear + 1);
    auto& mine = s.unfenced.at(static_cast<size_t>(linear));
    if (!mine.empty() && mine.back().first + mine.back().second == offset)
      mine.back().second += static_cast<uint32_t>(bytes);
    else
      mine.emplace_back(offset, static_cast<uint32_t>(bytes));
  }
};

Proxies g_proxies;
// Registered when this file is linked in, which any kernel using the sm_90 layer does (through
// fence_proxy_async), before the first launch.
[[maybe_unused]] const bool g_registered = (add_extension(&g_proxies), true);

}  // namespace

void fence_proxy_async() {
  BlockState& s = block();
  const int linear = linear_thread();
  auto& mine = s.unfenced.at(static_cast<size_t>(linear));
  for (const auto& [offset, bytes] : mine)
    for (uint32_t i = offset; i < offset + bytes; ++i)
      if (s.unfenced_writer[i] == linear + 1) s.unfenced_writer[i] = 0;
  mine.clear();
}

void check_async_proxy_read(uint32_t offset, size_t bytes) {
  check_async_proxy_access(offset, bytes, "wgmma reads");
}

void check_async_proxy_access(uint32_t offset, size_t bytes, const char* access) {
  smem_at(offset, bytes);  // within the block's shared memory
  const BlockState& s = block();
  for (size_t i = offset; i < offset + bytes && i < s.unfenced_writer.size(); ++i)
    if (const int writer = s.unfenced_writer[i]; writer != 0)
      throw std::runtime_error(std::string(access) + " shared memory at offset " +
                               std::to_string(i) + " that thread " + std::to_string(writer - 1) +
                               " wrote through the generic proxy (st.shared, cp.async, "
                               "mbarrier.init) without a fence.proxy.async after it");
}

}  // namespace hetplan::kernels::emu
