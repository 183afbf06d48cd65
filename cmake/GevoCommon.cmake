# Helpers shared by GevoOptimize.cmake (configure time) and
# GevoBuildStep.cmake (build steps run with cmake -P).
include_guard(GLOBAL)

# Writes only when the content differs, so nothing downstream reruns.
function(_gevo_write_if_different file content)
  if(EXISTS "${file}")
    file(READ "${file}" old)
    if(old STREQUAL content)
      return()
    endif()
  endif()
  file(WRITE "${file}" "${content}")
endfunction()

# gevo-client's options for where the daemon is: --socket and --state when set.
function(_gevo_location_args out socket state)
  set(args)
  if(NOT socket STREQUAL "")
    list(APPEND args --socket "${socket}")
  endif()
  if(NOT state STREQUAL "")
    list(APPEND args --state "${state}")
  endif()
  set(${out} "${args}" PARENT_SCOPE)
endfunction()
