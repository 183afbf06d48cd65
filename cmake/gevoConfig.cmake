# gevoConfig.cmake: find_package(gevo) support.
#
#   find_package(gevo)      # with gevo_DIR or CMAKE_PREFIX_PATH naming this directory
#   gevo_optimize(<target> KERNEL <name> SOURCE <file.cu> SPEC <file.gevo.toml> ...)
#
# Provides gevo_optimize() (GevoOptimize.cmake, beside this file); see
# docs/cmake.md.
include("${CMAKE_CURRENT_LIST_DIR}/GevoOptimize.cmake")
set(gevo_FOUND TRUE)
