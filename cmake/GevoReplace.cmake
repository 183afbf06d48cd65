# GevoReplace.cmake: the configure-time half of gevo_optimize(... MODE REPLACE)
# (included by GevoOptimize.cmake; docs/cmake.md, "MODE REPLACE").
#
# REPLACE builds the host side of the kernel's source with clang
# (--cuda-host-only -fcuda-include-gpubinary <fatbin>), the fatbin being the
# chosen PTX assembled by the CUDA toolkit's ptxas and fatbinary, and links
# the CUDA runtime. What that needs is found here and tried once, end to end,
# on a one-line kernel (cached per toolchain); anything missing or failing
# turns REPLACE off with the reason, and the target builds the ordinary way
# (where it has none, configure stops: GevoOptimize.cmake). Where the
# toolkit's parts are: GevoToolkit.cmake.
include_guard(GLOBAL)
include("${CMAKE_CURRENT_LIST_DIR}/GevoToolkit.cmake")

set(GEVO_REPLACE_FLAGS "" CACHE STRING
  "More clang flags for the host side of MODE REPLACE sources (a command-line string)")

# clang's include directory of last resort, for headers newer toolkits dropped.
function(_gevo_cuda_compat_dir out)
  get_property(cmake_dir GLOBAL PROPERTY GEVO_CMAKE_DIR)
  set(${out} "${cmake_dir}/cuda-compat" PARENT_SCOPE)
endfunction()

# The clang flags that compile against the toolkit at root: its headers, the
# stand-ins for headers it dropped, and no warning for a toolkit newer than
# clang knows (clang then treats it as the newest it knows).
function(_gevo_cuda_clang_flags root out)
  _gevo_cuda_compat_dir(compat)
  set(flags)
  if(NOT root STREQUAL "")
    list(APPEND flags "--cuda-path=${root}")
  endif()
  list(APPEND flags -idirafter "${compat}" -Wno-unknown-cuda-version)
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

# How the target links the CUDA runtime, as CMake's CUDA language would:
# its CUDA_RUNTIME_LIBRARY, else CMAKE_CUDA_RUNTIME_LIBRARY, else Static.
function(_gevo_cuda_runtime_kind target out)
  get_target_property(kind ${target} CUDA_RUNTIME_LIBRARY)
  if(NOT kind)
    set(kind "${CMAKE_CUDA_RUNTIME_LIBRARY}")
  endif()
  if(NOT kind)
    set(kind Static)
  endif()
  string(TOLOWER "${kind}" kind)
  if(NOT kind MATCHES "^(static|shared|none)$")
    message(FATAL_ERROR "gevo_optimize(${target}): CUDA_RUNTIME_LIBRARY ${kind}: expected "
      "Static, Shared or None")
  endif()
  set(${out} "${kind}" PARENT_SCOPE)
endfunction()

# The first error line of a tool's output (else its first line), for a
# one-line reason.
function(_gevo_first_error text out)
  string(REPLACE "\r" "" text "${text}")
  string(REGEX MATCH "[^\n]*(error|fatal|undefined reference)[^\n]*" line "${text}")
  if(line STREQUAL "")
    string(STRIP "${text}" text)
    string(REGEX REPLACE "\n.*" "" line "${text}")
  endif()
  string(STRIP "${line}" line)
  set(${out} "${line}" PARENT_SCOPE)
endfunction()

# Runs one probe step; on failure sets <why_var> in the caller (if not set yet).
macro(_gevo_probe_step why_var what)
  if(${why_var} STREQUAL "")
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE _gevo_rc OUTPUT_VARIABLE _gevo_out
      ERROR_VARIABLE _gevo_out TIMEOUT 120)
    if(NOT _gevo_rc STREQUAL "0")
      _gevo_first_error("${_gevo_out}" _gevo_line)
      set(${why_var} "${what} failed: ${_gevo_line}")
    endif()
  endif()
endmacro()

