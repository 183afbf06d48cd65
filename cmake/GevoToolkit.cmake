# GevoToolkit.cmake: where the parts of the CUDA toolkit are, for clang's
# --cuda-path and MODE REPLACE (included by GevoReplace.cmake; docs/cmake.md,
# "Where the CUDA toolkit is found"). Two layouts are known:
#
#   NVIDIA's (/usr/local/cuda; also $CUDA_PATH, $CUDA_HOME, ...): one root
#     with bin/ptxas, bin/fatbinary, include/cuda_runtime.h,
#     nvvm/libdevice/libdevice.10.bc and lib64/libcudart*;
#   a distribution's (Debian 12 and Ubuntu 24.04, package
#     nvidia-cuda-toolkit): clang's --cuda-path is /usr/lib/cuda, whose
#     include/cuda.h and nvvm/libdevice are links to /usr/include and
#     /usr/lib/nvidia-cuda-toolkit/libdevice; the headers are in
#     /usr/include, ptxas and fatbinary in /usr/bin, and libcudart in the
#     multiarch library directory (/usr/lib/x86_64-linux-gnu).
#
# So the root is the CUDA installation clang takes as --cuda-path, and each
# other part is looked for under it first, then where a distribution puts it.
include_guard(GLOBAL)

set(GEVO_CUDA_PATH "" CACHE STRING
  "CUDA toolkit root: clang's --cuda-path, and where MODE REPLACE looks first for ptxas, fatbinary, cuda_runtime.h and cudart (relative: to the build directory); empty: searched")

# What dir lacks to be a CUDA installation clang 19 takes as --cuda-path
# (include/ and bin/ directories, nvvm/libdevice/libdevice.10.bc), as a
# ", "-separated list; "" when nothing.
function(_gevo_cuda_installation_lacks dir out)
  set(lacks)
  foreach(sub include bin)
    if(NOT IS_DIRECTORY "${dir}/${sub}")
      list(APPEND lacks "${sub}/")
    endif()
  endforeach()
  if(NOT EXISTS "${dir}/nvvm/libdevice/libdevice.10.bc")
    list(APPEND lacks "nvvm/libdevice/libdevice.10.bc")
  endif()
  list(JOIN lacks ", " lacks)
  set(${out} "${lacks}" PARENT_SCOPE)
endfunction()

