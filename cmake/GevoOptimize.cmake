# GevoOptimize.cmake: gevo_optimize(), the CMake side of gevo.
#
#   include(path/to/gevo/cmake/GevoOptimize.cmake)      # or: find_package(gevo)
#   gevo_optimize(<target> KERNEL <name> [<name>...] SOURCE <file.cu> SPEC <file.gevo.toml>
#                 [ARCH sm_XX] [MODE AUTO|EMBED|REPLACE] [CLANG <path>] [PROJECT <project>]
#                 [TUNE <NAME>...])
#
# Several KERNEL names: a pipeline of the source's kernels, evolved together
# as one PTX module; the first name names the files and the daemon's job, and
# the spec's `kernel = [...]` must list the same kernels in the same order.
#
# At configure time it says what it chose where the call left it open
# (GevoChoices.cmake): the arch, the daemon's name of the kernel (tagged with
# the build directory), MODE AUTO's choice, and, where SPEC does not exist,
# writes a skeleton of it (gevod spec init).
#
# For one CUDA kernel of <target>, at build time:
#   1. clang emits the kernel's device LLVM IR to <build>/gevo/<name>.ll and
#      the spec is written beside it as <build>/gevo/<name>.gevo.toml, with
#      `ir`, `arch` and `project` set; gevod watches <build>/gevo (registered
#      with `gevo-client watch` at configure time) and evolves the kernel;
#   2. the original PTX is compiled from the IR (<name>.original.ptx);
#   3. every build asks `gevo-client best <project>/<name>` for the best
#      validated PTX of exactly this IR and spec, and falls back to the
#      original on any failure; the chosen PTX is <name>.ptx, rewritten only
#      when its content changes;
#   4. EMBED: the chosen PTX is compiled into <target> as data, with the
#      header gevo_<name>.h (gevo_ptx_<name>(), gevo_load_<name>(), ...);
#   5. REPLACE, also: ptxas and fatbinary make <name>.fatbin of the chosen
#      PTX, and clang compiles SOURCE's host side against it, in place of
#      the target's own compilation of SOURCE, so its <<<...>>> launches run
#      that PTX. The toolkit is found in NVIDIA's layout or a distribution's
#      (GevoToolkit.cmake). Without clang or the toolkit, REPLACE is off
#      (configure says why; GevoReplace.cmake) and SOURCE builds the
#      ordinary way; where nothing else would compile SOURCE (the project
#      does not enable CUDA), configure stops and says what to do.
#      MODE AUTO (the default) is REPLACE where the target compiles SOURCE
#      and REPLACE's needs are met, else EMBED.
#
# TUNE names preprocessor constants gevo may choose (GevoTune.cmake): step 1
# also emits the IR of each configuration of the spec's `[tune]` values, and
# step 3 writes gevo_<name>_tune.h with the chosen PTX's values, which the
# target's sources force-include.
#
# With GEVO_IR_DIR set, step 1 copies <GEVO_IR_DIR>/<name>.ll instead of
# running clang (build machines without clang), and gevod makes the PTX.
#
# Cache variables: GEVO_CLANG, GEVOD, GEVO_CLIENT, GEVO_SOCKET, GEVO_STATE,
# GEVO_WATCH, GEVO_USE_EVOLVED, GEVO_IR_DIR, GEVO_CUDA_PATH, GEVO_REPLACE_FLAGS,
# GEVO_PROJECT, GEVO_NVIDIA_SMI.
# docs/cmake.md describes all of it.

if(CMAKE_VERSION VERSION_LESS 3.20)
  message(FATAL_ERROR "gevo_optimize() needs CMake 3.20 or newer; this is ${CMAKE_VERSION}")
endif()

# The build-time steps run this script with `cmake -P`; it lives beside us.
set_property(GLOBAL PROPERTY GEVO_CMAKE_DIR "${CMAKE_CURRENT_LIST_DIR}")
include_guard(GLOBAL)
include("${CMAKE_CURRENT_LIST_DIR}/GevoCommon.cmake")

cmake_policy(PUSH)
cmake_policy(VERSION 3.20...3.31)
# Functions keep the policies of where they are defined: after the PUSH.
include("${CMAKE_CURRENT_LIST_DIR}/GevoReplace.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/GevoChoices.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/GevoDaemon.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/GevoTune.cmake")

# Installed (scripts/install.sh: <prefix>/lib/cmake/gevo), the binaries
# installed with this module come first.
set(_gevo_hints "$ENV{HOME}/.cargo/bin")
if(CMAKE_CURRENT_LIST_DIR MATCHES "^(.*)/lib(64)?/cmake/gevo$")
  list(PREPEND _gevo_hints "${CMAKE_MATCH_1}/bin")
