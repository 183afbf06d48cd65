# GevoTune.cmake: the configure-time half of gevo_optimize(... TUNE <NAME>...)
# (included by GevoOptimize.cmake; docs/cmake.md, "Tunable constants: TUNE").
#
# TUNE names preprocessor constants (block and tile sizes) that gevo may
# choose. The values to try are the spec's `[tune]` lines `NAME = [v, v]`;
# the source's own values are its `#ifndef NAME` / `#define NAME <integer>`
# / `#endif`. At build time clang emits one IR per configuration (the product
# of the values, less the source's) with -DNAME=value into
# <build>/gevo/<name>.tune/, the spec copy gets `[tune] ir = <pattern>` and
# `[tune.source]` (GevoBuildStep.cmake), and the select step writes
# <build>/gevo/gevo_<name>_tune.h with the chosen PTX's configuration, which
# every C, C++ and CUDA source of the target force-includes.
include_guard(GLOBAL)

# The source's value of each constant of names, as <prefix>_<NAME> in the
# caller's scope. The source must define each once, guarded so that a value
# given from outside (-D, the force-included header) wins:
#   #ifndef NAME
#   #define NAME <integer>
#   #endif
function(_gevo_tune_source_values target source shown names prefix)
  file(READ "${source}" text)
  # Every line between two newlines, so that a match that ends with one
  # leaves the next line its own.
  string(REPLACE "\n" "\n\n" text "\n${text}\n")
  set(ws "[ \t]*")
  set(form "`#ifndef NAME` / `#define NAME <integer>` / `#endif`")
  foreach(n IN LISTS names)
    string(REGEX MATCHALL "\n${ws}#${ws}define[ \t]+${n}[ \t(\n]" defines "${text}")
    list(LENGTH defines count)
    set(guarded "\n${ws}#${ws}ifndef[ \t]+${n}${ws}(/[/*][^\n]*)?\n\n${ws}#${ws}define[ \t]+${n}([ \t][^\n]*)?\n\n${ws}#${ws}endif")
    string(REPLACE "NAME" "${n}" wanted "${form}")
    if(count EQUAL 0)
      message(FATAL_ERROR "gevo_optimize(${target}): TUNE ${n}: ${shown} does not define ${n}; "
        "define it there as ${wanted}, with the value the source uses when gevo chooses none")
    elseif(NOT text MATCHES "${guarded}")
      message(FATAL_ERROR "gevo_optimize(${target}): TUNE ${n}: ${shown} defines ${n} without "
        "`#ifndef ${n}` around it; wrap it in `#ifndef ${n}` (${wanted}), because gevo's value "
        "(-D${n}=... for each configuration's IR, and the header that builds with the chosen "
        "configuration) must be able to override it")
    elseif(count GREATER 1)
      message(FATAL_ERROR "gevo_optimize(${target}): TUNE ${n}: ${shown} defines ${n} ${count} "
        "times; gevo reads the source's value from one definition, ${wanted}")
    endif()
    set(value "${CMAKE_MATCH_2}")
    string(REGEX REPLACE "/[/*].*$" "" value "${value}")
    string(STRIP "${value}" value)
    if(value MATCHES "^\\(${ws}([-+]?[0-9]+)${ws}\\)$" OR value MATCHES "^([-+]?[0-9]+)$")
      math(EXPR value "${CMAKE_MATCH_1}")
    else()
      message(FATAL_ERROR "gevo_optimize(${target}): TUNE ${n}: ${shown} defines ${n} as "
        "`${value}`; gevo needs a decimal integer there (${wanted})")
    endif()
    set(${prefix}_${n} "${value}" PARENT_SCOPE)
  endforeach()
endfunction()

