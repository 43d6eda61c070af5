# The built libraries and executable use the process's shared C++ runtime and
# carry no copy of their own (cmake/CxxRuntime.cmake says why: a private
# static libstdc++ in libattnprof_core.so crashes Python on the first error
# message that formats a number).
#   cmake -DREADELF=<path> -DNM=<path> "-DFILES=a.so;b" -P check_cxx_runtime.cmake
# For each file: libstdc++.so.6 is NEEDED, and its dynamic symbol table defines
# none of libstdc++'s or libsupc++'s own symbols (locale facets and their ids,
# streams, ios_base, the exception runtime).
foreach(tool READELF NM)
  if(NOT ${tool} OR NOT EXISTS "${${tool}}")
    message(FATAL_ERROR "no ${tool} given (CMake found '${${tool}}')")
  endif()
endforeach()
# Mangled prefixes of symbols only the C++ runtime itself defines.
set(runtime_symbols
  "_ZNSt6locale"            # std::locale
  "_ZNSt7num_put"           # std::num_put<...> (its ::id is the facet lookup that failed)
  "_ZNKSt7num_put"
  "_ZNSt8ios_base"          # std::ios_base (Init, flags)
  "_ZNSo"                   # std::basic_ostream<char>
  "_ZNSt13basic_ostream"
  "_ZNSt15basic_streambuf"
  "_ZNSt19basic_ostringstream"
  "_ZNSt7__cxx1119basic_ostringstream"
  "_ZSt4cout" "_ZSt4cerr"
  "__cxa_throw" "__cxa_begin_catch" "__cxa_allocate_exception" "__gxx_personality_v0"
  "_ZTVN10__cxxabiv1")
set(failures "")
foreach(f IN LISTS FILES)
  execute_process(COMMAND "${READELF}" -d "${f}" OUTPUT_VARIABLE dyn RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "readelf -d ${f} failed (${rc}): ${err}")
  endif()
  if(NOT dyn MATCHES "NEEDED[^\n]*\\[libstdc\\+\\+\\.so\\.6\\]")
    string(APPEND failures "\n  ${f}: libstdc++.so.6 is not among its NEEDED libraries (a static C++ runtime was linked in)")
  endif()
  execute_process(COMMAND "${NM}" -D --defined-only "${f}" OUTPUT_VARIABLE syms RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "nm -D --defined-only ${f} failed (${rc}): ${err}")
  endif()
  set(n 0)
  foreach(prefix IN LISTS runtime_symbols)
    string(REGEX MATCHALL "[ \t][A-Za-z] ${prefix}[A-Za-z0-9_]*" hits "${syms}")
    foreach(h IN LISTS hits)
      # Template instantiations the headers emit (weak, 'W'/'V'/'u') are ours to
      # define; the runtime's own are strong ('T', 'D', 'B', 'R').
      if(h MATCHES "[ \t][TDBR] ")
        math(EXPR n "${n} + 1")
        if(n LESS 6)
          string(STRIP "${h}" h)
          string(APPEND failures "\n  ${f} defines the C++ runtime's ${h}")
        endif()
      endif()
    endforeach()
  endforeach()
  string(REGEX MATCH "NEEDED[^\n]*\\[libstdc[^]]*\\]" needed "${dyn}")
  message("${f}: ${needed}; runtime symbols defined: ${n}")
endforeach()
if(failures)
  message(FATAL_ERROR "a C++ runtime of its own is linked in:${failures}")
endif()
