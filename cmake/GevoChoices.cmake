# GevoChoices.cmake: what gevo_optimize() chooses when the call leaves it
# open, each said at configure time with its reason (docs/cmake.md):
#   - the architecture (ARCH): the project's CMAKE_CUDA_ARCHITECTURES, else
#     the local GPU's, else sm_90;
#   - the daemon's name of the kernel: <project>.<tag of the build
#     directory>/<name>, or GEVO_PROJECT/<name>;
#   - MODE AUTO: REPLACE where its needs are met, else EMBED;
#   - a spec skeleton (gevod spec init) where SPEC does not exist yet.
# Included by GevoOptimize.cmake.
include_guard(GLOBAL)

set(GEVO_PROJECT "" CACHE STRING
  "The <project> of the daemon's names of this build's kernels (<project>/<KERNEL>); empty: the project's name and a tag of the build directory")
find_program(GEVO_NVIDIA_SMI NAMES nvidia-smi
  DOC "nvidia-smi, asked for the local GPU's architecture when the project chose none")

# Whether CMAKE_CUDA_ARCHITECTURES is what CMake put there from the CUDA
# compiler's default (the project did not choose). CMake writes that default
# into the cache with the help string "CUDA architectures" when neither the
# project (a variable set before enable_language(CUDA)), the command line
# (-D) nor CUDAARCHS set it. The value seen first is remembered, so a value
# given later with -D is a choice.
function(_gevo_cuda_archs_are_default out)
  set(result FALSE)
  if(DEFINED CACHE{CMAKE_CUDA_ARCHITECTURES})
    if(NOT DEFINED CACHE{_GEVO_CUDA_ARCHITECTURES_DEFAULT})
      get_property(help CACHE CMAKE_CUDA_ARCHITECTURES PROPERTY HELPSTRING)
      set(default "")
      if(help STREQUAL "CUDA architectures" AND "$ENV{CUDAARCHS}" STREQUAL "")
        set(default "$CACHE{CMAKE_CUDA_ARCHITECTURES}")
      endif()
      set(_GEVO_CUDA_ARCHITECTURES_DEFAULT "${default}" CACHE INTERNAL
        "gevo: CMAKE_CUDA_ARCHITECTURES as the CUDA compiler's default, when it was")
    endif()
    set(default "$CACHE{_GEVO_CUDA_ARCHITECTURES_DEFAULT}")
    if(NOT default STREQUAL ""
        AND "${CMAKE_CUDA_ARCHITECTURES}" STREQUAL "${default}"
        AND "$CACHE{CMAKE_CUDA_ARCHITECTURES}" STREQUAL "${default}")
      set(result TRUE)
    endif()
  endif()
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# The local GPU's architecture (sm_XY) and a description of it, from
# nvidia-smi, or "" and why there is none. A found GPU is remembered in the
# cache (the kernel's arch should not change with a driver hiccup).
function(_gevo_local_gpu out_arch out_desc out_why)
  if(NOT "$CACHE{_GEVO_LOCAL_GPU_ARCH}" STREQUAL "")
    set(${out_arch} "$CACHE{_GEVO_LOCAL_GPU_ARCH}" PARENT_SCOPE)
    set(${out_desc} "$CACHE{_GEVO_LOCAL_GPU_DESC}" PARENT_SCOPE)
    set(${out_why} "" PARENT_SCOPE)
    return()
  endif()
  set(arch "")
  set(desc "")
  set(why "")
  if(NOT GEVO_NVIDIA_SMI OR NOT EXISTS "${GEVO_NVIDIA_SMI}")
    set(why "no nvidia-smi found (GEVO_NVIDIA_SMI)")
  else()
    execute_process(COMMAND "${GEVO_NVIDIA_SMI}" --query-gpu=compute_cap,name --format=csv,noheader
      RESULT_VARIABLE rc OUTPUT_VARIABLE said ERROR_VARIABLE err TIMEOUT 30)
    string(STRIP "${said}" said)
    if(NOT rc STREQUAL "0" OR said STREQUAL "")
      string(STRIP "${err} ${said}" err)
      string(REGEX REPLACE "\n.*" "" err "${err}")
      set(why "${GEVO_NVIDIA_SMI} found no GPU (${err})")
    else()
      string(REPLACE "\n" ";" lines "${said}")
      set(caps)
      foreach(line IN LISTS lines)
        if(line MATCHES "^[ \t]*([0-9]+)\\.([0-9]+)[ \t]*,[ \t]*(.*)$")
          list(APPEND caps "${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
          if(arch STREQUAL "")
            set(arch "sm_${CMAKE_MATCH_1}${CMAKE_MATCH_2}")
            set(desc "${CMAKE_MATCH_3}, compute capability ${CMAKE_MATCH_1}.${CMAKE_MATCH_2}")
          endif()
        endif()
      endforeach()
      list(REMOVE_DUPLICATES caps)
      list(LENGTH caps kinds)
      if(arch STREQUAL "")
        string(REGEX REPLACE "\n.*" "" said "${said}")
        set(why "${GEVO_NVIDIA_SMI} gave no compute capability (${said})")
      elseif(kinds GREATER 1)
        string(REPLACE ";" ", " caps "${caps}")
        string(APPEND desc "; GPU 0 of GPUs of compute capabilities ${caps}")
      endif()
    endif()
  endif()
  if(NOT arch STREQUAL "")
    set(_GEVO_LOCAL_GPU_ARCH "${arch}" CACHE INTERNAL "gevo: the local GPU's architecture")
    set(_GEVO_LOCAL_GPU_DESC "${desc}" CACHE INTERNAL "gevo: the local GPU")
  endif()
  set(${out_arch} "${arch}" PARENT_SCOPE)
  set(${out_desc} "${desc}" PARENT_SCOPE)
  set(${out_why} "${why}" PARENT_SCOPE)
endfunction()

# The kernel's architecture: ARCH; else the first real architecture of the
# project's CMAKE_CUDA_ARCHITECTURES; else (none, the compiler's default,
# native, all, all-major) the local GPU's; else sm_90. Says which and why.
function(_gevo_choose_arch name given out)
  if(given)
    set(arch "${given}")
    set(why "ARCH")
  else()
    set(archs "")
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR "${CMAKE_CUDA_ARCHITECTURES}" STREQUAL "")
      set(not_chosen "CMAKE_CUDA_ARCHITECTURES is not set")
    elseif(CMAKE_CUDA_ARCHITECTURES MATCHES "^(native|all|all-major)$")
      set(not_chosen "CMAKE_CUDA_ARCHITECTURES is ${CMAKE_CUDA_ARCHITECTURES}")
    else()
      _gevo_cuda_archs_are_default(default)
      if(default)
        string(CONCAT not_chosen "CMAKE_CUDA_ARCHITECTURES (${CMAKE_CUDA_ARCHITECTURES}) is "
          "the CUDA compiler's default, not the project's choice")
      else()
        set(archs "${CMAKE_CUDA_ARCHITECTURES}")
      endif()
    endif()
    if(archs)
      # The first real one (an entry without -virtual): gevo evolves for one.
      set(arch "")
      foreach(entry IN LISTS archs)
        if(entry MATCHES "^([0-9]+[a-z]?)(-real)?$")
          set(arch "sm_${CMAKE_MATCH_1}")
          break()
        endif()
      endforeach()
      list(LENGTH archs count)
      set(shown "${archs}")
      if(arch STREQUAL "")
        list(GET archs 0 first)
        string(REGEX MATCH "^[0-9]+[a-z]?" first "${first}")
        set(arch "sm_${first}")
        set(why "CMAKE_CUDA_ARCHITECTURES (${shown}) has no real architecture: its first entry's")
      elseif(count GREATER 1)
        string(CONCAT why "the first real architecture of CMAKE_CUDA_ARCHITECTURES (${shown}): "
          "gevo evolves a kernel for one architecture (variants are timed on one GPU, their PTX "
          "is built for it, and newer GPUs JIT-compile that PTX); set ARCH for another")
      else()
        set(why "CMAKE_CUDA_ARCHITECTURES (${shown})")
      endif()
    else()
      _gevo_local_gpu(gpu gpu_desc gpu_why)
      if(gpu)
        set(arch "${gpu}")
        set(why "the local GPU's (${gpu_desc}, from nvidia-smi), as ${not_chosen}")
      else()
        set(arch sm_90)
        string(CONCAT why "gevo's default, as ${not_chosen} and ${gpu_why}; "
          "set ARCH or CMAKE_CUDA_ARCHITECTURES for the GPU the kernel runs on")
      endif()
    endif()
  endif()
  message(STATUS "gevo: ${name}: arch ${arch}: ${why}")
  set(${out} "${arch}" PARENT_SCOPE)