# The fatbinary command-line style: "image3" (--image3=kind=elf,sm=90,...,
# CUDA 12 and later; the only one of CUDA 13) or "image"
# (--image=profile=sm_90,..., older), and whether it takes --compress.
function(_gevo_fatbinary_style fatbinary style_out compress_out)
  execute_process(COMMAND "${fatbinary}" --help OUTPUT_VARIABLE help ERROR_VARIABLE help
    RESULT_VARIABLE rc TIMEOUT 60)
  set(style image)
  if(help MATCHES "--image3")
    set(style image3)
  endif()
  set(compress FALSE)
  if(help MATCHES "--compress[ \t]")
    set(compress TRUE)
  endif()
  set(${style_out} "${style}" PARENT_SCOPE)
  set(${compress_out} "${compress}" PARENT_SCOPE)
endfunction()

# fatbinary's arguments for one sm_XX cubin and its PTX.
function(_gevo_fatbinary_images style arch cubin ptx out)
  string(REGEX REPLACE "^sm_" "" sm "${arch}")
  if(style STREQUAL "image3")
    set(args "--image3=kind=elf,sm=${sm},file=${cubin}" "--image3=kind=ptx,sm=${sm},file=${ptx}")
  else()
    set(args "--image=profile=sm_${sm},file=${cubin}" "--image=profile=compute_${sm},file=${ptx}")
  endif()
  set(${out} "${args}" PARENT_SCOPE)
endfunction()

# Compiles, assembles, packs, host-compiles and links a one-line kernel and
# launch the way REPLACE will: "" when it all works, else why not. Cached.
function(_gevo_replace_probe clang root arch ptxas fatbinary style compress runtime kind out)
  string(MD5 key "${clang};${root};${arch};${ptxas};${fatbinary};${runtime};${kind}")
  set(var "_GEVO_REPLACE_PROBE_${key}")
  if(DEFINED ${var})
    set(${out} "${${var}}" PARENT_SCOPE)
    return()
  endif()
  set(dir "${CMAKE_BINARY_DIR}/CMakeFiles/gevo/replace-probe")
  file(REMOVE_RECURSE "${dir}")
  file(MAKE_DIRECTORY "${dir}")
  file(WRITE "${dir}/probe.cu" [=[
__global__ void gevo_probe(int *p) { p[threadIdx.x] = 1; }
int main()
{
    gevo_probe<<<1, 1>>>(nullptr);
    return cudaGetLastError() == cudaSuccess ? 0 : 1;
}
]=])
  _gevo_cuda_clang_flags("${root}" cuda_flags)
  _gevo_fatbinary_images("${style}" "${arch}" "${dir}/probe.cubin" "${dir}/probe.ptx" images)
  set(no_compress)
  if(compress)
    set(no_compress --compress=false)
  endif()
  set(libs "${runtime}")
  if(kind STREQUAL "static" AND UNIX AND NOT APPLE)
    list(APPEND libs -ldl -lpthread -lrt)
  endif()
  # The program links with the project's compiler, as the target will.
  set(linker "${clang}")
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("CXX" IN_LIST languages)
    set(linker "${CMAKE_CXX_COMPILER}")
  elseif("C" IN_LIST languages)
    set(linker "${CMAKE_C_COMPILER}")
  endif()

  set(why "")
  _gevo_probe_step(why "clang's device compilation with ${root}"
    "${clang}" -x cuda --cuda-device-only -O3 -S "--cuda-gpu-arch=${arch}" ${cuda_flags}
    "${dir}/probe.cu" -o "${dir}/probe.ptx")
  _gevo_probe_step(why "ptxas" "${ptxas}" "-arch=${arch}" "${dir}/probe.ptx" -o "${dir}/probe.cubin")
  _gevo_probe_step(why "fatbinary"
    "${fatbinary}" "--create=${dir}/probe.fatbin" -64 ${no_compress} ${images})
  _gevo_probe_step(why "clang's host compilation with ${root}"
    "${clang}" -x cuda --cuda-host-only "--cuda-gpu-arch=${arch}" ${cuda_flags}
    -Xclang -fcuda-include-gpubinary -Xclang "${dir}/probe.fatbin"
    -c "${dir}/probe.cu" -o "${dir}/probe.o")
  _gevo_probe_step(why "linking with ${runtime}"
    "${linker}" "${dir}/probe.o" ${libs} -o "${dir}/probe")
  set(${var} "${why}" CACHE INTERNAL "gevo: why MODE REPLACE cannot work with this toolchain")
  set(${out} "${why}" PARENT_SCOPE)
endfunction()