endif()
find_program(GEVO_CLANG NAMES clang-19 clang
  DOC "clang that emits the kernels' device IR (clang 19: gevod reads LLVM 19 IR)")
find_program(GEVOD NAMES gevod HINTS ${_gevo_hints}
  DOC "gevod, to compile the original PTX (else clang does)")
find_program(GEVO_CLIENT NAMES gevo-client HINTS ${_gevo_hints}
  DOC "gevo-client, to register the build with gevod and ask for evolved PTX")
unset(_gevo_hints)
# The environment's GEVO_SOCKET at the first configure is the default; from
# then on the cache decides, for configure and builds alike.
set(GEVO_SOCKET "$ENV{GEVO_SOCKET}" CACHE STRING
  "gevod's socket, given to gevo-client as GEVO_SOCKET (that daemon only); empty: the client searches your user daemon, then the system daemon")
set(GEVO_STATE "" CACHE STRING "gevod's state directory for gevo-client (--state); empty: the client's default")
option(GEVO_USE_EVOLVED "Embed evolved PTX when gevod has a validated variant (OFF: always the original)" ON)
option(GEVO_LINE_TABLES "Emit the device IR with line tables (-gline-tables-only), so gevod names each edit's CUDA source line" ON)
# STRING, not PATH: CMake would make a relative PATH given with -D relative
# to the current directory, and ours are relative to the build directory.
set(GEVO_IR_DIR "" CACHE STRING
  "Directory with prebuilt device IR <KERNEL>.ll, used instead of running clang (relative: to the build directory); empty: clang emits the IR")

# GEVO_SOCKET and GEVO_STATE as absolute paths (relative ones are relative
# to the build directory), or "" for the client's defaults; without
# GEVO_STATE, the state directory the running daemon named at configure
# (GevoDaemon.cmake).
function(_gevo_daemon_paths socket_out state_out)
  foreach(var SOCKET STATE)
    set(path "${GEVO_${var}}")
    if(var STREQUAL "STATE" AND path STREQUAL "" AND DEFINED _GEVO_DAEMON_STATE)
      set(path "${_GEVO_DAEMON_STATE}")
    endif()
    if(NOT path STREQUAL "")
      get_filename_component(path "${path}" ABSOLUTE BASE_DIR "${CMAKE_BINARY_DIR}")
    endif()
    set(${var} "${path}")
  endforeach()
  set(${socket_out} "${SOCKET}" PARENT_SCOPE)
  set(${state_out} "${STATE}" PARENT_SCOPE)
endfunction()

# The command line of gevo-client for the daemon this build names.
function(_gevo_client out)
  _gevo_daemon_paths(socket state)
  _gevo_client_command(command "${GEVO_CLIENT}" "${socket}" "${state}")
  set(${out} "${command}" PARENT_SCOPE)
endfunction()

# The value of a top-level string key of a TOML file (before its first
# table header), or "" when it has none; an array of strings is a list.
function(_gevo_toml_top_key file key out)
  file(READ "${file}" text)
  string(PREPEND text "\n")
  string(FIND "${text}" "\n[" table_at)
  if(table_at GREATER_EQUAL 0)
    string(SUBSTRING "${text}" 0 ${table_at} text)
  endif()
  set(value "")
  if(text MATCHES "\n[ \t]*${key}[ \t]*=[ \t]*\"([^\"\n]*)\"")
    set(value "${CMAKE_MATCH_1}")
  elseif(text MATCHES "\n[ \t]*${key}[ \t]*=[ \t]*'([^'\n]*)'")
    set(value "${CMAKE_MATCH_1}")
  elseif(text MATCHES "\n[ \t]*${key}[ \t]*=[ \t]*\\[([^]]*)\\]")
    # An array of strings (a pipeline's kernels): a CMake list.
    string(REGEX MATCHALL "[\"']([^\"'\n]*)[\"']" items "${CMAKE_MATCH_1}")
    foreach(item IN LISTS items)
      string(REGEX REPLACE "^[\"'](.*)[\"']$" "\\1" item "${item}")
      list(APPEND value "${item}")
    endforeach()
  endif()
  set(${out} "${value}" PARENT_SCOPE)
endfunction()

