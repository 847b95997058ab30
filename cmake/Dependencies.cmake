# Third-party libraries, all from Debian packages (scripts/setup.sh installs them).
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt 9 REQUIRED)
find_package(CLI11 2 REQUIRED)
find_package(yaml-cpp 0.7 REQUIRED)
# Link yaml-cpp statically where the static library exists, so that binaries carried to a GPU
# machine need no libyaml-cpp there.
find_library(HETPLAN_YAML_CPP_STATIC NAMES libyaml-cpp.a)
if(HETPLAN_YAML_CPP_STATIC)
  add_library(hetplan_yaml STATIC IMPORTED)
  set_target_properties(hetplan_yaml PROPERTIES IMPORTED_LOCATION ${HETPLAN_YAML_CPP_STATIC}
                        INTERFACE_INCLUDE_DIRECTORIES
                        "$<TARGET_PROPERTY:yaml-cpp,INTERFACE_INCLUDE_DIRECTORIES>")
else()
  add_library(hetplan_yaml INTERFACE)
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

# fmt header-only, so that binaries carried to a GPU machine need no libfmt there.
add_library(hetplan_fmt INTERFACE)
target_link_libraries(hetplan_fmt INTERFACE fmt::fmt-header-only)