# Whether MODE REPLACE can work for target: sets in the caller `replace_why`
# ("" when it can) and, when it can, replace_root, replace_ptxas,
# replace_fatbinary, replace_style, replace_compress, replace_runtime (the
# library, "" for None) and replace_kind.
function(_gevo_replace_toolchain target clang arch)
  set(why "")
  set(style "")
  set(compress FALSE)
  _gevo_cuda_runtime_kind(${target} kind)
  if(NOT clang)
    set(why "no clang for the host side (install clang-19 or set GEVO_CLANG)")
    set(cuda_root "")
    set(cuda_ptxas "")
    set(cuda_fatbinary "")
    set(cuda_runtime "")
  else()
    _gevo_cuda_toolkit("${kind}")
    set(why "${cuda_why}")
  endif()
  if(why STREQUAL "")
    _gevo_fatbinary_style("${cuda_fatbinary}" style compress)
    _gevo_replace_probe("${clang}" "${cuda_root}" "${arch}" "${cuda_ptxas}" "${cuda_fatbinary}"
      "${style}" "${compress}" "${cuda_runtime}" "${kind}" why)
  endif()
  set(replace_why "${why}" PARENT_SCOPE)
  set(replace_root "${cuda_root}" PARENT_SCOPE)
  set(replace_ptxas "${cuda_ptxas}" PARENT_SCOPE)
  set(replace_fatbinary "${cuda_fatbinary}" PARENT_SCOPE)
  set(replace_style "${style}" PARENT_SCOPE)
  set(replace_compress "${compress}" PARENT_SCOPE)
  set(replace_runtime "${cuda_runtime}" PARENT_SCOPE)
  set(replace_kind "${kind}" PARENT_SCOPE)
endfunction()

# The optimization flags of the host side: CMAKE_CUDA_FLAGS[_<CONFIG>] when
# the project's CUDA compiler is clang (they are clang's flags for this very
# source), else the GNU-style defaults CMake gives each configuration (the
# target's own CUDA flags may be nvcc's, which clang does not take).
function(_gevo_replace_config_flags out)
  # One generator expression per flag: a list inside one would be split
  # apart when the command's arguments are expanded.
  set(genex)
  if(CMAKE_CUDA_COMPILER_ID STREQUAL "Clang")
    separate_arguments(genex UNIX_COMMAND "${CMAKE_CUDA_FLAGS}")
    foreach(config Debug Release RelWithDebInfo MinSizeRel)
      string(TOUPPER "${config}" upper)
      separate_arguments(flags UNIX_COMMAND "${CMAKE_CUDA_FLAGS_${upper}}")
      foreach(flag IN LISTS flags)
        list(APPEND genex "$<$<CONFIG:${config}>:${flag}>")
      endforeach()
    endforeach()
  else()
    foreach(pair Debug:-g Release:-O3 Release:-DNDEBUG RelWithDebInfo:-O2 RelWithDebInfo:-g
                 RelWithDebInfo:-DNDEBUG MinSizeRel:-Os MinSizeRel:-DNDEBUG)
      string(REPLACE ":" ";" pair "${pair}")
      list(GET pair 0 config)
      list(GET pair 1 flag)
      list(APPEND genex "$<$<CONFIG:${config}>:${flag}>")
    endforeach()
  endif()
  separate_arguments(extra UNIX_COMMAND "${GEVO_REPLACE_FLAGS}")
  list(APPEND genex ${extra})
  set(${out} "${genex}" PARENT_SCOPE)
endfunction()

