# GevoBuildStep.cmake: the build-time steps of gevo_optimize(), run as
#   cmake -DGEVO_STEP=<step> -D... -P GevoBuildStep.cmake
#
#   spec      USER_SPEC OUT LL ARCH PROJECT TUNE: writes the spec gevod reads:
#             the user's spec with `ir`, `arch` and `project` set, and the IR's
#             SHA-256 in a comment (so the spec's hash names this exact IR).
#             With TUNE (the tune file gevo_optimize(... TUNE) writes), also
#             [tune]'s `ir` pattern and [tune.source], and the SHA-256 of the
#             configurations' IR files.
#   original  LL OUT ARCH GEVOD CLANG ENTRY: the original kernel's PTX, with
#             `gevod ptx` when GEVOD is set, else (or when it fails) clang;
#             CLANG is empty with prebuilt IR on a machine without clang.
#   select    KERNEL ARCH CLIENT SOCKET STATE USE_EVOLVED SPEC USER_SPEC ORIGINAL
#             OUT ORIGIN: asks gevo-client for the best validated PTX (SOCKET
#             is given to it as GEVO_SOCKET; not while the spec still has TODO
#             placeholders, naming USER_SPEC then); copies it,
#             or the original on any failure, to OUT only when the content
#             differs, and what it is to ORIGIN; says which and why.
#             With PTXAS set (MODE REPLACE), an evolved PTX is chosen only
#             if it has every entry of the original (the source's launches
#             need them all) and ptxas assembles it for ARCH.
#             With TUNE, an answer is used only if its configuration names
#             the TUNE constants (or none: the source's values), and the
#             header of the tune file gets its values, rewritten only when
#             its content changes.
#   embed     PTX ORIGIN NAME ENTRY OUT: the C source holding the PTX.
#   fatbin    PTX OUT CUBIN ARCH PTXAS FATBINARY STYLE COMPRESS: assembles the
#             PTX (ptxas) and packs cubin and PTX into the fatbin OUT
#             (MODE REPLACE); STYLE is fatbinary's "image3" or older "image".
#
# Any failure of gevo (no client, no daemon, a stale or unusable answer) makes
# `select` choose the original PTX: it never fails the build.

cmake_minimum_required(VERSION 3.20)