endfunction()

# [A-Za-z0-9._-], everything else "_", as the daemon names kernels.
function(_gevo_sanitize text out)
  string(REGEX REPLACE "[^A-Za-z0-9._-]" "_" text "${text}")
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

# The <project> of the daemon's name <project>/<name>: GEVO_PROJECT as is;
# else the PROJECT argument, the spec's `project` or the CMake project's
# name, with a tag of this build directory (six hex digits of the SHA-256 of
# its real path), so that two build directories of one project are two
# kernels to the daemon. Says which.
function(_gevo_choose_project name given user_spec out)
  if(NOT GEVO_PROJECT STREQUAL "")
    _gevo_sanitize("${GEVO_PROJECT}" project)
    set(why "GEVO_PROJECT")
  else()
    set(base "${given}")
    set(from "PROJECT")
    if(NOT base)
      _gevo_toml_top_key("${user_spec}" project base)
      set(from "the spec's project")
    endif()
    if(NOT base)
      set(base "${CMAKE_PROJECT_NAME}")
      set(from "the CMake project's name")
    endif()
    _gevo_sanitize("${base}" base)
    _gevo_build_tag(tag real)
    set(project "${base}.${tag}")
    string(CONCAT why "${from}, and ${tag} for this build directory (${real}) so that each "
      "build directory's kernels are its own (GEVO_PROJECT sets the whole name)")
  endif()
  message(STATUS "gevo: ${name}: gevod names it ${project}/${name}: ${why}")
  set(${out} "${project}" PARENT_SCOPE)