# The build rules of MODE REPLACE, in gevo_optimize()'s scope (a macro: it
# reads and sets gevo_optimize()'s variables):
#   <name>.ptx -> ptxas, fatbinary -> <build>/gevo/<name>.fatbin
#   SOURCE -> clang --cuda-host-only -fcuda-include-gpubinary <name>.fatbin
#          -> CMakeFiles/gevo/<name>.host.o, linked into the target instead
#             of the target's own compilation of SOURCE.
# With TUNE the host side force-includes gevo_<name>_tune.h, as the
# target's own sources do (GevoTune.cmake).
macro(_gevo_replace_rules)
  set(fatbin "${dir}/${name}.fatbin")
  set(cubin "${private}/${name}.cubin")
  set(host_object "${private}/${name}.host.o")
  get_filename_component(source_name "${source}" NAME)

  _gevo_cuda_clang_flags("${replace_root}" host_cuda_flags)
  _gevo_replace_config_flags(host_config_flags)
  set(host_pic "$<$<BOOL:$<TARGET_PROPERTY:${target},POSITION_INDEPENDENT_CODE>>:-fPIC>")
  if(type STREQUAL "SHARED_LIBRARY" OR type STREQUAL "MODULE_LIBRARY")
    set(host_pic -fPIC)
  endif()
  # The language standard the target asks for, CUDA's first.
  set(cuda_std "$<TARGET_PROPERTY:${target},CUDA_STANDARD>")
  set(cxx_std "$<TARGET_PROPERTY:${target},CXX_STANDARD>")
  set(host_std "$<IF:$<BOOL:${cuda_std}>,-std=c++${cuda_std},$<$<BOOL:${cxx_std}>:-std=c++${cxx_std}>>")

  # As for the IR: a stamp of the command lines, so that a changed toolchain
  # or flag rebuilds (Makefiles do not compare command lines).
  set(replace_flags "${private}/${name}-$<CONFIG>.replace.flags")
  file(GENERATE OUTPUT "${replace_flags}" CONTENT
    "clang=${host_clang}\nroot=${replace_root}\narch=${arch}\nptxas=${replace_ptxas}\nfatbinary=${replace_fatbinary}\nstyle=${replace_style}\ncompress=${replace_compress}\nflags=${host_cuda_flags};${host_config_flags};${host_pic};${host_std}\nincludes=${includes}\ndefines=${defines}\ntune=${tune_include}\n")

  add_custom_command(
    OUTPUT "${fatbin}"
    BYPRODUCTS "${cubin}"
    COMMAND "${CMAKE_COMMAND}" -DGEVO_STEP=fatbin "-DPTX=${ptx}" "-DOUT=${fatbin}"
            "-DCUBIN=${cubin}" "-DARCH=${arch}" "-DPTXAS=${replace_ptxas}"
            "-DFATBINARY=${replace_fatbinary}" "-DSTYLE=${replace_style}"
            "-DCOMPRESS=${replace_compress}" -P "${step}"
    DEPENDS "${ptx}" "${step}" "${replace_flags}"
    COMMENT "gevo: fatbin of ${name}.ptx for ${arch}"
    VERBATIM)

  add_custom_command(
    OUTPUT "${host_object}"
    COMMAND "${host_clang}" -x cuda --cuda-host-only "--cuda-gpu-arch=${arch}" ${host_cuda_flags}
            ${host_config_flags} "${host_pic}" "${host_std}"
            "$<$<BOOL:${includes}>:-I$<JOIN:${includes},;-I>>"
            "$<$<BOOL:${defines}>:-D$<JOIN:${defines},;-D>>"
            ${tune_include}
            -Xclang -fcuda-include-gpubinary -Xclang "${fatbin}"
            -MD -MF "${private}/${name}.host.o.d" -MT "${host_object}"
            -c "${source}" -o "${host_object}"
    DEPENDS "${source}" "${fatbin}" "${replace_flags}" ${tune_header}
    DEPFILE "${private}/${name}.host.o.d"
    COMMENT "gevo: host side of ${source_name} with ${name}.fatbin"
    COMMAND_EXPAND_LISTS VERBATIM)

  # The target's own compilation of SOURCE would define the same host
  # functions: no target of this directory compiles it now.
  set_source_files_properties("${source}" PROPERTIES HEADER_FILE_ONLY ON)
  set_source_files_properties("${host_object}" PROPERTIES EXTERNAL_OBJECT ON GENERATED ON)
  target_sources(${target} PRIVATE "${host_object}")
  if(replace_runtime)
    set(runtime_libs "${replace_runtime}")
    if(replace_kind STREQUAL "static")
      # What libcudart_static needs, as CMake's CUDA language links it.
      find_package(Threads REQUIRED)
      list(APPEND runtime_libs Threads::Threads ${CMAKE_DL_LIBS})
      if(UNIX AND NOT APPLE)
        list(APPEND runtime_libs rt)
      endif()
    endif()
    target_link_libraries(${target} PRIVATE ${runtime_libs})
  endif()
endmacro()
