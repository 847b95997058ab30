# Third-party libraries, all from Debian packages (scripts/setup.sh installs them).
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt 9 REQUIRED)
find_package(CLI11 2 REQUIRED)
find_package(yaml-cpp 0.7 REQUIRED)
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