# The values to try of each constant of names, from the spec's [tune] table,
# as the list <prefix>_<NAME> in the caller's scope. Only the one-line form
# `NAME = [8, 16, 32]` is read (CMake's regexes, not a TOML parser); `ir`,
# `source` and `chosen` are skipped (the copy gevod reads gets its own `ir`
# and [tune.source]).
function(_gevo_tune_spec_values target spec names prefix)
  file(READ "${spec}" text)
  _gevo_toml_chunks("${text}" chunk)
  set(body "")
  set(found FALSE)
  math(EXPR last "${chunk_count} - 1")
  foreach(i RANGE 1 ${last})
    _gevo_toml_chunk_is("${chunk_${i}}" tune is_tune)
    if(is_tune)
      set(found TRUE)
      set(body "${chunk_${i}}")
      break()
    endif()
  endforeach()
  string(REPLACE ";" ", " shown_names "${names}")
  if(NOT found)
    list(GET names 0 first)
    message(FATAL_ERROR "gevo_optimize(${target}): TUNE names ${shown_names}, but ${spec} has no "
      "[tune] table with the values to try: add one, e.g. `[tune]` and on the next line "
      "`${first} = [8, 16, 32]` (docs/cmake.md, \"Tunable constants: TUNE\")")
  endif()
  set(listed)
  string(CONCAT one_line "gevo reads the [tune] table of the spec with CMake's regexes and "
    "takes only the one-line form NAME = [8, 16, 32] (decimal integers)")
  # Line by line after the header (not as a CMake list: an unclosed `[`
  # would join list items).
  string(APPEND body "\n")
  string(FIND "${body}" "\n" at)
  math(EXPR at "${at} + 1")
  string(SUBSTRING "${body}" ${at} -1 rest)
  while(NOT rest STREQUAL "")
    string(FIND "${rest}" "\n" at)
    string(SUBSTRING "${rest}" 0 ${at} line)
    math(EXPR at "${at} + 1")
    string(SUBSTRING "${rest}" ${at} -1 rest)
    string(STRIP "${line}" line)
    if(line STREQUAL "" OR line MATCHES "^#")
      continue()
    endif()
    if(NOT line MATCHES "^([A-Za-z_][A-Za-z0-9_]*)[ \t]*=[ \t]*(.*)$")
      message(FATAL_ERROR "gevo_optimize(${target}): cannot read `${line}` in the [tune] table "
        "of ${spec}: ${one_line}, one constant a line")
    endif()
    set(key "${CMAKE_MATCH_1}")
    set(value "${CMAKE_MATCH_2}")
    if(key MATCHES "^(ir|source|chosen)$")
      continue()
    endif()
    if(NOT key IN_LIST names)
      message(FATAL_ERROR "gevo_optimize(${target}): ${spec}'s [tune] lists ${key}, which TUNE "
        "does not name (TUNE ${shown_names}): add it to TUNE, so that gevo builds the IR of its "
        "values, or remove it from the spec")
    endif()
    if(NOT value MATCHES "^\\[([-+0-9, \t]*)\\][ \t]*(#.*)?$")
      message(FATAL_ERROR "gevo_optimize(${target}): cannot read the values of ${key} in the "
        "[tune] table of ${spec} (`${line}`): ${one_line}")
    endif()
    string(REPLACE "," ";" items "${CMAKE_MATCH_1}")
    set(values)
    foreach(v IN LISTS items)
      string(STRIP "${v}" v)
      if(NOT v MATCHES "^[-+]?[0-9]+$")
        message(FATAL_ERROR "gevo_optimize(${target}): cannot read the values of ${key} in the "
          "[tune] table of ${spec} (`${line}`): ${one_line}")
      endif()
      math(EXPR v "${v}")
      if(v IN_LIST values)
        message(FATAL_ERROR "gevo_optimize(${target}): ${spec}'s [tune] lists the value ${v} "
          "of ${key} twice")
      endif()
      list(APPEND values "${v}")
    endforeach()
    if(NOT values)
      message(FATAL_ERROR "gevo_optimize(${target}): ${spec}'s [tune] has no values for ${key}")
    endif()
    set(${prefix}_${key} "${values}" PARENT_SCOPE)
    list(APPEND listed "${key}")
  endwhile()
  foreach(n IN LISTS names)
    if(NOT n IN_LIST listed)
      message(FATAL_ERROR "gevo_optimize(${target}): TUNE ${n}: the [tune] table of ${spec} "
        "has no values for ${n}: add a line `${n} = [...]` with the values to try")
    endif()
  endforeach()
endfunction()

# Without TUNE a spec must not have [tune]: its `ir` pattern would name
# files no one builds.
function(_gevo_tune_not_named target spec)
  file(READ "${spec}" text)
  _gevo_toml_chunks("${text}" chunk)
  math(EXPR last "${chunk_count} - 1")
  foreach(i RANGE 1 ${last})
    _gevo_toml_chunk_is("${chunk_${i}}" tune is_tune)
    if(is_tune)
      message(FATAL_ERROR "gevo_optimize(${target}): ${spec} has a [tune] table, but the call "
        "names no TUNE constants: add TUNE with the names of its constants, so that gevo builds "
        "the IR of each configuration and the build uses the chosen one (docs/cmake.md, "
        "\"Tunable constants: TUNE\")")
    endif()
  endforeach()
endfunction()

# A spec skeleton just written (gevod spec init) gets a [tune] table trying
# only the source's values, to be filled in.
function(_gevo_tune_skeleton spec names prefix)
  string(CONCAT text "\n# gevo_optimize(... TUNE): the values of each constant to try (TODO: list "
    "more than\n# the source's own); gevo sets `ir` and [tune.source] in the copy gevod reads.\n"
    "[tune]\n")
  foreach(n IN LISTS names)
    string(APPEND text "${n} = [${${prefix}_${n}}]\n")
  endforeach()
  file(APPEND "${spec}" "${text}")
endfunction()

