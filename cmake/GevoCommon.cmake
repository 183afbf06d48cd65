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

# The command line that runs gevo-client against the daemon this build
# names: GEVO_SOCKET in the client's environment when socket is set (the
# client then asks that daemon only), removed from it otherwise (the client
# searches its default places), so that configure and every build ask the
# same way whatever the calling shell has; --state when state is set.
function(_gevo_client_command out client socket state)
  if(socket STREQUAL "")
    set(command "${CMAKE_COMMAND}" -E env --unset=GEVO_SOCKET "${client}")
  else()
    set(command "${CMAKE_COMMAND}" -E env "GEVO_SOCKET=${socket}" "${client}")
  endif()
  if(NOT state STREQUAL "")
    list(APPEND command --state "${state}")
  endif()
  set(${out} "${command}" PARENT_SCOPE)
endfunction()

# How many lines of the spec still hold a placeholder (a string value
# starting with TODO, outside comments: `gevod spec init` writes them).
function(_gevo_spec_todos spec out)
  file(STRINGS "${spec}" lines REGEX "^[^#]*[=[,][ \t]*\"TODO")
  list(LENGTH lines count)
  set(${out} ${count} PARENT_SCOPE)
endfunction()