function(_gevo_copy_if_different from to)
  execute_process(COMMAND "${CMAKE_COMMAND}" -E copy_if_different "${from}" "${to}"
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gevo: cannot copy ${from} to ${to}: ${err}")
  endif()
endfunction()

include("${CMAKE_CURRENT_LIST_DIR}/GevoCommon.cmake")

# The tune file of gevo_optimize(... TUNE) (GevoTune.cmake): sets tune_name
# (the kernel's gevo name), tune_names
# and tune_source (lists of NAME and NAME=value), tune_pattern, tune_header
# and tune_irs (the configurations' IR, relative to the spec's directory).
macro(_gevo_read_tune file)
  file(STRINGS "${file}" tune_lines)
  set(tune_irs "")
  foreach(line IN LISTS tune_lines)
    if(line MATCHES "^(name|names|source|pattern|header)=(.*)$")
      string(REPLACE "," ";" tune_${CMAKE_MATCH_1} "${CMAKE_MATCH_2}")
    elseif(line MATCHES "^ir=(.*)$")
      list(APPEND tune_irs "${CMAKE_MATCH_1}")
    endif()
  endforeach()
endmacro()

# The spec text after its top-level keys (tail, starting at a table header)
# with [tune]'s `ir` (and any `source` key) replaced by the tune file's
# pattern and [tune.source] by the source's values.
function(_gevo_tune_spec_tail tail out)
  _gevo_read_tune("${TUNE}")
  _gevo_toml_chunks("${tail}" chunk)
  set(text "")
  set(found FALSE)
  math(EXPR last "${chunk_count} - 1")
  foreach(i RANGE 0 ${last})
    set(c "${chunk_${i}}")
    _gevo_toml_chunk_is("${c}" tune is_tune)
    _gevo_toml_chunk_is("${c}" tune.source is_source)
    if(is_source)
      continue()
    elseif(is_tune)
      set(found TRUE)
      if(NOT c MATCHES "\n")
        string(APPEND c "\n")
      endif()
      string(REGEX REPLACE "\n[ \t]*(ir|source)[ \t]*=[^\n]*" "" c "${c}")
      # After the header line (REGEX REPLACE's ^ would match after each line).
      string(FIND "${c}" "\n" at)
      math(EXPR at "${at} + 1")
      string(SUBSTRING "${c}" 0 ${at} header)
      string(SUBSTRING "${c}" ${at} -1 keys)
      set(c "${header}# Set by gevo_optimize():\nir = \"${tune_pattern}\"\n${keys}")
      string(REGEX REPLACE "\n+$" "" c "${c}")
      string(APPEND c "\n\n")
      string(APPEND c "# Set by gevo_optimize(): the values the source defines.\n[tune.source]\n")
      foreach(pair IN LISTS tune_source)
        string(REPLACE "=" " = " pair "${pair}")
        string(APPEND c "${pair}\n")
      endforeach()
      string(APPEND c "\n")
    endif()
    string(APPEND text "${c}")
  endforeach()
  if(NOT found)
    message(FATAL_ERROR "gevo: ${USER_SPEC} has no [tune] table, which TUNE needs: re-run cmake")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

function(_gevo_step_spec)
  file(READ "${USER_SPEC}" text)
  file(SHA256 "${LL}" ir_sha256)
  get_filename_component(ir "${LL}" NAME)
  # Top-level keys come before the first table header.
  string(PREPEND text "\n")
  string(FIND "${text}" "\n[" at)
  if(at LESS 0)
    set(head "${text}")
    set(tail "\n")
  else()
    string(SUBSTRING "${text}" 0 ${at} head)
    string(SUBSTRING "${text}" ${at} -1 tail)
  endif()
  foreach(key ir arch project)
    string(REGEX REPLACE "\n[ \t]*${key}[ \t]*=[^\n]*" "" head "${head}")
  endforeach()
  string(REGEX REPLACE "^\n" "" head "${head}")
  string(REGEX REPLACE "[ \t\n]+$" "" head "${head}")
  # TUNE: the configurations' IR, by one SHA-256 of their files' hashes.
  set(tune_hash "")
  if(TUNE)
    _gevo_tune_spec_tail("${tail}" tail)
    _gevo_read_tune("${TUNE}")
    get_filename_component(dir "${OUT}" DIRECTORY)
    set(hashes "")
    foreach(ir IN LISTS tune_irs)
      file(SHA256 "${dir}/${ir}" hash)
      string(APPEND hashes "${hash}  ${ir}\n")
    endforeach()
    string(SHA256 hashes "${hashes}")
    set(tune_hash "# tune ir sha256: ${hashes} (of the configurations' IR: sha256sum's lines)\n")
  endif()
  set(out "# Written by gevo_optimize() from ${USER_SPEC}: edit that file, not this one.\n")
  string(APPEND out "${head}\n\n"
    "# Set by gevo_optimize():\n"
    "ir = \"${ir}\"\n"
    "arch = \"${ARCH}\"\n"
    "project = \"${PROJECT}\"\n"
    "# ir sha256: ${ir_sha256}\n"
    "${tune_hash}"
    "${tail}")
  # gevod goes by content: rewriting the same text starts nothing.
  file(WRITE "${OUT}" "${out}")
endfunction()

function(_gevo_step_original)
  set(tmp "${OUT}.tmp")
  file(REMOVE "${tmp}")
  if(GEVOD AND EXISTS "${GEVOD}")
    # ENTRY: the kernel, or a pipeline's kernels separated by commas.
    string(REPLACE "," ";" entries "${ENTRY}")
    set(kernel_args "")
    foreach(e IN LISTS entries)
      list(APPEND kernel_args --kernel "${e}")
    endforeach()
    execute_process(COMMAND "${GEVOD}" ptx "${LL}" ${kernel_args} --arch "${ARCH}" -o "${tmp}"
      RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(rc EQUAL 0)
      file(RENAME "${tmp}" "${OUT}")
      return()
    endif()
    string(STRIP "${err}" err)
    if(NOT CLANG)
      # Prebuilt IR (GEVO_IR_DIR) on a machine without clang: nothing else
      # can make the PTX.
      message(FATAL_ERROR "gevo: `gevod ptx ${LL}` failed and no clang is set to try instead: ${err}")
    endif()
    message(STATUS "gevo: `gevod ptx` failed (${err}); compiling the original PTX with ${CLANG}")
  endif()
  if(NOT CLANG)
    message(FATAL_ERROR "gevo: neither gevod (GEVOD) nor clang (GEVO_CLANG) is available to "
      "compile ${LL} to PTX")
  endif()
  execute_process(
    COMMAND "${CLANG}" --target=nvptx64-nvidia-cuda "-march=${ARCH}" -O3 -S -x ir "${LL}" -o "${tmp}"
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gevo: cannot compile ${LL} to PTX with ${CLANG}: ${err}")
  endif()
  file(READ "${tmp}" ptx)
  if(ptx MATCHES "\\.extern[^\n]*__nv_")
    message(WARNING "gevo: ${OUT} calls libdevice functions (__nv_*) that were not linked in, "
      "so the driver will not load it: install CUDA where clang finds it, or set GEVOD and "
      "give gevod a libdevice (GEVO_LIBDEVICE)")
  endif()
  file(RENAME "${tmp}" "${OUT}")
endfunction()

# The names of a PTX file's .entry directives.
function(_gevo_ptx_entries file out)
  file(READ "${file}" text)
  string(REGEX MATCHALL "\\.entry[ \t]+[A-Za-z0-9_$%]+" found "${text}")
  set(entries)
  foreach(e IN LISTS found)
    string(REGEX REPLACE "^\\.entry[ \t]+" "" e "${e}")
    list(APPEND entries "${e}")
  endforeach()
  set(${out} "${entries}" PARENT_SCOPE)
endfunction()

# For MODE REPLACE: why the evolved PTX best cannot replace the original's
# device code, or "". Checked only when it differs from what OUT holds (what
# OUT holds was checked when it was chosen).
function(_gevo_replace_check best out)
  set(why "")
  if(EXISTS "${OUT}")
    file(SHA256 "${OUT}" old_hash)
    file(SHA256 "${best}" new_hash)
    if(old_hash STREQUAL new_hash)
      set(${out} "" PARENT_SCOPE)
      return()
    endif()
  endif()
  _gevo_ptx_entries("${ORIGINAL}" wanted)
  _gevo_ptx_entries("${best}" have)
  set(missing)
  foreach(e IN LISTS wanted)
    if(NOT e IN_LIST have)
      list(APPEND missing "${e}")
    endif()
  endforeach()
  if(missing)
    string(REPLACE ";" ", " missing "${missing}")
    set(why "the evolved PTX lacks the entries ${missing} of the original, which the launches need")
  else()
    set(cubin "${OUT}.check.cubin")
    execute_process(COMMAND "${PTXAS}" "-arch=${ARCH}" "${best}" -o "${cubin}"
      RESULT_VARIABLE rc OUTPUT_VARIABLE said ERROR_VARIABLE said)
    file(REMOVE "${cubin}")
    if(NOT rc EQUAL 0)
      string(STRIP "${said}" said)
      string(REGEX REPLACE "\n.*" "" said "${said}")
      set(why "ptxas rejects the evolved PTX (${said})")
    endif()
  endif()
  set(${out} "${why}" PARENT_SCOPE)
endfunction()

# The configuration of the answer json (the `[tune]` constants its PTX was
# built with) as a list of NAME=value in name order, "" for none (an
# untuned variant: the source's values); why it cannot be used, or "": it
# must name exactly the TUNE constants (tune_names), with integers.
function(_gevo_answer_configuration json out why_out)
  set(config "")
  set(why "")
  string(JSON type ERROR_VARIABLE missing TYPE "${json}" configuration)
  if(NOT missing AND type STREQUAL "OBJECT")
    string(JSON count LENGTH "${json}" configuration)
    set(names "")
    if(count GREATER 0)
      math(EXPR last "${count} - 1")
      foreach(i RANGE ${last})
        string(JSON n MEMBER "${json}" configuration ${i})
        string(JSON v GET "${json}" configuration "${n}")
        if(NOT v MATCHES "^-?[0-9]+$")
          set(why "the variant's configuration is unreadable: ${n} = ${v} is not an integer")
        endif()
        list(APPEND names "${n}")
        list(APPEND config "${n}=${v}")
      endforeach()
    endif()
    list(SORT config)
    list(SORT names)
    set(wanted "${tune_names}")
    list(SORT wanted)
    string(REPLACE ";" " " shown "${config}")
    if(why STREQUAL "" AND NOT names STREQUAL wanted)
      if(wanted STREQUAL "")
        string(CONCAT why "the variant was built with the configuration ${shown}, but "
          "gevo_optimize() names no TUNE constants to build it with")
      else()
        string(REPLACE ";" " " wanted "${wanted}")
        string(CONCAT why "the variant was built with the configuration ${shown}, which does "
          "not set exactly the TUNE constants (${wanted})")
      endif()
    endif()
  elseif(NOT missing AND NOT type STREQUAL "NULL")
    set(why "the variant's configuration is unreadable: a ${type}, not an object")
  endif()
  if(NOT why STREQUAL "")
    set(config "")
  endif()
  set(${out} "${config}" PARENT_SCOPE)
  set(${why_out} "${why}" PARENT_SCOPE)
endfunction()

function(_gevo_step_select)
  set(tune_names "")
  if(TUNE)
    _gevo_read_tune("${TUNE}")
  endif()
  set(configuration "")
  set(best "${OUT}.best")
  file(REMOVE "${best}")
  set(why "")
  _gevo_spec_todos("${SPEC}" todos)
  if(NOT USE_EVOLVED)
    set(why "GEVO_USE_EVOLVED is OFF")
  elseif(todos GREATER 0)
    set(why "${USER_SPEC} still has TODO placeholders: fill them in (docs/spec.md)")
  elseif(NOT CLIENT OR NOT EXISTS "${CLIENT}")
    set(why "gevo-client not found (set GEVO_CLIENT)")
  else()
    _gevo_client_command(client "${CLIENT}" "${SOCKET}" "${STATE}")
    execute_process(
      COMMAND ${client} --json best "${KERNEL}" --arch "${ARCH}" --spec "${SPEC}" -o "${best}"
      RESULT_VARIABLE rc OUTPUT_VARIABLE json ERROR_VARIABLE said TIMEOUT 120)
    string(STRIP "${said}" said)
    string(REGEX REPLACE "^gevo-client: " "" said "${said}")
    string(REGEX REPLACE "\n(gevo-client: )?" "; " said "${said}")
    # The client names its output file, a temporary one here.
    string(REGEX REPLACE "; (wrote|unchanged:) [^;]*$" "" said "${said}")
    if(rc STREQUAL "0")
      string(JSON spec_hash ERROR_VARIABLE json_error GET "${json}" spec_hash)
      file(SHA256 "${SPEC}" our_spec_hash)
      if(json_error)
        set(why "gevo-client's answer is unreadable: ${json_error}")
      elseif(NOT spec_hash STREQUAL our_spec_hash)
        # gevod keeps serving an earlier version's variant until the new
        # version has one; that variant is of other IR or tests than this
        # build's.
        string(CONCAT why "the validated variant is of another version of the kernel or "
          "its spec, none of this one yet (${said})")
      elseif(NOT EXISTS "${best}")
        set(why "gevo-client exited 0 but wrote no PTX")
      else()
        _gevo_answer_configuration("${json}" configuration why)
        if(why STREQUAL "" AND PTXAS)
          _gevo_replace_check("${best}" why)
        endif()
      endif()
    elseif(rc STREQUAL "3")
      set(why "no validated variant yet: ${said}")
      if(said MATCHES "; pending: ")
        # The daemon has the spec but is waiting for it to settle (or to
        # scan it): nothing to re-register.
        set(why "gevod has not taken this build's spec yet: ${said}")
      elseif(said MATCHES "is in no directory gevod watches")
        set(why "gevod does not watch this build: ${said}")
      elseif(said MATCHES "no kernel named")
        get_filename_component(dir "${SPEC}" DIRECTORY)
        string(APPEND why " (does gevod watch ${dir}? re-run cmake or `gevo-client watch ${dir}`)")
      endif()
    elseif(rc STREQUAL "2")
      set(why "gevod unreachable and no export: ${said}")
    else()
      set(why "gevo-client failed (${rc}): ${said}")
    endif()
  endif()

  if(why STREQUAL "")
    string(JSON target GET "${json}" target)
    string(JSON backend GET "${json}" backend)
    string(JSON job GET "${json}" job)
    string(JSON generation GET "${json}" generation)
    set(speedup "")
    if(said MATCHES "(speedup [^ ]+ \\[[^]]*\\]( on the (simulator|GPU))?)")
      set(speedup ", ${CMAKE_MATCH_1}")
    endif()
    set(origin "evolved: ${KERNEL} ${target}${speedup} (backend ${backend}), ${job} generation ${generation}")
    if(NOT configuration STREQUAL "")
      string(REPLACE ";" " " shown "${configuration}")
      string(APPEND origin ", configuration ${shown}")
    endif()
    set(chosen "${best}")
  else()
    set(origin "original")
    set(chosen "${ORIGINAL}")
    set(configuration "")
  endif()
  file(SHA256 "${chosen}" new_hash)
  set(changed "changed")
  if(EXISTS "${OUT}")
    file(SHA256 "${OUT}" old_hash)
    if(old_hash STREQUAL new_hash)
      set(changed "unchanged")
    endif()
  endif()
  _gevo_copy_if_different("${chosen}" "${OUT}")
  _gevo_write_if_different("${ORIGIN}" "${origin}\n")
  file(REMOVE "${best}")
  get_filename_component(out_name "${OUT}" NAME)
  set(files "${out_name} ${changed}")
  # TUNE: the header with the chosen configuration, or none (the source's).
  if(TUNE)
    get_filename_component(header_name "${tune_header}" NAME)
    _gevo_tune_header_text("${tune_name}" "${tune_names}" "${configuration}" header)
    set(header_changed "changed")
    if(EXISTS "${tune_header}")
      file(READ "${tune_header}" old)
      if(old STREQUAL header)
        set(header_changed "unchanged")
      endif()
    endif()
    _gevo_write_if_different("${tune_header}" "${header}")
    if(configuration STREQUAL "")
      string(REPLACE ";" " " shown "${tune_source}")
      set(shown "the source's configuration ${shown}")
    else()
      string(REPLACE ";" " " shown "${configuration}")
      set(shown "configuration ${shown}")
    endif()
    set(files "${shown}; ${files}, ${header_name} ${header_changed}")
  endif()
  if(why STREQUAL "")
    message(STATUS "gevo: ${KERNEL} ${ARCH}: using the evolved PTX: ${said}; ${files}")
  else()
    message(STATUS "gevo: ${KERNEL} ${ARCH}: using the original PTX: ${why}; ${files}")
  endif()
endfunction()

function(_gevo_step_embed)
  # A pipeline's PTX holds all its kernels; the header names the first.
  string(REPLACE "," ";" pipeline "${ENTRY}")
  list(GET pipeline 0 ENTRY)
  file(SIZE "${PTX}" size)
  file(READ "${PTX}" hex HEX)
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
  string(REPEAT "0x[0-9a-f][0-9a-f]," 16 row)
  string(REGEX REPLACE "(${row})" "\\1\n    " bytes "${bytes}")

  # The entry named by the spec's kernel: itself, the only one, or the
  # (mangled) one containing it.
  _gevo_ptx_entries("${PTX}" entries)
  set(entry "")
  list(LENGTH entries count)
  if(ENTRY IN_LIST entries)
    set(entry "${ENTRY}")
  elseif(count EQUAL 1)
    list(GET entries 0 entry)
  else()
    foreach(e IN LISTS entries)
      string(FIND "${e}" "${ENTRY}" at)
      if(at GREATER_EQUAL 0)
        set(entry "${e}")
        break()
      endif()
    endforeach()
  endif()
  if(entry STREQUAL "")
    message(WARNING "gevo: ${PTX} has no entry named like ${ENTRY} (entries: ${entries})")
  endif()

  file(READ "${ORIGIN}" origin)
  string(STRIP "${origin}" origin)
  string(REPLACE "\\" "\\\\" origin "${origin}")
  string(REPLACE "\"" "\\\"" origin "${origin}")
  string(REPLACE "\n" "\\n" origin "${origin}")

  math(EXPR stored "${size} + 1")
  set(c "/* Generated by gevo_optimize() (GevoBuildStep.cmake) from ${PTX}: do not edit.\n")
  string(APPEND c " * ${NAME}: ${origin} */\n"
    "/* Only the declarations: this file needs no cuda.h. */\n"
    "#define GEVO_NO_LOAD_HELPERS 1\n"
    "#include \"gevo_${NAME}.h\"\n\n"
    "#ifdef __cplusplus\nextern \"C\" {\n#endif\n\n"
    "static const unsigned char gevo_ptx_${NAME}_bytes[${stored}] = {\n"
    "    ${bytes}0x00\n};\n\n"
    "const char *gevo_ptx_${NAME}(void)\n{\n"
    "    return (const char *)gevo_ptx_${NAME}_bytes;\n}\n\n"
    "size_t gevo_ptx_${NAME}_size(void)\n{\n    return ${size};\n}\n\n"
    "const char *gevo_ptx_${NAME}_origin(void)\n{\n    return \"${origin}\";\n}\n\n"
    "const char *gevo_ptx_${NAME}_entry(void)\n{\n    return \"${entry}\";\n}\n\n"
    "#ifdef __cplusplus\n}\n#endif\n")
  file(WRITE "${OUT}" "${c}")
endfunction()

function(_gevo_step_fatbin)
  execute_process(COMMAND "${PTXAS}" "-arch=${ARCH}" "${PTX}" -o "${CUBIN}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE said ERROR_VARIABLE said)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "gevo: ${PTXAS} cannot assemble ${PTX} for ${ARCH}: ${said}")
  endif()
  string(REGEX REPLACE "^sm_" "" sm "${ARCH}")
  if(STYLE STREQUAL "image3")
    set(images "--image3=kind=elf,sm=${sm},file=${CUBIN}" "--image3=kind=ptx,sm=${sm},file=${PTX}")
  else()
    set(images "--image=profile=sm_${sm},file=${CUBIN}" "--image=profile=compute_${sm},file=${PTX}")
  endif()
  # Uncompressed: a kernel's PTX is small, and so the fatbin in the program
  # shows the PTX it runs (strings, grep).
  set(no_compress)
  if(COMPRESS)
    set(no_compress --compress=false)
  endif()
  set(tmp "${OUT}.tmp")
  execute_process(COMMAND "${FATBINARY}" "--create=${tmp}" -64 ${no_compress} ${images}
    RESULT_VARIABLE rc OUTPUT_VARIABLE said ERROR_VARIABLE said)
  if(NOT rc EQUAL 0)
    file(REMOVE "${tmp}")
    message(FATAL_ERROR "gevo: ${FATBINARY} cannot pack ${CUBIN} and ${PTX}: ${said}")
  endif()
  file(RENAME "${tmp}" "${OUT}")
endfunction()

if(GEVO_STEP STREQUAL "spec")
  _gevo_step_spec()
elseif(GEVO_STEP STREQUAL "original")
  _gevo_step_original()
elseif(GEVO_STEP STREQUAL "select")
  _gevo_step_select()
elseif(GEVO_STEP STREQUAL "embed")
  _gevo_step_embed()
elseif(GEVO_STEP STREQUAL "fatbin")
  _gevo_step_fatbin()
else()
  message(FATAL_ERROR "GevoBuildStep.cmake: unknown GEVO_STEP '${GEVO_STEP}'")
endif()
