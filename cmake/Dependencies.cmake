# Third-party libraries, all from Debian packages (scripts/setup.sh installs them).
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt 9 REQUIRED)
find_package(CLI11 2 REQUIRED)
find_package(yaml-cpp 0.7 REQUIRED)
# Link yaml-cpp statically into executables where the static library exists, so that binaries
# carried to a GPU machine need no libyaml-cpp there. Debian's libyaml-cpp.a is not
# position-independent, so shared modules (libhetplan_gpu.so) link the shared library instead
# (scripts/gpu_bundle.sh carries it).
find_library(HETPLAN_YAML_CPP_STATIC NAMES libyaml-cpp.a)
add_library(hetplan_yaml INTERFACE)
target_include_directories(hetplan_yaml INTERFACE
                           "$<TARGET_PROPERTY:yaml-cpp,INTERFACE_INCLUDE_DIRECTORIES>")
if(HETPLAN_YAML_CPP_STATIC)
  # $<TARGET_PROPERTY:TYPE> is the type of the target being linked.
  target_link_libraries(hetplan_yaml INTERFACE
      "$<IF:$<STREQUAL:$<TARGET_PROPERTY:TYPE>,EXECUTABLE>,${HETPLAN_YAML_CPP_STATIC},yaml-cpp>")
else()
  target_link_libraries(hetplan_yaml INTERFACE yaml-cpp)
endif()
find_package(Threads REQUIRED)
find_package(Boost 1.74 REQUIRED)  # Boost.Graph max-flow is header-only
find_package(PkgConfig REQUIRED)
pkg_check_modules(CBC IMPORTED_TARGET cbc)
if(NOT CBC_FOUND)
  message(FATAL_ERROR "CBC not found: run scripts/setup.sh (Debian package coinor-libcbc-dev)")
endif()
if(HETPLAN_TESTS)
  find_package(GTest REQUIRED)
endif()

# fmt from its headers, with its formatting engine compiled once into a static library
# (cmake/fmt_library.cpp) rather than in every file that formats (FMT_HEADER_ONLY), and no libfmt
# needed where binaries are carried to a GPU machine.
add_library(hetplan_fmt STATIC ${CMAKE_CURRENT_LIST_DIR}/fmt_library.cpp)
target_include_directories(hetplan_fmt PUBLIC
                           "$<TARGET_PROPERTY:fmt::fmt-header-only,INTERFACE_INCLUDE_DIRECTORIES>")
set_target_properties(hetplan_fmt PROPERTIES POSITION_INDEPENDENT_CODE ON)