# The target's compile definitions must leave the constants to the source
# and gevo: a -DNAME there would make the source's value another than the
# one gevo reads.
function(_gevo_tune_check_definitions target names)
  get_target_property(defines ${target} COMPILE_DEFINITIONS)
  foreach(d IN LISTS defines)
    foreach(n IN LISTS names)
      if(d MATCHES "^${n}(=|$)")
        message(FATAL_ERROR "gevo_optimize(${target}): TUNE ${n}: ${target}'s compile "
          "definitions define ${n} (${d}); leave it to the source's `#ifndef ${n}` default and "
          "to gevo's choice")
      endif()
    endforeach()
  endforeach()
endfunction()

# The rules of TUNE, in gevo_optimize()'s scope (a macro: it reads and sets
# its variables): one IR per configuration (the product of the values, the
# source's left out: <name>.ll is that one), the tune file the spec and
# select steps read, the header and its force-include.
macro(_gevo_tune_rules)
  set(tune_header "${dir}/gevo_${name}_tune.h")
  set(tune_file "${private}/${name}.tune")
  set(tune_dir "${dir}/${name}.tune")
  file(MAKE_DIRECTORY "${tune_dir}")
  # Every configuration: a list of "v1.v2..." file stems and of NAME=value
  # pairs joined with commas, first constant slowest.
  set(tune_stems "")
  set(tune_configs "")
  set(tune_pattern "${name}")
  set(tune_source "")
  foreach(n IN LISTS G_TUNE)
    string(APPEND tune_pattern ".{${n}}")
    list(APPEND tune_source "${n}=${tune_source_${n}}")
    set(stems "")
    set(configs "")
    foreach(v IN LISTS tune_values_${n})
      if(tune_stems STREQUAL "")
        list(APPEND stems "${v}")
        list(APPEND configs "${n}=${v}")
      else()
        foreach(s c IN ZIP_LISTS tune_stems tune_configs)
          list(APPEND stems "${s}.${v}")
          list(APPEND configs "${c},${n}=${v}")
        endforeach()
      endif()
    endforeach()
    set(tune_stems "${stems}")
    set(tune_configs "${configs}")
    list(LENGTH tune_stems count)
    if(count GREATER 1024)
      message(FATAL_ERROR "gevo_optimize(${target}): ${user_spec}'s [tune] makes more than 1024 "
        "configurations (the product of the value lists); each is compiled and timed, so list "
        "fewer values")
    endif()
  endforeach()
  string(REPLACE ";" "," tune_source_line "${tune_source}")
  string(REPLACE ";" "," tune_names_line "${G_TUNE}")
  set(tune_text "name=${name}\nnames=${tune_names_line}\nsource=${tune_source_line}\n")
  string(APPEND tune_text "pattern=${name}.tune/${tune_pattern}.ll\nheader=${tune_header}\n")
  set(tune_irs "")
  foreach(stem config IN ZIP_LISTS tune_stems tune_configs)
    if(config STREQUAL tune_source_line)
      continue()
    endif()
    set(file "${name}.tune/${name}.${stem}.ll")
    string(APPEND tune_text "ir=${file}\n")
    list(APPEND tune_irs "${dir}/${file}")
    string(REPLACE "," ";" defs "${config}")
    string(REPLACE ";" " " shown "${defs}")
    list(TRANSFORM defs PREPEND "-D")
    if(prebuilt)
      if(NOT EXISTS "${ir_dir}/${file}")
        message(FATAL_ERROR "gevo_optimize(${target}): GEVO_IR_DIR is set, but "
          "${ir_dir}/${file} (the IR of ${shown}) does not exist: copy <build>/gevo/${name}.tune/ "
          "of a build on a machine with clang-19 there too")
      endif()
      if(NOT ir_dir STREQUAL dir)
        _gevo_ir_copy("${ir_dir}/${file}" "${dir}/${file}")
      endif()
    else()
      _gevo_ir_rule("${dir}/${file}" "${private}/${name}.${stem}.ll.d" "${defs}" ", ${shown}")
    endif()
  endforeach()
  _gevo_write_if_different("${tune_file}" "${tune_text}")
  # The header exists before the first build's select step writes it.
  if(NOT EXISTS "${tune_header}")
    _gevo_tune_header_text("${name}" "${G_TUNE}" "" header_text)
    file(WRITE "${tune_header}" "${header_text}")
  endif()
  # The source's values are read here: editing the source reconfigures.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${source}")
  # Host and kernel of the target's own compilation see the chosen values;
  # the compilers' depfiles list the header, so a new one recompiles.
  target_compile_options(${target} PRIVATE
    "$<$<COMPILE_LANGUAGE:C,CXX,CUDA>:SHELL:-include \"${tune_header}\">")
  string(REPLACE ";" " " shown "${tune_source}")
  string(REPLACE ";" " " names_shown "${G_TUNE}")
  list(LENGTH tune_irs more)
  message(STATUS "gevo: ${name}: TUNE ${names_shown}: ${count} configurations of the spec's "
    "values; the source's (${shown}) is ${name}.ll, ${more} more in ${name}.tune/; ${target} "
    "is compiled with the chosen PTX's configuration (gevo_${name}_tune.h)")
endmacro()
