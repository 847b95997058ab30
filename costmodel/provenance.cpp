#include "costmodel/provenance.h"

#include <fmt/format.h>

namespace hetplan {

Json to_json(const Provenance& p) {
  Json j;
  j["source"] = p.source;
  auto put = [&](const char* key, const std::string& v) {
    if (!v.empty()) j[key] = v;
  };
  auto put_int = [&](const char* key, int64_t v) {
    if (v != 0) j[key] = v;
  };
  put("gpu_type", p.gpu_type);
  put("gpu_name", p.gpu_name);
  put("node_type", p.node_type);
  put_int("gpu_count", p.gpu_count);
  put_int("sm_count", p.sm_count);
  put_int("sm_clock_mhz", p.sm_clock_mhz);
  put_int("memory_clock_mhz", p.memory_clock_mhz);
  put_int("memory_bytes", p.memory_bytes);
  put_int("l2_bytes", p.l2_bytes);
  put("driver", p.driver);
  put("cuda_runtime", p.cuda_runtime);
  put("cublas", p.cublas);
  put("nccl", p.nccl);
  put("cupti", p.cupti);
  put("host", p.host);
  put("date", p.date);
  put("command", p.command);
  put("hetplan_version", p.hetplan_version);
  put("notes", p.notes);
  if (!p.citations.empty()) j["citations"] = p.citations;
  return j;
}

Provenance provenance_from_json(ObjectReader r) {
  Provenance p;
  p.source = r.string("source");
  if (p.source != "measured" && p.source != "datasheet" && p.source.rfind("imported:", 0) != 0)
    r.fail("source", fmt::format("expected \"measured\", \"datasheet\" or \"imported:<tool>\", "
                                 "found \"{}\"",
                                 p.source));
  p.gpu_type = r.string_or("gpu_type", "");
  p.gpu_name = r.string_or("gpu_name", "");
  p.node_type = r.string_or("node_type", "");
  p.gpu_count = r.integer_or("gpu_count", 0);
  p.sm_count = r.integer_or("sm_count", 0);
  p.sm_clock_mhz = r.integer_or("sm_clock_mhz", 0);
  p.memory_clock_mhz = r.integer_or("memory_clock_mhz", 0);
  p.memory_bytes = r.integer_or("memory_bytes", 0);
  p.l2_bytes = r.integer_or("l2_bytes", 0);
  p.driver = r.string_or("driver", "");
  p.cuda_runtime = r.string_or("cuda_runtime", "");
  p.cublas = r.string_or("cublas", "");
  p.nccl = r.string_or("nccl", "");
  p.cupti = r.string_or("cupti", "");
  p.host = r.string_or("host", "");
  p.date = r.string_or("date", "");
  p.command = r.string_or("command", "");
  p.hetplan_version = r.string_or("hetplan_version", "");
  p.notes = r.string_or("notes", "");
  if (auto c = r.optional_object("citations")) {
    for (const auto& key : c->keys()) p.citations[key] = c->string(key);
  }
  r.finish();
  return p;
}

std::string context_gpu_kind(const Provenance& context) {
  return context.gpu_type.empty() ? context.gpu_name : context.gpu_type;
}

}  // namespace hetplan
