# `cmake --install` and the Debian package (CPack).
#
#   <prefix>/bin/hetplan
#   <prefix>/lib/hetplan/libhetplan_gpu.so   CUDA builds only: the module `calibrate` loads
#   <prefix>/share/hetplan/calibration_data  the shipped calibration data, found by the installed
#                         /examples          binary through ../share/hetplan
#                         /presets           (costmodel/install_paths.h); the presets are also
#                         /scripts           embedded in the binary; the reference harness that
#                                            `hetplan measure` runs
#
# Two components: `hetplan` (everything but the module) and `gpu` (the module, whose cuBLAS(Lt),
# CUPTI and NCCL come from NVIDIA's CUDA toolkit, not from Debian). The package `hetplan` depends on
# Debian's own packages only, as dpkg-shlibdeps finds them; `hetplan-gpu` (CUDA builds only)
# depends on `hetplan` and finds the CUDA libraries where they were at build time (its RPATH).
set(_share share/hetplan)
install(TARGETS hetplan RUNTIME DESTINATION bin COMPONENT hetplan)
install(DIRECTORY calibration_data examples presets DESTINATION ${_share} COMPONENT hetplan)
install(FILES scripts/reference_train.py DESTINATION ${_share}/scripts COMPONENT hetplan)
install(DIRECTORY scripts/reference DESTINATION ${_share}/scripts COMPONENT hetplan
        PATTERN __pycache__ EXCLUDE)
set(_components hetplan)
if(HETPLAN_HAVE_CUDA)
  set_target_properties(hetplan_gpu PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS hetplan_gpu LIBRARY DESTINATION lib/hetplan COMPONENT gpu)
  list(APPEND _components gpu)
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME hetplan)
set(CPACK_PACKAGE_VENDOR hetplan)
set(CPACK_PACKAGE_CONTACT "hetplan developers <hetplan@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Plans training and serving of large models on heterogeneous GPU clusters")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
    "hetplan calibrates GPUs, fits a cost model, searches training strategies (data, tensor and "
    "pipeline parallelism, schedules, recomputation, ZeRO) and serving placements, and reports "
    "predicted against measured throughput. Ships datasheet priors for every GPU preset.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_COMPONENTS_ALL ${_components})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_HETPLAN_PACKAGE_NAME hetplan)
set(CPACK_DEBIAN_HETPLAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_HETPLAN_PACKAGE_SUGGESTS "python3-torch")  # `hetplan measure`'s harness
set(CPACK_DEBIAN_GPU_PACKAGE_NAME hetplan-gpu)
set(CPACK_DEBIAN_GPU_PACKAGE_SHLIBDEPS OFF)  # the CUDA libraries are no Debian package's
set(CPACK_DEBIAN_GPU_PACKAGE_DEPENDS "hetplan (= ${PROJECT_VERSION}), libc6, libstdc++6")
set(CPACK_COMPONENT_HETPLAN_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")
string(CONCAT CPACK_COMPONENT_GPU_DESCRIPTION
    "hetplan's CUDA half (libhetplan_gpu.so), which `hetplan calibrate` loads to measure a GPU. "
    "Needs NVIDIA's CUDA runtime libraries (cuBLAS, cuBLASLt, CUPTI, NCCL) of the toolkit it was "
    "built with.")
include(CPack)