# Whether clang finds a CUDA installation (headers and libdevice) for arch
# with flags (--cuda-path=<root>, ...; root "" for clang's own search, from
# where root came from): it compiles a trivial kernel, once per clang, arch
# and flags (cached).
function(_gevo_clang_finds_cuda clang arch root from flags out)
  string(MD5 hash "${flags}")
  string(MAKE_C_IDENTIFIER "${clang}_${arch}_${hash}" key)
  set(var "_GEVO_CLANG_CUDA_${key}")
  if(NOT DEFINED ${var})
    set(dir "${CMAKE_BINARY_DIR}/CMakeFiles/gevo")
    file(MAKE_DIRECTORY "${dir}")
    file(WRITE "${dir}/cuda_check.cu"
      "__global__ void gevo_cuda_check(int *p) { p[threadIdx.x] = 1; }\n")
    execute_process(
      COMMAND "${clang}" -x cuda --cuda-device-only -emit-llvm -S "--cuda-gpu-arch=${arch}"
              ${flags} "${dir}/cuda_check.cu" -o "${dir}/cuda_check.ll"
      RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
    if(root STREQUAL "")
      set(at " (clang's own search)")
    else()
      set(at " at ${root} (${from})")
    endif()
    if(rc EQUAL 0)
      set(found TRUE)
      message(STATUS "gevo: ${clang} finds a CUDA installation for ${arch}${at}")
    else()
      set(found FALSE)
      _gevo_first_error("${err}" err)
      message(STATUS "gevo: ${clang} finds no CUDA installation for ${arch}${at}: ${err}; "
        "kernels are compiled with -nocudainc -nocudalib and gevo's shim header")
    endif()
    set(${var} ${found} CACHE INTERNAL "gevo: ${clang} finds CUDA for ${arch}")
  endif()
  set(${out} ${${var}} PARENT_SCOPE)
endfunction()

# The program at path (absolute, or a name looked up on the PATH) when it
# exists, else "".
function(_gevo_usable_program path out)
  set(found "")
  if(path)
    if(IS_ABSOLUTE "${path}")
      if(EXISTS "${path}" AND NOT IS_DIRECTORY "${path}")
        set(found "${path}")
      endif()
    else()
      # A cache entry per name (NO_CACHE needs CMake 3.21).
      string(MAKE_C_IDENTIFIER "_GEVO_PROGRAM_${path}" var)
      find_program(${var} NAMES "${path}")
      mark_as_advanced(${var})
      if(${var})
        set(found "${${var}}")
      endif()
    endif()
  endif()
  set(${out} "${found}" PARENT_SCOPE)
endfunction()

# Warns once per clang that is not clang 19.
function(_gevo_check_clang_version clang)
  string(MAKE_C_IDENTIFIER "${clang}" key)
  get_property(checked GLOBAL PROPERTY "_GEVO_CLANG_CHECKED_${key}")
  if(checked)
    return()
  endif()
  set_property(GLOBAL PROPERTY "_GEVO_CLANG_CHECKED_${key}" TRUE)
  execute_process(COMMAND "${clang}" --version OUTPUT_VARIABLE version ERROR_QUIET RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gevo: ${clang} --version failed; set GEVO_CLANG (or CLANG) to clang 19")
  endif()
  if(version MATCHES "clang version ([0-9]+)" AND NOT CMAKE_MATCH_1 STREQUAL "19")
    message(WARNING "gevo: ${clang} is clang ${CMAKE_MATCH_1}; gevod reads the IR of LLVM 19, "
      "so kernels may fail to load there (builds then use the original PTX). "
      "Set GEVO_CLANG (or CLANG) to clang-19.")
  endif()
endfunction()



# Stops configuring: REPLACE is off (off_why says so and why), and target
# lists source but no enabled language compiles it, so the program would be
# built without the file's code (its launches, its host functions) and fail
# to link or run. Names the two ways out.
function(_gevo_nothing_compiles target source off_why)
  get_filename_component(ext "${source}" LAST_EXT)
  message(FATAL_ERROR "gevo_optimize(${target}): ${off_why}, and nothing else would compile "
    "${source}: ${target} lists it, but the project enables no language that compiles ${ext} "
    "files (CUDA), so ${target} would be built without that file's code. Either make REPLACE "
    "work (clang-19 and a CUDA toolkit: Debian's or Ubuntu's nvidia-cuda-toolkit, NVIDIA's in "
    "/usr/local/cuda, or one named by GEVO_CUDA_PATH), or enable the CUDA language "
    "(project(... LANGUAGES CXX CUDA) or enable_language(CUDA)) so that the CUDA compiler "
    "builds ${source} when REPLACE is off (docs/cmake.md, \"When REPLACE is off\").")
endfunction()

# The rule that emits the device IR output (depfile beside it in
# CMakeFiles/gevo), in gevo_optimize()'s scope (a macro: it reads its
# variables); defs are more -D flags (a TUNE configuration), what the
# comment adds to "device IR of <name> for <arch>".
macro(_gevo_ir_rule output depfile defs what)
  add_custom_command(
    OUTPUT "${output}"
    COMMAND "${clang}" -x cuda --cuda-device-only -emit-llvm -O3 -S "--cuda-gpu-arch=${arch}"
            ${cuda_flags}
            "$<$<BOOL:${GEVO_LINE_TABLES}>:-gline-tables-only>"
            "$<$<BOOL:${includes}>:-I$<JOIN:${includes},;-I>>"
            "$<$<BOOL:${defines}>:-D$<JOIN:${defines},;-D>>"
            ${defs}
            -MD -MF "${depfile}" -MT "${output}"
            "${source}" -o "${output}"
    DEPENDS "${source}" "${flags}"
    DEPFILE "${depfile}"
    COMMENT "gevo: device IR of ${name} for ${arch}${what}"
    COMMAND_EXPAND_LISTS VERBATIM)
endmacro()

# Prebuilt IR (GEVO_IR_DIR): the rule that copies from to to. Copy, then
# touch: the copy may keep the source's time, which would leave the IR older
# than the stamp and rerun this at every build.
macro(_gevo_ir_copy from to)
  add_custom_command(
    OUTPUT "${to}"
    COMMAND "${CMAKE_COMMAND}" -E copy "${from}" "${to}"
    COMMAND "${CMAKE_COMMAND}" -E touch "${to}"
    DEPENDS "${from}" "${flags}"
    COMMENT "gevo: device IR of ${name} from ${from}"
    VERBATIM)
endmacro()

function(gevo_optimize target)
  cmake_parse_arguments(PARSE_ARGV 1 G "" "SOURCE;SPEC;ARCH;MODE;CLANG;PROJECT" "KERNEL;TUNE")
  string(CONCAT usage "gevo_optimize(<target> KERNEL <name> [<name>...] SOURCE <file.cu> SPEC <file.gevo.toml> "
    "[ARCH sm_XX] [MODE AUTO|EMBED|REPLACE] [CLANG <path>] [PROJECT <project>] [TUNE <NAME>...])")
  if(G_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "gevo_optimize: unexpected arguments: ${G_UNPARSED_ARGUMENTS}\n${usage}")
  endif()
  foreach(required KERNEL SOURCE SPEC)
    if(NOT G_${required})
      message(FATAL_ERROR "gevo_optimize(${target}): ${required} is missing\n${usage}")
    endif()
  endforeach()

  if(NOT TARGET ${target})
    message(FATAL_ERROR "gevo_optimize: no target named ${target}")
  endif()
  _gevo_daemon_state()
  get_target_property(type ${target} TYPE)
  get_target_property(imported ${target} IMPORTED)
  get_target_property(aliased ${target} ALIASED_TARGET)
  if(imported OR aliased OR type STREQUAL "INTERFACE_LIBRARY" OR type STREQUAL "UTILITY")
    message(FATAL_ERROR "gevo_optimize(${target}): needs a target that compiles sources "
      "(an executable or a static, shared, module or object library), not a ${type}")
  endif()
  get_target_property(target_dir ${target} SOURCE_DIR)
  if(NOT target_dir STREQUAL CMAKE_CURRENT_SOURCE_DIR)
    message(FATAL_ERROR "gevo_optimize(${target}): call it in the directory that creates "
      "the target (${target_dir}): the generated sources' rules live in the calling directory")
  endif()

  # Several names: a pipeline; the first names the files and the job.
  list(GET G_KERNEL 0 name)
  list(LENGTH G_KERNEL kernel_count)
  if(NOT name MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "gevo_optimize(${target}): KERNEL ${name} must be a C identifier "
      "(it names the files and the functions gevo_ptx_<name>() ...)")
  endif()
  get_property(names GLOBAL PROPERTY _GEVO_KERNELS)
  if(name IN_LIST names)
    message(FATAL_ERROR "gevo_optimize(${target}): KERNEL ${name} is already used in this build; "
      "kernel names must be unique")
  endif()
  set_property(GLOBAL APPEND PROPERTY _GEVO_KERNELS "${name}")

  if(NOT G_MODE)
    set(G_MODE AUTO)
  endif()
  if(NOT G_MODE MATCHES "^(AUTO|EMBED|REPLACE)$")
    message(FATAL_ERROR "gevo_optimize(${target}): unknown MODE ${G_MODE}; use AUTO, EMBED or REPLACE")
  endif()

  if(G_ARCH AND NOT G_ARCH MATCHES "^sm_[0-9]+[a-z]?$")
    message(FATAL_ERROR "gevo_optimize(${target}): ARCH ${G_ARCH}: expected sm_ and digits, e.g. sm_90")
  endif()
  _gevo_choose_arch("${name}" "${G_ARCH}" arch)

  set(clang "${G_CLANG}")
  if(NOT clang)
    set(clang "${GEVO_CLANG}")
  endif()

  # Prebuilt IR: clang is not needed, and not run even when it is set.
  set(prebuilt "")
  if(NOT GEVO_IR_DIR STREQUAL "")
    get_filename_component(ir_dir "${GEVO_IR_DIR}" ABSOLUTE BASE_DIR "${CMAKE_BINARY_DIR}")
    set(prebuilt "${ir_dir}/${name}.ll")
    if(NOT EXISTS "${prebuilt}" OR IS_DIRECTORY "${prebuilt}")
      message(FATAL_ERROR "gevo_optimize(${target}): GEVO_IR_DIR is set, but ${prebuilt} "
        "does not exist: copy the kernel's IR there (<build>/gevo/${name}.ll of a build on a "
        "machine with clang-19), or unset GEVO_IR_DIR to let clang emit it")
    endif()
    # clang then only compiles the original PTX when gevod cannot, so a
    # missing one is no error as long as gevod is there.
    _gevo_usable_program("${clang}" clang)
    set(has_gevod FALSE)
    if(GEVOD AND EXISTS "${GEVOD}" AND NOT IS_DIRECTORY "${GEVOD}")
      set(has_gevod TRUE)
    endif()
    if(NOT has_gevod AND NOT clang)
      message(FATAL_ERROR "gevo_optimize(${target}): GEVO_IR_DIR is set and neither gevod nor "
        "clang is available to compile the original PTX of ${prebuilt}: set GEVOD to gevod "
        "(GEVOD is '${GEVOD}'), or GEVO_CLANG to clang-19")
    endif()
    if(clang)
      _gevo_check_clang_version("${clang}")
    endif()
  else()
    if(NOT clang)
      message(FATAL_ERROR "gevo_optimize(${target}): clang not found; install clang-19 "
        "or set GEVO_CLANG (or the CLANG option) to it, or give prebuilt IR with GEVO_IR_DIR")
    endif()
    _gevo_check_clang_version("${clang}")
  endif()

  get_filename_component(source "${G_SOURCE}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  get_filename_component(user_spec "${G_SPEC}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(NOT EXISTS "${source}")
    message(FATAL_ERROR "gevo_optimize(${target}): ${source} does not exist")
  endif()
  # TUNE: the source's value of each constant (GevoTune.cmake).
  foreach(n IN LISTS G_TUNE)
    if(NOT n MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
      message(FATAL_ERROR "gevo_optimize(${target}): TUNE ${n} is not a preprocessor "
        "constant's name (letters, digits and _, not first a digit)")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES G_TUNE)
  if(G_TUNE)
    _gevo_tune_check_definitions(${target} "${G_TUNE}")
    _gevo_tune_source_values(${target} "${source}" "${G_SOURCE}" "${G_TUNE}" tune_source)
  endif()

  get_property(cmake_dir GLOBAL PROPERTY GEVO_CMAKE_DIR)
  set(step "${cmake_dir}/GevoBuildStep.cmake")
  set(shim "${cmake_dir}/gevo_cuda_shim.h")
  set(dir "${CMAKE_BINARY_DIR}/gevo")
  set(private "${CMAKE_BINARY_DIR}/CMakeFiles/gevo")
  file(MAKE_DIRECTORY "${dir}" "${private}")
  set(ll "${dir}/${name}.ll")
  set(spec "${dir}/${name}.gevo.toml")
  set(original "${dir}/${name}.original.ptx")
  set(ptx "${dir}/${name}.ptx")
  set(origin "${dir}/${name}.ptx.origin")
  set(header "${dir}/gevo_${name}.h")
  get_property(languages GLOBAL PROPERTY ENABLED_LANGUAGES)
  if("C" IN_LIST languages)
    set(embedded "${dir}/${name}_ptx.c")
  else()
    set(embedded "${dir}/${name}_ptx.cpp")
  endif()

  # MODE REPLACE: whether it can work here (GevoReplace.cmake), else why not.
  # MODE AUTO: REPLACE when the target lists the source, no other kernel
  # replaces it, and REPLACE can work; EMBED otherwise. Where REPLACE is off
  # and the target lists the source but has no language to compile it (no
  # CUDA), the program would lack the file's code: configure stops.
  set(replaced FALSE)
  get_property(replacer SOURCE "${source}" PROPERTY _GEVO_REPLACED_BY)
  _gevo_target_compiles(${target} "${source}" listed language)
  if(G_MODE STREQUAL "REPLACE")
    if(replacer)
      message(FATAL_ERROR "gevo_optimize(${target}): ${source} already has MODE REPLACE for "
        "kernel ${replacer}; its fatbin holds all of the file's device code, so only one kernel "
        "per source file can use REPLACE: use MODE EMBED for ${name}")
    endif()
    set_property(SOURCE "${source}" PROPERTY _GEVO_REPLACED_BY "${name}")
    _gevo_usable_program("${clang}" host_clang)
    _gevo_replace_toolchain(${target} "${host_clang}" "${arch}")
    if(replace_why STREQUAL "")
      set(replaced TRUE)
      message(STATUS "gevo: ${name}: MODE REPLACE: ${target} runs the chosen PTX for the "
        "kernels of ${G_SOURCE} (CUDA at ${replace_root})")
    elseif(listed AND language STREQUAL "")
      _gevo_nothing_compiles(${target} "${G_SOURCE}" "MODE REPLACE is off (${replace_why})")
    else()
      message(STATUS "gevo: ${name}: MODE REPLACE is off: ${replace_why}; ${target} builds "
        "${G_SOURCE} the ordinary way")
    endif()
  elseif(G_MODE STREQUAL "AUTO")
    set(embed_why "")
    if(NOT listed)
      string(CONCAT embed_why "${target} does not compile ${G_SOURCE}, so no launch of it "
        "could run the chosen PTX: the program loads the embedded PTX itself (gevo_${name}.h)")
    elseif(replacer)
      string(CONCAT embed_why "kernel ${replacer} already replaces the device code of "
        "${G_SOURCE} (one kernel per source file can)")
    else()
      _gevo_usable_program("${clang}" host_clang)
      _gevo_replace_toolchain(${target} "${host_clang}" "${arch}")
      if(replace_why STREQUAL "")
        set(replaced TRUE)
        set_property(SOURCE "${source}" PROPERTY _GEVO_REPLACED_BY "${name}")
        message(STATUS "gevo: ${name}: MODE AUTO is REPLACE: ${target} runs the chosen PTX "
          "for the kernels of ${G_SOURCE} (CUDA at ${replace_root})")
      elseif(language STREQUAL "")
        _gevo_nothing_compiles(${target} "${G_SOURCE}"
          "MODE AUTO cannot use REPLACE (${replace_why})")
      else()
        string(CONCAT embed_why "REPLACE cannot work here: ${replace_why}; ${target} builds "
          "${G_SOURCE} the ordinary way")
      endif()
    endif()
    if(NOT replaced)
      message(STATUS "gevo: ${name}: MODE AUTO is EMBED: ${embed_why}")
    endif()
  endif()

  # A stamp of everything on the IR command's line, rewritten (by CMake) only
  # when it changes: Makefiles do not rerun a custom command whose line changed.
  set(includes "$<TARGET_PROPERTY:${target},INCLUDE_DIRECTORIES>")
  set(defines "$<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>")
  set(flags "${private}/${name}-$<CONFIG>.flags")

  if(prebuilt)
    message(STATUS "gevo: ${name}: device IR from ${prebuilt} (GEVO_IR_DIR); clang is not run for it")
    # GEVO_IR_DIR may be <build>/gevo itself: then the IR is already in place.
    if(NOT prebuilt STREQUAL ll)
      _gevo_ir_copy("${prebuilt}" "${ll}")
    endif()
  else()
    if(replaced)
      # The device IR sees the same CUDA headers as REPLACE's host side (the
      # toolkit's probe compiled with these flags already).
      _gevo_cuda_clang_flags("${replace_root}" cuda_flags)
    else()
      # The installation REPLACE would use (GevoToolkit.cmake), else
      # clang's own search.
      _gevo_cuda_root(root from tried)
      _gevo_cuda_clang_flags("${root}" with_cuda)
      _gevo_clang_finds_cuda("${clang}" "${arch}" "${root}" "${from}" "${with_cuda}" has_cuda)
      if(has_cuda)
        set(cuda_flags ${with_cuda})
      else()
        set(cuda_flags -nocudainc -nocudalib -include "${shim}")
      endif()
    endif()
  endif()

  # The spec: a skeleton when there is none yet. Its project and kernel keys
  # are read here: editing it reconfigures.
  if(kernel_count GREATER 1 AND NOT EXISTS "${user_spec}")
    message(FATAL_ERROR "gevo_optimize(${target}): ${user_spec} does not exist, and with several "
      "KERNEL names (${G_KERNEL}) it describes a pipeline of launches, which gevo cannot sketch: "
      "write it with `kernel = [...]` and [[launches]] (docs/spec.md, \"Pipelines\")")
  endif()
  if(NOT EXISTS "${user_spec}")
    _gevo_spec_skeleton(${target} "${name}" "${user_spec}" "${G_SPEC}" "${source}" "${ll}"
      "${prebuilt}" "${clang}" "${arch}" "${cuda_flags}")
    if(G_TUNE)
      _gevo_tune_skeleton("${user_spec}" "${G_TUNE}" tune_source)
    endif()
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${user_spec}")
  if(G_TUNE)
    _gevo_tune_spec_values(${target} "${user_spec}" "${G_TUNE}" tune_values)
  else()
    _gevo_tune_not_named(${target} "${user_spec}")
  endif()
  _gevo_toml_top_key("${user_spec}" kernel entry)
  if(entry STREQUAL "")
    message(FATAL_ERROR "gevo_optimize(${target}): ${user_spec} has no `kernel = \"...\"`")
  endif()
  if(kernel_count GREATER 1 AND NOT entry STREQUAL G_KERNEL)
    string(REPLACE ";" ", " listed "${entry}")
    string(REPLACE ";" ", " given "${G_KERNEL}")
    message(FATAL_ERROR "gevo_optimize(${target}): KERNEL names ${given}, but ${user_spec} "
      "has kernel = [${listed}]: list the same kernels in the same order in both")
  endif()
  # The build steps take the entries comma-separated (a `;` would split
  # the command's argument).
  string(REPLACE ";" "," entry "${entry}")
  _gevo_spec_todos("${user_spec}" todos)
  if(todos GREATER 0)
    message(STATUS "gevo: ${name}: ${G_SPEC} still has TODO placeholders (on ${todos} lines): "
      "builds use the original kernel until they are filled in (docs/spec.md)")
  endif()
  # The daemon names the kernel <project>/<name>.
  _gevo_choose_project("${name}" "${G_PROJECT}" "${user_spec}" project)

  if(prebuilt)
    file(GENERATE OUTPUT "${flags}" CONTENT
      "prebuilt=${prebuilt}\nclang=${clang}\narch=${arch}\nproject=${project}\ngevod=${GEVOD}\n")
  else()
    file(GENERATE OUTPUT "${flags}" CONTENT
      "clang=${clang}\narch=${arch}\ncuda=${cuda_flags}\nproject=${project}\ngevod=${GEVOD}\nincludes=${includes}\ndefines=${defines}\nline_tables=${GEVO_LINE_TABLES}\n")
    _gevo_ir_rule("${ll}" "${private}/${name}.ll.d" "" "")
  endif()

  # TUNE: each configuration's IR, the tune file the spec and select steps
  # read, and the header the target's sources force-include.
  set(tune_file "")
  set(tune_irs "")
  set(tune_include "")
  if(G_TUNE)
    _gevo_tune_rules()
    set(tune_include -include "${tune_header}")
  else()
    set(tune_header "")
  endif()

  add_custom_command(
    OUTPUT "${spec}"
    COMMAND "${CMAKE_COMMAND}" -DGEVO_STEP=spec "-DUSER_SPEC=${user_spec}" "-DOUT=${spec}"
            "-DLL=${ll}" "-DARCH=${arch}" "-DPROJECT=${project}" "-DTUNE=${tune_file}" -P "${step}"
    DEPENDS "${user_spec}" "${ll}" "${step}" "${flags}" ${tune_file} ${tune_irs}
    COMMENT "gevo: spec of ${name} for gevod"
    VERBATIM)

  add_custom_command(
    OUTPUT "${original}"
    COMMAND "${CMAKE_COMMAND}" -DGEVO_STEP=original "-DLL=${ll}" "-DOUT=${original}"
            "-DARCH=${arch}" "-DGEVOD=${GEVOD}" "-DCLANG=${clang}" "-DENTRY=${entry}"
            -P "${step}"
    DEPENDS "${ll}" "${step}" "${flags}"
    COMMENT "gevo: original PTX of ${name}"
    VERBATIM)

  # Runs at every build; rewrites <name>.ptx only when the answer changes.
  # With REPLACE, ptxas must take an evolved PTX before it is chosen: the
  # build then assembles it.
  _gevo_daemon_paths(socket state)
  set(select_ptxas "")
  if(replaced)
    set(select_ptxas "${replace_ptxas}")
  endif()
  add_custom_target(gevo_select_${name}
    COMMAND "${CMAKE_COMMAND}" -DGEVO_STEP=select "-DKERNEL=${project}/${name}" "-DARCH=${arch}"
            "-DCLIENT=${GEVO_CLIENT}" "-DSOCKET=${socket}" "-DSTATE=${state}"
            "-DUSE_EVOLVED=${GEVO_USE_EVOLVED}" "-DSPEC=${spec}" "-DUSER_SPEC=${user_spec}"
            "-DORIGINAL=${original}"
            "-DOUT=${ptx}" "-DORIGIN=${origin}" "-DPTXAS=${select_ptxas}" "-DTUNE=${tune_file}"
            -P "${step}"
    DEPENDS "${original}" "${spec}"
    BYPRODUCTS "${ptx}" "${origin}" ${tune_header}
    COMMENT "gevo: choosing the PTX of ${name}"
    VERBATIM)
  add_dependencies(${target} gevo_select_${name})

  add_custom_command(
    OUTPUT "${embedded}"
    COMMAND "${CMAKE_COMMAND}" -DGEVO_STEP=embed "-DPTX=${ptx}" "-DORIGIN=${origin}"
            "-DNAME=${name}" "-DENTRY=${entry}" "-DOUT=${embedded}" -P "${step}"
    DEPENDS "${ptx}" "${origin}" "${step}"
    COMMENT "gevo: embedding ${name}.ptx"
    VERBATIM)

  if(replaced)
    _gevo_replace_rules()
  endif()

  set(text [=[
/* gevo_@NAME@.h: generated by gevo_optimize() (GevoOptimize.cmake); do not edit.
 *
 * The PTX of kernel "@NAME@" built into this program: the best validated
 * variant gevod had for this exact IR and spec at build time, or else the
 * original kernel. */
#ifndef GEVO_@NAME@_H_INCLUDED
#define GEVO_@NAME@_H_INCLUDED

#include <stddef.h>

/* 1 when the program's <<<...>>> launches of the kernels in @SOURCE@
 * run this PTX (MODE REPLACE in effect); 0 when they run what the ordinary
 * build compiled, if anything (MODE EMBED, or REPLACE turned off: the
 * configure log says why). */
#define GEVO_@NAME@_REPLACED @REPLACED@

#ifdef __cplusplus
extern "C" {
#endif

/* The PTX text, NUL-terminated. */
const char *gevo_ptx_@NAME@(void);
/* Its length in bytes, without the terminating NUL. */
size_t gevo_ptx_@NAME@_size(void);
/* "original", or "evolved: <kernel> <arch>, speedup ...": which PTX it is. */
const char *gevo_ptx_@NAME@_origin(void);
/* The kernel's entry name in the PTX, for cuModuleGetFunction. */
const char *gevo_ptx_@NAME@_entry(void);

/* gevo_load_@NAME@() below is there where <cuda.h> can be included, unless
 * GEVO_NO_LOAD_HELPERS is defined. */

#ifdef __cplusplus
}
#endif

#if defined(__has_include) && !defined(GEVO_NO_LOAD_HELPERS)
#if __has_include(<cuda.h>)
#include <cuda.h>
#ifndef GEVO_HAVE_CUDA_H
#define GEVO_HAVE_CUDA_H 1
#endif
/* Loads the PTX into the current CUDA context and finds the kernel. On
 * failure *module is left NULL and the driver's error is returned. */
static inline CUresult gevo_load_@NAME@(CUmodule *module, CUfunction *function)
{
    CUresult r = cuModuleLoadData(module, gevo_ptx_@NAME@());
    if (r != CUDA_SUCCESS) {
        *module = NULL;
        return r;
    }
    r = cuModuleGetFunction(function, *module, gevo_ptx_@NAME@_entry());
    if (r != CUDA_SUCCESS) {
        cuModuleUnload(*module);
        *module = NULL;
    }
    return r;
}
#endif
#endif

#endif
]=])
  string(REPLACE "@NAME@" "${name}" text "${text}")
  string(REPLACE "@SOURCE@" "${G_SOURCE}" text "${text}")
  if(replaced)
    string(REPLACE "@REPLACED@" "1" text "${text}")
  else()
    string(REPLACE "@REPLACED@" "0" text "${text}")
  endif()
  string(REGEX REPLACE "^\n" "" text "${text}")
  _gevo_write_if_different("${header}" "${text}")

  target_sources(${target} PRIVATE "${embedded}" "${header}")
  target_include_directories(${target} PRIVATE "${dir}")

  _gevo_watch("${dir}")
  # For the caller: whether the launches run the chosen PTX.
  set(GEVO_${name}_REPLACED ${replaced} PARENT_SCOPE)
endfunction()

cmake_policy(POP)
