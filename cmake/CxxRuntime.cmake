# One C++ runtime per process. attnprof's libraries are loaded into processes
# whose libstdc++ is the shared system one (Python, via torch). A compiler that
# ships only a static libstdc++ (the GPU machine's /opt/gcc g++ 13: no
# libstdc++.so in its lib64) silently links a private copy into
# libattnprof_core.so; then two copies of the stream and locale internals live
# in one process, and the first message that formats a number through
# std::ostream fails: GCC 12's copy truncates it, GCC 13's crashes Python with
# SIGSEGV. So the shared runtime is always linked, by its full path when the
# compiler cannot find it itself, and tests/check_cxx_runtime.cmake inspects
# the built libraries for it.
#
# Sets ATTNPROF_CXX_RUNTIME (cache: the shared runtime libraries to link, empty
# when the compiler's own shared ones are used) and defines the interface target
# attnprof_cxx_runtime, linked by every target below.
add_library(attnprof_cxx_runtime INTERFACE)
if(NOT CMAKE_SYSTEM_NAME STREQUAL "Linux" OR NOT CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
  return()
endif()

function(_attnprof_glibcxx_max file out)
  # The newest GLIBCXX_3.4.N version a libstdc++ file defines or names (0 if none).
  set(max 0)
  if(EXISTS "${file}")
    file(STRINGS "${file}" versions REGEX "^GLIBCXX_3\\.4\\.[0-9]+$")
    foreach(v IN LISTS versions)
      string(REGEX REPLACE "^GLIBCXX_3\\.4\\." "" n "${v}")
      if(n GREATER max)
        set(max ${n})
      endif()
    endforeach()
  endif()
  set(${out} ${max} PARENT_SCOPE)
endfunction()

# The shared library the dynamic loader hands every process for `soname` (the
# one torch's NEEDED entries resolve to), or "".
function(_attnprof_loader_path soname out)
  execute_process(COMMAND ldconfig -p OUTPUT_VARIABLE ldcache ERROR_QUIET)
  string(REPLACE "+" "\\+" re "${soname}")
  string(REPLACE "." "\\." re "${re}")
  string(REGEX MATCH "${re} \\(libc6,x86-64[^)]*\\) => ([^\n]+)" m "${ldcache}")
  if(m)
    set(${out} "${CMAKE_MATCH_1}" PARENT_SCOPE)
    return()
  endif()
  find_library(_attnprof_found_${soname} NAMES ${soname}
               PATHS /lib/${CMAKE_LIBRARY_ARCHITECTURE} /usr/lib/${CMAKE_LIBRARY_ARCHITECTURE}
                     /lib64 /usr/lib64 /lib /usr/lib NO_DEFAULT_PATH)
  if(_attnprof_found_${soname})
    set(${out} "${_attnprof_found_${soname}}" PARENT_SCOPE)
  else()
    set(${out} "" PARENT_SCOPE)
  endif()
endfunction()

# True when the compiler's driver finds `devname` (libstdc++.so) itself:
# -print-file-name answers the bare name when the file is not in its search path.
function(_attnprof_compiler_has devname out)
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${devname}
                  OUTPUT_VARIABLE f OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  if(IS_ABSOLUTE "${f}" AND EXISTS "${f}")
    set(${out} ON PARENT_SCOPE)
  else()
    set(${out} OFF PARENT_SCOPE)
  endif()
endfunction()

# libstdc++ and, for the same reason, the unwinder libgcc_s (without it the
# driver links a static libgcc_eh: a second unwinder beside the process's).
if(NOT DEFINED ATTNPROF_CXX_RUNTIME)
  set(_runtime "")
  foreach(pair "libstdc++.so:libstdc++.so.6" "libgcc_s.so:libgcc_s.so.1")
    string(REPLACE ":" ";" pair "${pair}")
    list(GET pair 0 devname)
    list(GET pair 1 soname)
    _attnprof_compiler_has(${devname} has)
    if(has)
      continue()
    endif()
    _attnprof_loader_path(${soname} path)
    if(NOT path)
      message(FATAL_ERROR
        "attnprof: ${CMAKE_CXX_COMPILER} has no shared ${devname} and the system has no ${soname} (ldconfig -p). "
        "A static C++ runtime inside libattnprof_core.so crashes Python processes that load it. "
        "Install the system's libstdc++6, or pass -DATTNPROF_CXX_RUNTIME='/path/libstdc++.so.6;/path/libgcc_s.so.1'")
    endif()
    list(APPEND _runtime "${path}")
  endforeach()
  set(ATTNPROF_CXX_RUNTIME "${_runtime}" CACHE STRING
      "Shared C++ runtime libraries linked into every attnprof target (empty: the compiler's own)")
endif()

if(ATTNPROF_CXX_RUNTIME)
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=libstdc++.a
                  OUTPUT_VARIABLE _own_static OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  _attnprof_glibcxx_max("${_own_static}" _need)
  foreach(lib IN LISTS ATTNPROF_CXX_RUNTIME)
    get_filename_component(real "${lib}" REALPATH)
    if(NOT EXISTS "${real}")
      message(FATAL_ERROR "attnprof: ATTNPROF_CXX_RUNTIME names '${lib}', which does not exist")
    endif()
    if(lib MATCHES "libstdc\\+\\+")
      # At least as new as the compiler's library: what it lacked would be
      # taken from the static archive, two runtimes again.
      _attnprof_glibcxx_max("${real}" have)
      if(have LESS _need)
        message(FATAL_ERROR
          "attnprof: the shared C++ runtime ${real} provides GLIBCXX_3.4.${have}, but ${CMAKE_CXX_COMPILER} "
          "needs GLIBCXX_3.4.${_need}; use a compiler no newer than the system's libstdc++, or point "
          "-DATTNPROF_CXX_RUNTIME at a newer libstdc++.so.6")
      endif()
    endif()
  endforeach()
  message(STATUS "attnprof: linking the shared C++ runtime ${ATTNPROF_CXX_RUNTIME} (the compiler has none of its own, or -DATTNPROF_CXX_RUNTIME named it)")
  # Before the driver's own -lstdc++/-lgcc_s: every runtime symbol resolves to
  # the shared libraries, so nothing is taken from a static archive after them.
  target_link_libraries(attnprof_cxx_runtime INTERFACE
    "-Wl,--push-state,--no-as-needed" ${ATTNPROF_CXX_RUNTIME} "-Wl,--pop-state")
endif()