endfunction()

# Six hex digits of the SHA-256 of the build directory's real path, and that path.
function(_gevo_build_tag out_tag out_real)
  file(REAL_PATH "${CMAKE_BINARY_DIR}" real)
  string(SHA256 hash "${real}")
  string(SUBSTRING "${hash}" 0 6 tag)
  set(${out_tag} "${tag}" PARENT_SCOPE)
  set(${out_real} "${real}" PARENT_SCOPE)
endfunction()

# How target compiles source: listed_out TRUE when it is among the target's
# sources (those without generator expressions) and not HEADER_FILE_ONLY;
# language_out the enabled language that compiles it (its LANGUAGE
# property, else the language whose CMAKE_<LANG>_SOURCE_FILE_EXTENSIONS has
# its extension: CUDA for .cu), "" when none does (a .cu file in a project
# that does not enable CUDA: CMake then silently leaves it out).
function(_gevo_target_compiles target source listed_out language_out)
  set(listed FALSE)
  get_target_property(sources ${target} SOURCES)
  get_target_property(dir ${target} SOURCE_DIR)
  foreach(s IN LISTS sources)
    if(s MATCHES "\\$<")
      continue()
    endif()
    get_filename_component(abs "${s}" ABSOLUTE BASE_DIR "${dir}")
    if(abs STREQUAL source)
      get_source_file_property(header "${source}" HEADER_FILE_ONLY)
      if(NOT header)
        set(listed TRUE)
      endif()
      break()
    endif()
  endforeach()
  get_property(enabled GLOBAL PROPERTY ENABLED_LANGUAGES)
  set(language "")
  get_source_file_property(wanted "${source}" LANGUAGE)
  if(wanted)
    if(wanted IN_LIST enabled)
      set(language "${wanted}")
    endif()
  else()
    get_filename_component(ext "${source}" LAST_EXT)
    string(REGEX REPLACE "^\\." "" ext "${ext}")
    foreach(lang IN LISTS enabled)
      if(ext IN_LIST CMAKE_${lang}_SOURCE_FILE_EXTENSIONS)
        set(language "${lang}")
        break()
      endif()
    endforeach()
  endif()
  set(${listed_out} ${listed} PARENT_SCOPE)
  set(${language_out} "${language}" PARENT_SCOPE)
