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