# The CUDA installation clang compiles against (its --cuda-path) and where
# that came from: GEVO_CUDA_PATH when set, whatever it holds; else the first
# CUDA installation among CUDAToolkit_ROOT, the project's CUDA compiler's
# toolkit, $CUDA_PATH, $CUDA_HOME, /usr/local/cuda (NVIDIA's), /usr/lib/cuda
# (Debian's and Ubuntu's nvidia-cuda-toolkit) and the directory above the
# ptxas on the PATH. Sets root_out "" when there is none, and tried_out to
# the candidates looked at.
function(_gevo_cuda_root root_out from_out tried_out)
  if(NOT GEVO_CUDA_PATH STREQUAL "")
    get_filename_component(root "${GEVO_CUDA_PATH}" ABSOLUTE BASE_DIR "${CMAKE_BINARY_DIR}")
    set(${root_out} "${root}" PARENT_SCOPE)
    set(${from_out} "GEVO_CUDA_PATH" PARENT_SCOPE)
    set(${tried_out} "${root}" PARENT_SCOPE)
    return()
  endif()
  find_program(_GEVO_PTXAS_ON_PATH ptxas)
  mark_as_advanced(_GEVO_PTXAS_ON_PATH)
  set(above_ptxas "")
  if(_GEVO_PTXAS_ON_PATH)
    get_filename_component(real "${_GEVO_PTXAS_ON_PATH}" REALPATH)
    get_filename_component(bin "${real}" DIRECTORY)
    get_filename_component(above_ptxas "${bin}" DIRECTORY)
  endif()
  # Pairs of place and where it comes from, "|"-separated.
  set(candidates
    "${CUDAToolkit_ROOT}|CUDAToolkit_ROOT"
    "$ENV{CUDAToolkit_ROOT}|$CUDAToolkit_ROOT"
    "${CMAKE_CUDA_COMPILER_TOOLKIT_ROOT}|the CUDA compiler's toolkit"
    "$ENV{CUDA_PATH}|$CUDA_PATH"
    "$ENV{CUDA_HOME}|$CUDA_HOME"
    "/usr/local/cuda|NVIDIA's place"
    "/usr/lib/cuda|Debian's and Ubuntu's place"
    "${above_ptxas}|above the ptxas on the PATH")
  set(tried)
  foreach(pair IN LISTS candidates)
    string(REGEX MATCH "^([^|]*)\\|(.*)$" pair "${pair}")
    set(dir "${CMAKE_MATCH_1}")
    set(from "${CMAKE_MATCH_2}")
    if(dir STREQUAL "")
      continue()
    endif()
    get_filename_component(dir "${dir}" ABSOLUTE)
    if(dir IN_LIST tried)
      continue()
    endif()
    list(APPEND tried "${dir}")
    _gevo_cuda_installation_lacks("${dir}" lacks)
    if(lacks STREQUAL "")
      set(${root_out} "${dir}" PARENT_SCOPE)
      set(${from_out} "${from}" PARENT_SCOPE)
      set(${tried_out} "${tried}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${root_out} "" PARENT_SCOPE)
  set(${from_out} "" PARENT_SCOPE)
  set(${tried_out} "${tried}" PARENT_SCOPE)
endfunction()

# A toolkit program: <root>/bin/<tool>, else the one on the PATH, else "".
function(_gevo_cuda_tool root tool out)
  set(found "")
  if(EXISTS "${root}/bin/${tool}" AND NOT IS_DIRECTORY "${root}/bin/${tool}")
    set(found "${root}/bin/${tool}")
  else()
    string(TOUPPER "${tool}" var)
    find_program(_GEVO_${var}_ON_PATH ${tool})
    mark_as_advanced(_GEVO_${var}_ON_PATH)
    if(_GEVO_${var}_ON_PATH)
      set(found "${_GEVO_${var}_ON_PATH}")
    endif()
  endif()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# The cudart library of kind (static or shared) for the toolkit at root:
# under root first, then in the system's library directories (the
# multiarch one included). "" when there is none.
function(_gevo_cuda_runtime root kind out)
  if(kind STREQUAL "static")
    set(names libcudart_static.a)
  else()
    set(names cudart)
  endif()
  # The multiarch directory, also where no language set CMAKE_LIBRARY_ARCHITECTURE.
  set(multiarch "${CMAKE_LIBRARY_ARCHITECTURE}")
  if(multiarch STREQUAL "")
    cmake_host_system_information(RESULT platform QUERY OS_PLATFORM)
    set(multiarch "${platform}-linux-gnu")
  endif()
  string(MD5 key "${root};${kind}")
  find_library(_GEVO_CUDART_${key} NAMES ${names}
    HINTS "${root}/lib64" "${root}/lib" "${root}/targets/x86_64-linux/lib"
          "${root}/targets/sbsa-linux/lib" "${root}/lib/x86_64-linux-gnu"
    PATHS "${CMAKE_SYSROOT}/usr/lib/${multiarch}")
  mark_as_advanced(_GEVO_CUDART_${key})
  set(found "")
  if(_GEVO_CUDART_${key})
    set(found "${_GEVO_CUDART_${key}}")
  endif()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# The directory holding cuda_runtime.h: <root>/include, else /usr/include
# (where a distribution puts it, and clang looks anyway). "" when neither.
function(_gevo_cuda_headers root out)
  set(found "")
  foreach(dir "${root}/include" "${CMAKE_SYSROOT}/usr/include")
    if(EXISTS "${dir}/cuda_runtime.h")
      set(found "${dir}")
      break()
    endif()
  endforeach()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# The toolkit's version from CUDA_VERSION in the headers' cuda.h ("11.8"),
# or "".
function(_gevo_cuda_version include out)
  set(version "")
  if(EXISTS "${include}/cuda.h")
    file(STRINGS "${include}/cuda.h" line REGEX "^#define[ \t]+CUDA_VERSION[ \t]+[0-9]+" LIMIT_COUNT 1)
    if(line MATCHES "([0-9]+)$")
      math(EXPR major "${CMAKE_MATCH_1} / 1000")
      math(EXPR minor "(${CMAKE_MATCH_1} % 1000) / 10")
      set(version "${major}.${minor}")
    endif()
  endif()
  set(${out} "${version}" PARENT_SCOPE)
endfunction()

# Finds what MODE REPLACE needs of the toolkit, for a runtime of kind
# (static, shared or none). Sets in the caller cuda_why ("" when all was
# found, else what is missing), cuda_root, cuda_ptxas, cuda_fatbinary and
# cuda_runtime ("" for none); says once per configure what was found where.
function(_gevo_cuda_toolkit kind)
  set(why "")
  set(include "")
  set(ptxas "")
  set(fatbinary "")
  set(runtime "")
  _gevo_cuda_root(root from tried)
  if(root STREQUAL "")
    list(JOIN tried ", " tried)
    string(CONCAT why "no CUDA toolkit found: none of ${tried} is a CUDA installation "
      "(include/, bin/ and nvvm/libdevice/libdevice.10.bc, as clang's --cuda-path); install "
      "one (Debian and Ubuntu: nvidia-cuda-toolkit) or set GEVO_CUDA_PATH to its root")
  else()
    _gevo_cuda_installation_lacks("${root}" lacks)
    if(NOT lacks STREQUAL "")
      string(CONCAT why "GEVO_CUDA_PATH ${root} is not a CUDA installation clang can use: it "
        "lacks ${lacks} (NVIDIA's toolkit is at /usr/local/cuda, Debian's and Ubuntu's at "
        "/usr/lib/cuda)")
    endif()
  endif()
  if(why STREQUAL "")
    _gevo_cuda_headers("${root}" include)
    if(include STREQUAL "")
      set(why "no cuda_runtime.h in ${root}/include or ${CMAKE_SYSROOT}/usr/include")
    endif()
  endif()
  if(why STREQUAL "")
    _gevo_cuda_tool("${root}" ptxas ptxas)
    _gevo_cuda_tool("${root}" fatbinary fatbinary)
    if(NOT ptxas)
      set(why "ptxas not found (in ${root}/bin or on the PATH)")
    elseif(NOT fatbinary)
      set(why "fatbinary not found (in ${root}/bin or on the PATH)")
    endif()
  endif()
  if(why STREQUAL "" AND NOT kind STREQUAL "none")
    _gevo_cuda_runtime("${root}" "${kind}" runtime)
    if(NOT runtime)
      if(kind STREQUAL "static")
        set(lib libcudart_static.a)
      else()
        set(lib libcudart.so)
      endif()
      set(why "${lib} not found (in ${root}/lib64, lib, targets/*/lib, or the system's library directories)")
    endif()
  endif()
  if(why STREQUAL "")
    get_filename_component(libdevice "${root}/nvvm/libdevice/libdevice.10.bc" REALPATH)
    _gevo_cuda_version("${include}" version)
    if(NOT version STREQUAL "")
      set(version " ${version}")
    endif()
    set(runtime_said "")
    if(runtime)
      set(runtime_said ", cudart ${runtime}")
    endif()
    string(CONCAT said "gevo: CUDA${version} found: --cuda-path ${root} (${from}), "
      "libdevice ${libdevice}, headers ${include}, ptxas ${ptxas}, fatbinary ${fatbinary}"
      "${runtime_said}")
    get_property(told GLOBAL PROPERTY _GEVO_TOOLKIT_TOLD)
    if(NOT said IN_LIST told)
      set_property(GLOBAL APPEND PROPERTY _GEVO_TOOLKIT_TOLD "${said}")
      message(STATUS "${said}")
    endif()
  endif()
  set(cuda_why "${why}" PARENT_SCOPE)
  set(cuda_root "${root}" PARENT_SCOPE)
  set(cuda_ptxas "${ptxas}" PARENT_SCOPE)
  set(cuda_fatbinary "${fatbinary}" PARENT_SCOPE)
  set(cuda_runtime "${runtime}" PARENT_SCOPE)
endfunction()