endfunction()

# SPEC does not exist: writes a skeleton there with `gevod spec init` from
# the kernel's IR (GEVO_IR_DIR's, or clang's, compiled now into ll with the
# target's include directories and definitions that need no generator
# expression, and with line tables whatever GEVO_LINE_TABLES says: they
# lead `spec init` to the kernel's declaration, so the skeleton has the
# parameters' real names). Stops configuring when it cannot.
function(_gevo_spec_skeleton target name user_spec shown source ll prebuilt clang arch cuda_flags)
  set(cannot "gevo_optimize(${target}): SPEC ${user_spec} does not exist, and gevo cannot write a skeleton of it")
  if(NOT GEVOD OR NOT EXISTS "${GEVOD}")
    message(FATAL_ERROR "${cannot}: no gevod (set GEVOD). Write the spec (docs/spec.md), "
      "or install gevod and re-run cmake")
  endif()
  if(prebuilt)
    set(ir "${prebuilt}")
  else()
    get_target_property(includes ${target} INCLUDE_DIRECTORIES)
    get_target_property(defines ${target} COMPILE_DEFINITIONS)
    set(flags)
    foreach(i IN LISTS includes)
      if(i AND NOT i MATCHES "\\$<")
        list(APPEND flags "-I${i}")
      endif()
    endforeach()
    foreach(d IN LISTS defines)
      if(d AND NOT d MATCHES "\\$<")
        list(APPEND flags "-D${d}")
      endif()
    endforeach()
    execute_process(
      COMMAND "${clang}" -x cuda --cuda-device-only -emit-llvm -O3 -gline-tables-only -S
              "--cuda-gpu-arch=${arch}" ${cuda_flags} ${flags} "${source}" -o "${ll}"
      RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      _gevo_first_error("${err}" err)
      message(FATAL_ERROR "${cannot}: ${clang} cannot compile ${source} to IR: ${err}")
    endif()
    set(ir "${ll}")
  endif()
  # Where the kernel's <<<...>>> launches may be: SOURCE and the target's
  # other C, C++ and CUDA sources (spec init reads them as text for the
  # skeleton's grid, block and launch loops).
  set(source_args --source "${source}")
  get_target_property(target_sources ${target} SOURCES)
  get_target_property(target_dir ${target} SOURCE_DIR)
  foreach(s IN LISTS target_sources)
    if(s AND NOT s MATCHES "\\$<" AND s MATCHES "\\.(cu|cuh|cpp|cc|cxx|c|h|hpp)$")
      get_filename_component(s "${s}" ABSOLUTE BASE_DIR "${target_dir}")
      if(EXISTS "${s}" AND NOT s STREQUAL source)
        list(APPEND source_args --source "${s}")
      endif()
    endif()
  endforeach()
  get_filename_component(spec_dir "${user_spec}" DIRECTORY)
  file(MAKE_DIRECTORY "${spec_dir}")
  execute_process(COMMAND "${GEVOD}" spec init "${ir}" ${source_args} -o "${user_spec}"
    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    # Several kernels in the file: the one named like KERNEL, if any.
    execute_process(COMMAND "${GEVOD}" spec init "${ir}" --kernel "${name}" ${source_args} -o "${user_spec}"
      RESULT_VARIABLE rc2 OUTPUT_QUIET ERROR_QUIET)
    if(NOT rc2 EQUAL 0)
      string(STRIP "${err}" err)
      message(FATAL_ERROR "${cannot}: `gevod spec init ${ir}` failed: ${err}")
    endif()
  endif()
  message(WARNING "gevo: ${name}: ${shown} did not exist: gevo wrote a skeleton there with "
    "`gevod spec init` from the kernel's IR. Fill in its TODO values (docs/spec.md); until "
    "then builds use the original kernel.")
endfunction()
