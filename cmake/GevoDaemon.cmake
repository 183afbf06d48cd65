# GevoDaemon.cmake: what configure asks of the running gevod (included by
# GevoOptimize.cmake): registering the build's gevo directory (GEVO_WATCH)
# and where the daemon keeps its exports (GEVO_STATE, else the state
# directory the running daemon names, remembered for later builds).

option(GEVO_WATCH "Register <build>/gevo with gevod at configure time (gevo-client watch --from-build; OFF: never)" ON)

# The daemon's state directory for the builds' fallback to its exports:
# GEVO_STATE when set; else the one the running daemon names (`gevo-client
# status`), remembered in the cache (_GEVO_DAEMON_STATE) so that a build
# while the daemon is down reads the exports where that daemon wrote them;
# else the client's defaults. Asked once per configure; says which.
function(_gevo_daemon_state)
  get_property(done GLOBAL PROPERTY _GEVO_STATE_ASKED)
  if(done)
    return()
  endif()
  set_property(GLOBAL PROPERTY _GEVO_STATE_ASKED TRUE)
  if(NOT GEVO_STATE STREQUAL "")
    message(STATUS "gevo: builds read gevod's exports from ${GEVO_STATE} when it is down (GEVO_STATE)")
    return()
  endif()
  set(asked FALSE)
  if(GEVO_CLIENT AND EXISTS "${GEVO_CLIENT}")
    _gevo_daemon_paths(socket ignored)
    _gevo_client_command(client "${GEVO_CLIENT}" "${socket}" "")
    execute_process(COMMAND ${client} --json --timeout 20 status
      RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_QUIET TIMEOUT 30)
    if(rc STREQUAL "0")
      string(JSON state ERROR_VARIABLE json_error GET "${out}" state_dir)
      if(NOT json_error AND NOT state STREQUAL "")
        set(asked TRUE)
        set(_GEVO_DAEMON_STATE "${state}" CACHE INTERNAL
          "gevod's state directory, as the running daemon named it at configure")
        message(STATUS "gevo: builds read gevod's exports from ${state} when it is down "
          "(the running daemon's state directory; -DGEVO_STATE=DIR sets another)")
      endif()
    endif()
  endif()
  if(asked)
    return()
  elseif(DEFINED _GEVO_DAEMON_STATE AND NOT _GEVO_DAEMON_STATE STREQUAL "")
    message(STATUS "gevo: gevod did not answer; builds read its exports from ${_GEVO_DAEMON_STATE} "
      "when it is down (the state directory it named at an earlier configure; -DGEVO_STATE=DIR sets another)")
  else()
    message(STATUS "gevo: gevod did not answer; builds read its exports from the client's default "
      "state directories when it is down (-DGEVO_STATE=DIR names the daemon's)")
  endif()
endfunction()

# Registers <build>/gevo with the daemon, once per configure, unless
# GEVO_WATCH is OFF. The registration is a build's (--from-build): a
# directory the user unwatched with `gevo-client unwatch` stays unwatched
# until `gevo-client watch`.
function(_gevo_watch dir)
  get_property(done GLOBAL PROPERTY _GEVO_WATCHED)
  if(done)
    return()
  endif()
  set_property(GLOBAL PROPERTY _GEVO_WATCHED TRUE)
  if(NOT GEVO_WATCH)
    message(STATUS "gevo: GEVO_WATCH is OFF: ${dir} is not registered with gevod; "
      "builds still use what it has for this build's kernels (`gevo-client watch ${dir}` registers it)")
    return()
  endif()
  if(NOT GEVO_CLIENT OR NOT EXISTS "${GEVO_CLIENT}")
    message(STATUS "gevo: gevo-client not found (set GEVO_CLIENT); builds use the original kernels")
    return()
  endif()
  _gevo_client(client)
  execute_process(COMMAND ${client} watch --from-build "${dir}"
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 60)
  string(STRIP "${out}" out)
  string(STRIP "${err}" err)
  string(REGEX REPLACE "^gevo-client: " "" err "${err}")
  if(err STREQUAL "")
    set(err "gevo-client exited ${rc} without a message")
  endif()
  if(rc STREQUAL "0")
    message(STATUS "gevo: gevod: ${out}")
  else()
    # Builds still read the daemon's exports while it is down (gevo-client
    # best falls back on them): say so, rather than promise the original.
    message(STATUS "gevo: could not register ${dir} with gevod (${err}); until it is, builds use "
      "the best variant gevod exported for this build's spec where there is one, else the original "
      "kernels: start gevod, then re-run cmake or `gevo-client watch ${dir}`")
  endif()
endfunction()
