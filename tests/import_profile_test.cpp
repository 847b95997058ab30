// The .npy reader and the AMP and Helix profile importers on the real published files in
// examples/external (their READMEs give the provenance); expected values read off those files.
#include <filesystem>
#include <fstream>
#include <functional>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "report/import/npy.h"
#include "report/import/profile_import.h"
#include "test_util.h"

namespace hetplan {
namespace {

using testing::error_of;

const std::filesystem::path kExternal = HETPLAN_EXTERNAL_DATA;

std::string npy_bytes(const std::string& header, size_t data_bytes) {
  std::string h = header;
  while ((10 + h.size() + 1) % 64 != 0) h += ' ';
  h += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>(h.size() >> 8);
  return out + h + std::string(data_bytes, '\0');
}

TEST(Npy, ReadsAmpKnownCostArrays) {
  const NpyArray a = read_npy(kExternal / "amp/known_cost/gpt2_P3_1.npy");
  EXPECT_EQ(a.shape, std::vector<int64_t>{30});
  EXPECT_FALSE(a.fortran_order);
  ASSERT_EQ(a.values.size(), 30u);
  // The first, third and last doubles of the file (python3 struct.unpack('<30d', ...)).
  EXPECT_DOUBLE_EQ(a.values[0], 0.00036597251892089844);
  EXPECT_DOUBLE_EQ(a.values[2], 0.004277944564819336);
  EXPECT_DOUBLE_EQ(a.values[29], 0.0008683204650878906);
}

TEST(Npy, ReadsShapesAndRejectsWhatItCannotRead) {
  const NpyArray m = parse_npy(npy_bytes("{'descr': '<f4', 'fortran_order': False, "
                                         "'shape': (2, 3), }",
                                         24),
                               "m.npy");
  EXPECT_EQ(m.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(m.values, std::vector<double>(6, 0.0));
  EXPECT_EQ(error_of([] { parse_npy("PK\x03\x04 not numpy", "z.npy"); }),
            "z.npy: not a .npy file (no \\x93NUMPY magic)");
  EXPECT_EQ(error_of([] {
              parse_npy(npy_bytes("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }", 24),
                        "i.npy");
            }),
            "i.npy: header.descr: expected little-endian float64 '<f8' (or '<f4'), found '<i8'");
  EXPECT_NE(error_of([] {
              parse_npy(npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (30,), }", 80),
                        "t.npy");
            }).find("t.npy: expected 240 bytes of data"),
            std::string::npos);
  // A shape whose product overflows (2^32 x 2^32 x 16 = 2^68) is refused before it is multiplied
  // out, where it wrapped around.
  EXPECT_EQ(error_of([] {
              parse_npy(npy_bytes("{'descr': '<f8', 'fortran_order': False, "
                                  "'shape': (4294967296, 4294967296, 16), }",
                                  8),
                        "o.npy");
            }),
            "o.npy: header.shape: expected a shape of at most 2^60 values (no file holds more)");
}

TEST(AmpImport, MapsGpt2EntriesOntoHetplanLayers) {
  std::vector<std::filesystem::path> files;
  for (int tp : {1, 2, 4})
    files.push_back(kExternal / fmt::format("amp/known_cost/gpt2_P3_{}.npy", tp));
  const CalibrationFile cal = import_amp_known_cost(files, {});
  EXPECT_EQ(cal.context.source, "imported:amp");
  EXPECT_EQ(cal.context.gpu_type, "v100");
  EXPECT_EQ(cal.context.node_type, "p3.8xlarge");
  ASSERT_EQ(cal.layer_forward.size(), 90u);
  const auto& emb = cal.layer_forward[0];
  EXPECT_EQ(emb.layer, 0);
  EXPECT_EQ(emb.kind, "embedding");
  EXPECT_EQ(emb.tp, 1);
  EXPECT_EQ(emb.dtype, Dtype::kFp16);
  const auto& block = cal.layer_forward[2];  // AMP entry 2 = the first transformer layer
  EXPECT_EQ(block.layer, 1);
  EXPECT_EQ(block.kind, "transformer");
  EXPECT_EQ(block.hidden, 1024);
  EXPECT_EQ(block.heads, 16);
  EXPECT_DOUBLE_EQ(block.forward_s.median, 0.004277944564819336);
  EXPECT_EQ(cal.layer_forward[25].layer, 24);  // entry 25 = the 24th block
  EXPECT_EQ(cal.layer_forward[28].kind, "lm_head");
  EXPECT_EQ(cal.layer_forward[28].layer, 25);
  EXPECT_EQ(cal.layer_forward[30].tp, 2);  // the second file
  EXPECT_EQ(cal.layer_forward[89].tp, 4);

  // Written and read back through the calibration format.
  const auto path = std::filesystem::temp_directory_path() /
                    ("hetplan_amp_" + std::to_string(::getpid()) + ".json");
  save_calibration(cal, path);
  const CalibrationFile back = load_calibration(path);
  std::filesystem::remove(path);
  ASSERT_EQ(back.layer_forward.size(), 90u);
  EXPECT_EQ(back.layer_forward[28].kind, "lm_head");
  EXPECT_DOUBLE_EQ(back.layer_forward[2].forward_s.median, 0.004277944564819336);
}

TEST(AmpImport, KeepsOtherModelsUnmappedAndRefusesMixedMachines) {
  const CalibrationFile t =
      import_amp_known_cost({kExternal / "amp/known_cost/transgan_P3_1.npy"}, {});
  ASSERT_EQ(t.layer_forward.size(), 56u);
  EXPECT_EQ(t.layer_forward[10].layer, -1);
  EXPECT_EQ(t.layer_forward[10].kind, "other");
  EXPECT_NE(t.context.notes.find("56 entries kept unmapped"), std::string::npos);
  EXPECT_NE(error_of([] {
              import_amp_known_cost({kExternal / "amp/known_cost/gpt2_P3_1.npy",
                                     kExternal / "amp/known_cost/gpt2_G4_1.npy"},
                                    {});
            }).find("machine G4 differs from P3: one calibration file holds one GPU type"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              import_amp_known_cost({kExternal / "amp/README.md"}, {});
            }).find("expected an AMP known-cost file named <model>_<machine>_<tp>.npy"),
            std::string::npos);
}

// QA: --model gpt2-medium left every record unmapped (layer -1), --model nosuch and arrays of the
// wrong length were taken, --tp 2 on the _1 and _2 files wrote two forward times per layer.
TEST(AmpImport, ModelNamesLengthsAndDegreesAreChecked) {
  const auto g4 = [](int tp) {
    return kExternal / fmt::format("amp/known_cost/gpt2_G4_{}.npy", tp);
  };
  ProfileImportOptions o;
  o.model = "gpt2-medium";  // the hetplan model AMP's gpt2 maps onto
  const CalibrationFile medium = import_amp_known_cost({g4(1)}, o);
  ASSERT_EQ(medium.layer_forward.size(), 30u);
  EXPECT_EQ(medium.layer_forward[2].model, "gpt2");
  EXPECT_EQ(medium.layer_forward[2].layer, 1);
  EXPECT_EQ(medium.layer_forward[2].kind, "transformer");
  EXPECT_NE(medium.context.notes.find("--model gpt2-medium read as AMP's gpt2"), std::string::npos);
  o.model = "nosuch";
  EXPECT_EQ(error_of([&] { import_amp_known_cost({g4(1)}, o); }),
            "--model: unknown AMP model \"nosuch\": hetplan knows the layer lists of gpt2 (30 "
            "entries, also named gpt2-medium or amp-gpt2), transgan (56 entries); --model names "
            "the AMP model whose layer list the files hold");

  const auto dir =
      std::filesystem::temp_directory_path() / ("hetplan_amp_checks_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto short_file = dir / "gpt2_G4_1.npy";
  std::ofstream(short_file, std::ios::binary)
      << npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (29,), }", 29 * 8);
  EXPECT_EQ(error_of([&] { import_amp_known_cost({short_file}, {}); }),
            short_file.string() +
                ": header.shape: expected 30 entries (AMP's gpt2 layer list), "
                "found 29");
  const auto bert = dir / "bert_G4_1.npy";
  std::filesystem::copy_file(g4(1), bert);
  EXPECT_NE(error_of([&] {
              import_amp_known_cost({bert}, {});
            }).find("unknown AMP model \"bert\": hetplan knows the layer lists of gpt2"),
            std::string::npos);
  const auto tp3 = dir / "gpt2_G4_3.npy";
  std::filesystem::copy_file(g4(1), tp3);
  EXPECT_EQ(error_of([&] { import_amp_known_cost({tp3}, {}); }),
            tp3.string() +
                ": tensor-parallel degree 3 (AMP measured 1, 2 and 4): expected a "
                "divisor of gpt2's 16 heads within the machine's 4 GPUs");
  std::filesystem::remove_all(dir);

  ProfileImportOptions two;
  two.tp = 2;
  EXPECT_EQ(error_of([&] {
              import_amp_known_cost({g4(1), g4(2)}, two);
            }),
            g4(2).string() + ": gpt2 at tensor-parallel degree 2 again (also " + g4(1).string() +
                "; --tp gives every file the same degree): one file per model and degree");
}

// Sailor's OPT-350 profiles (examples/external/sailor): the GPU and its node from the folder,
// OPT's layer list mapped onto opt-350m's layers, fp32 read as tf32.
TEST(SailorImport, MapsOptEntriesAndTakesTheGpuFromTheFolder) {
  const CalibrationFile cal = import_sailor_profiles({kExternal / "sailor/OPT-350/V100-16"}, {});
  EXPECT_EQ(cal.context.source, "imported:sailor");
  EXPECT_EQ(cal.context.gpu_type, "v100");
  EXPECT_EQ(cal.context.node_type, "n1-v100x4");
  ASSERT_EQ(cal.layer_forward.size(), 4u * 26u);  // profile_1, _2, _4, _8
  const auto& emb = cal.layer_forward[0];
  EXPECT_EQ(emb.kind, "embedding");
  EXPECT_EQ(emb.vocab, 50272);
  EXPECT_EQ(emb.dtype, Dtype::kTf32);
  const auto& block = cal.layer_forward[1];
  EXPECT_EQ(block.layer, 1);
  EXPECT_EQ(block.kind, "transformer");
  EXPECT_EQ(block.hidden, 1024);
  EXPECT_EQ(block.heads, 16);
  EXPECT_EQ(block.seq_len, 2048);
  EXPECT_EQ(block.ffn_hidden, 4096);
  EXPECT_EQ(block.activation, "relu");
  EXPECT_EQ(block.tp, 1);
  const NpyArray a = read_npy(kExternal / "sailor/OPT-350/V100-16/profile_1.npy");
  EXPECT_DOUBLE_EQ(block.forward_s.median, a.values[1]);
  EXPECT_EQ(cal.layer_forward[25].kind, "lm_head");
  EXPECT_EQ(cal.layer_forward[25].layer, 25);
  EXPECT_EQ(cal.layer_forward[26].tp, 2);
  EXPECT_EQ(cal.layer_forward[103].tp, 8);

  // The MLP's width and activation go through the calibration format.
  const auto path = std::filesystem::temp_directory_path() /
                    ("hetplan_sailor_" + std::to_string(::getpid()) + ".json");
  save_calibration(cal, path);
  const CalibrationFile back = load_calibration(path);
  std::filesystem::remove(path);
  ASSERT_EQ(back.layer_forward.size(), 104u);
  EXPECT_EQ(back.layer_forward[1].ffn_hidden, 4096);
  EXPECT_EQ(back.layer_forward[1].activation, "relu");
  EXPECT_EQ(back.layer_forward[1].dtype, Dtype::kTf32);

  // A GPU whose node the repository does not give: no node, said in the notes.
  const CalibrationFile titan =
      import_sailor_profiles({kExternal / "sailor/OPT-350/Titan-RTX/profile_1.npy"}, {});
  EXPECT_EQ(titan.context.gpu_type, "titan-rtx");
  EXPECT_EQ(titan.context.node_type, "");
  EXPECT_NE(titan.context.notes.find("the node is not known"), std::string::npos);
}

// Sailor's Metis-format profiles: forward and backward per layer, in milliseconds, by micro-batch.
TEST(SailorImport, MetisProfilesAreForwardAndBackwardTotalsByMicroBatch) {
  const auto gpu = kExternal / "sailor/metis/GPT-Neo-2.7/GH-96";
  const CalibrationFile cal = import_sailor_profiles({gpu / "mbs4_tmp2.json"}, {});
  EXPECT_EQ(cal.context.gpu_type, "gh200-96gb");
  EXPECT_EQ(cal.context.node_type, "gh200-superchip-4");
  ASSERT_EQ(cal.layer_forward.size(), 34u);  // embedding, 32 layers, head
  const auto& block = cal.layer_forward[1];
  EXPECT_EQ(block.model, "GPT-Neo-2.7");
  EXPECT_EQ(block.kind, "transformer");
  EXPECT_EQ(block.hidden, 2560);
  EXPECT_EQ(block.heads, 32);
  EXPECT_EQ(block.ffn_hidden, 10240);
  EXPECT_EQ(block.activation, "gelu");
  EXPECT_EQ(block.micro_batch, 4);
  EXPECT_EQ(block.tp, 2);
  EXPECT_TRUE(block.forward_backward);
  EXPECT_EQ(block.framework, "deepspeed");
  const Document doc = load_document(gpu / "mbs4_tmp2.json");
  const double ms = doc.root["execution_time"]["layer_compute_total_ms"][1].get<double>();
  EXPECT_DOUBLE_EQ(block.forward_s.median, ms / 1e3);
  EXPECT_EQ(cal.layer_forward[33].kind, "lm_head");
  EXPECT_NE(cal.context.notes.find("forward and backward together"), std::string::npos);

  const auto dir = std::filesystem::temp_directory_path() /
                   ("hetplan_sailor_metis_" + std::to_string(::getpid()));
  const auto folder = dir / "OPT-350" / "V100-16";
  std::filesystem::create_directories(folder);
  const auto short_file = folder / "mbs2_tmp1.json";
  std::ofstream(short_file) << R"({"execution_time": {"layer_compute_total_ms": [1, 2, 3]}})";
  EXPECT_EQ(error_of([&] { import_sailor_profiles({short_file}, {}); }),
            short_file.string() +
                ": execution_time.layer_compute_total_ms: expected 26 per-layer times (OPT-350's "
                "embedding, 24 layers and head), found 3");
  std::filesystem::remove_all(dir);
}

TEST(SailorImport, UnknownGpusNamesAndMixedFoldersAreRefused) {
  const auto rtx2080 = kExternal / "sailor/OPT-350/RTX-2080/profile_1.npy";
  EXPECT_NE(error_of([&] {
              import_sailor_profiles({rtx2080}, {});
            }).find("the GPU folder \"RTX-2080\" is none hetplan knows of Sailor's"),
            std::string::npos);
  ProfileImportOptions o;
  o.gpu_type = "rtx-2080ti";
  EXPECT_EQ(import_sailor_profiles({rtx2080}, o).context.gpu_type, "rtx-2080ti");
  EXPECT_NE(error_of([] {
              import_sailor_profiles({kExternal / "sailor/OPT-350/V100-16/profile_1.npy",
                                      kExternal / "sailor/OPT-350/A100-40/profile_1.npy"},
                                     {});
            }).find("GPU folder A100-40 differs from V100-16"),
            std::string::npos);

  const auto dir = std::filesystem::temp_directory_path() /
                   ("hetplan_sailor_checks_" + std::to_string(::getpid()));
  const auto gpu = dir / "OPT-350" / "V100-16";
  std::filesystem::create_directories(gpu);
  const auto short_file = gpu / "profile_1.npy";
  std::ofstream(short_file, std::ios::binary)
      << npy_bytes("{'descr': '<f8', 'fortran_order': False, 'shape': (25,), }", 25 * 8);
  EXPECT_EQ(error_of([&] { import_sailor_profiles({short_file}, {}); }),
            short_file.string() +
                ": header.shape: expected a vector of 26 per-layer times (OPT-350's embedding, "
                "24 layers and head), found 25 values in 1 dimensions");
  const auto misnamed = gpu / "times_1.npy";
  std::filesystem::copy_file(kExternal / "sailor/OPT-350/V100-16/profile_1.npy", misnamed);
  EXPECT_EQ(error_of([&] { import_sailor_profiles({misnamed}, {}); }),
            misnamed.string() +
                ": expected a Sailor profile named profile_<tp>.npy (e.g. profile_2.npy) or "
                "mbs<M>_tmp<T>.json (e.g. mbs4_tmp2.json)");
  const auto tp3 = gpu / "profile_3.npy";
  std::filesystem::copy_file(kExternal / "sailor/OPT-350/V100-16/profile_1.npy", tp3);
  EXPECT_EQ(error_of([&] { import_sailor_profiles({tp3}, {}); }),
            tp3.string() + ": tensor-parallel degree 3: expected a divisor of OPT-350's 16 heads");
  const auto other_model = dir / "LLAMA-3-8" / "V100-16";
  std::filesystem::create_directories(other_model);
  std::filesystem::copy_file(kExternal / "sailor/OPT-350/V100-16/profile_1.npy",
                             other_model / "profile_1.npy");
  EXPECT_NE(error_of([&] {
              import_sailor_profiles({other_model}, {});
            }).find("unknown Sailor model \"LLAMA-3-8\""),
            std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(HelixImport, ReadsPromptAndDecodeTables) {
  const CalibrationFile cal =
      import_helix_profiles({kExternal / "helix/profiles/llama2_70b/a100"}, {});
  EXPECT_EQ(cal.context.source, "imported:helix");
  EXPECT_EQ(cal.context.gpu_type, "a100-40gb");
  // prompt_bs2time.csv: 45 rows after "0,0"; decode_bs2time.csv: 61.
  ASSERT_EQ(cal.serving_layer.size(), 106u);
  const auto& first = cal.serving_layer.front();
  EXPECT_EQ(first.model, "llama2-70b");
  EXPECT_EQ(first.phase, "prompt");
  EXPECT_EQ(first.tokens, 250);  // row "250,2"
  EXPECT_DOUBLE_EQ(first.time_s.median, 0.002);
  EXPECT_EQ(first.gpus, 1);
  const auto& last = cal.serving_layer.back();
  EXPECT_EQ(last.phase, "decode");
  EXPECT_EQ(last.tokens, 800);  // row "800,11"
  EXPECT_DOUBLE_EQ(last.time_s.median, 0.011);

  const CalibrationFile two =
      import_helix_profiles({kExternal / "helix/profiles/llama2_70b/l4x2/prompt_bs2time.csv"}, {});
  EXPECT_EQ(two.context.gpu_type, "l4");
  EXPECT_EQ(two.serving_layer.front().gpus, 2);
}

TEST(HelixImport, MalformedRowsAndMixedGpus) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("hetplan_helix_" + std::to_string(::getpid())) / "llama2_70b" / "t4";
  std::filesystem::create_directories(dir);
  { std::ofstream(dir / "prompt_bs2time.csv") << "0,0\n250,7\n500,fast\n"; }
  EXPECT_EQ(error_of([&] { import_helix_profiles({dir}, {}); }),
            (dir / "prompt_bs2time.csv").string() +
                ": line 3: expected \"batch,milliseconds\" (a whole number and a number, both "
                ">= 0), found \"500,fast\"");
  // QA: a table with no data rows wrote an empty calibration file with exit status 0.
  { std::ofstream(dir / "prompt_bs2time.csv") << "0,0\n\n"; }
  EXPECT_EQ(error_of([&] { import_helix_profiles({dir}, {}); }),
            (dir / "prompt_bs2time.csv").string() +
                ": no measured row (\"tokens,milliseconds\" with tokens > 0): the table is empty "
                "or holds only Helix's \"0,0\" anchor");
  { std::ofstream(dir / "prompt_bs2time.csv") << ""; }
  EXPECT_NE(error_of([&] { import_helix_profiles({dir}, {}); }).find("no measured row"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              import_helix_profiles({kExternal / "helix/profiles/llama2_70b/a100",
                                     kExternal / "helix/profiles/llama2_70b/v100"},
                                    {});
            }).find("GPU type v100 differs from a100-40gb"),
            std::string::npos);
  // The GPU count in the folder's name: 22 digits overflowed std::stoll ("internal error").
  const auto many = dir.parent_path() / "t4x9999999999999999999999";
  std::filesystem::create_directories(many);
  { std::ofstream(many / "prompt_bs2time.csv") << "0,0\n250,7\n"; }
  EXPECT_EQ(error_of([&] { import_helix_profiles({many}, {}); }),
            (many / "prompt_bs2time.csv").string() +
                ": folder \"t4x9999999999999999999999\": expected 1 to 1024 GPUs after x");
  // What the folders do not say, --gpu-type and --model do; a folder or file of no table is named.
  const auto h100 = dir.parent_path() / "h100";
  std::filesystem::create_directories(h100);
  { std::ofstream(h100 / "decode_bs2time.csv") << "0,0\n16,9\n"; }
  EXPECT_EQ(error_of([&] { import_helix_profiles({h100}, {}); }),
            (h100 / "decode_bs2time.csv").string() +
                ": cannot tell the GPU type from the folder \"h100\" (known: a100, v100, l4, t4, "
                "with xN for N GPUs); give --gpu-type");
  ProfileImportOptions typed;
  typed.gpu_type = "h100-sxm";
  EXPECT_EQ(import_helix_profiles({h100}, typed).context.gpu_type, "h100-sxm");
  const auto unnamed = dir.parent_path().parent_path() / "mistral_7b" / "a100";
  std::filesystem::create_directories(unnamed);
  { std::ofstream(unnamed / "prompt_bs2time.csv") << "0,0\n250,7\n"; }
  EXPECT_EQ(error_of([&] { import_helix_profiles({unnamed}, {}); }),
            (unnamed / "prompt_bs2time.csv").string() +
                ": cannot tell the model from the folder \"mistral_7b\" (known: llama2_70b, "
                "llama1_30b); give --model");
  ProfileImportOptions modelled;
  modelled.model = "llama2-7b";
  EXPECT_EQ(import_helix_profiles({unnamed}, modelled).serving_layer.front().model, "llama2-7b");
  const auto empty = dir.parent_path() / "a100";
  std::filesystem::create_directories(empty);
  EXPECT_EQ(error_of([&] { import_helix_profiles({empty}, {}); }),
            empty.string() + ": no prompt_bs2time.csv or decode_bs2time.csv here");
  EXPECT_EQ(error_of([&] { import_helix_profiles({many / "prompt.csv"}, {}); }),
            (many / "prompt.csv").string() +
                ": expected prompt_bs2time.csv, decode_bs2time.csv or a folder holding them");
  std::filesystem::remove_all(dir.parent_path().parent_path());
}

}  // namespace
}  // namespace hetplan
