# Proof that the Hopper attention kernels take Hopper's own path, from the built
# machine code alone (no GPU): every flash_fwd_sm90_kernel (forward) and
# flash_bwd_sm90_kernel (backward) in OBJECTS, and at least one of each and
# one forward on e4m3 inputs, must
#  - issue wgmma (HGMMA in the SASS; QGMMA ...x32.F32.E4M3.E4M3 for the e4m3
#    forward, both of its GEMMs) and TMA loads (UTMALDG),
#  - use no local memory and no stack frame (no spills, no register arrays
#    moved to memory), as cuobjdump -res-usage reports them.
# Prints each kernel's registers / stack / local / shared bytes.
#   cmake -DCUOBJDUMP=<path or NOTFOUND> "-DOBJECTS=a.o;b.o" -P check_sm90_sass.cmake
# Prints "SKIPPED: ..." (ctest's SKIP_REGULAR_EXPRESSION) when there is no cuobjdump.
if(NOT CUOBJDUMP OR NOT EXISTS "${CUOBJDUMP}")
  message("SKIPPED: no cuobjdump found (scripts/setup.sh installs PyPI's nvidia-cuda-cuobjdump and "
          "nvidia-cuda-nvdisasm into <build>/tools; re-run it, or put a CUDA toolkit's bin on PATH)")
  return()
endif()

set(kernel_re "flash_(fwd|bwd)_sm90_kernel")
set(found 0)
set(found_fwd 0)
set(found_bwd 0)
set(found_fp8 0)
set(failures "")
foreach(obj IN LISTS OBJECTS)
  execute_process(COMMAND "${CUOBJDUMP}" -res-usage "${obj}"
                  OUTPUT_VARIABLE usage ERROR_VARIABLE usage_err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cuobjdump -res-usage ${obj} failed (${rc}): ${usage_err}")
  endif()
  execute_process(COMMAND "${CUOBJDUMP}" -sass "${obj}"
                  OUTPUT_VARIABLE sass ERROR_VARIABLE sass_err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "cuobjdump -sass ${obj} failed (${rc}): ${sass_err} "
                        "(cuobjdump needs nvdisasm beside it or on PATH)")
  endif()

  # -res-usage: " Function <mangled>:\n  REG:168 STACK:0 SHARED:0 LOCAL:0 ..."
  string(REGEX MATCHALL "Function [A-Za-z0-9_]+:[^\n]*\n[^\n]*" entries "${usage}")
  foreach(entry IN LISTS entries)
    if(NOT entry MATCHES "${kernel_re}")
      continue()
    endif()
    math(EXPR found "${found} + 1")
    if(entry MATCHES "flash_fwd_sm90_kernel")
      math(EXPR found_fwd "${found_fwd} + 1")
    else()
      math(EXPR found_bwd "${found_bwd} + 1")
    endif()
    string(REGEX MATCH "Function ([A-Za-z0-9_]+):" _ "${entry}")
    set(fn "${CMAKE_MATCH_1}")
    string(REGEX MATCH "REG:([0-9]+) STACK:([0-9]+) SHARED:([0-9]+) LOCAL:([0-9]+)" _ "${entry}")
    set(reg "${CMAKE_MATCH_1}")
    set(stack "${CMAKE_MATCH_2}")
    set(shared "${CMAKE_MATCH_3}")
    set(local "${CMAKE_MATCH_4}")
    # This kernel's SASS: from its "Function : <name>" header to the next one.
    string(FIND "${sass}" "Function : ${fn}" start)
    if(start EQUAL -1)
      list(APPEND failures "${fn}: no SASS found")
      continue()
    endif()
    string(SUBSTRING "${sass}" ${start} -1 body)
    string(LENGTH "Function : ${fn}" header_len)
    string(SUBSTRING "${body}" ${header_len} -1 rest)
    string(FIND "${rest}" "Function : " next)
    if(NOT next EQUAL -1)
      string(SUBSTRING "${rest}" 0 ${next} rest)
    endif()
    # An e4m3 instance (its mangled name holds the element type) runs 8-bit wgmma only.
    set(gmma_re "HGMMA\\.[0-9x]+")
    if(fn MATCHES "fp8_e4m3")
      set(gmma_re "QGMMA\\.[0-9x]+\\.F32\\.E4M3\\.E4M3")
      math(EXPR found_fp8 "${found_fp8} + 1")
    endif()
    string(REGEX MATCHALL "${gmma_re}" hgmma "${rest}")
    string(REGEX MATCHALL "UTMALDG" utmaldg "${rest}")
    string(REGEX MATCHALL "[ \t](LDL|STL)[. ]" local_ops "${rest}")
    list(LENGTH hgmma n_hgmma)
    list(LENGTH utmaldg n_tma)
    list(LENGTH local_ops n_local)
    list(REMOVE_DUPLICATES hgmma)
    message("${fn}\n    registers ${reg}, stack ${stack} B, local ${local} B, static shared ${shared} B; "
            "${n_hgmma} HGMMA (${hgmma}), ${n_tma} UTMALDG, ${n_local} LDL/STL")
    if(n_hgmma EQUAL 0)
      list(APPEND failures "${fn}: no ${gmma_re} (wgmma) in its SASS")
    endif()
    if(fn MATCHES "fp8_e4m3" AND rest MATCHES "HGMMA")
      list(APPEND failures "${fn}: 16-bit wgmma (HGMMA) in the e4m3 kernel")
    endif()
    if(n_tma EQUAL 0)
      list(APPEND failures "${fn}: no UTMALDG (TMA load) in its SASS")
    endif()
    if(NOT stack EQUAL 0 OR NOT local EQUAL 0 OR NOT n_local EQUAL 0)
      list(APPEND failures "${fn}: stack ${stack} B, local ${local} B, ${n_local} LDL/STL (spills?)")
    endif()
  endforeach()
endforeach()

if(found_fwd EQUAL 0 OR found_bwd EQUAL 0 OR found_fp8 EQUAL 0)
  message(FATAL_ERROR "${found_fwd} forward (${found_fp8} of them e4m3) and ${found_bwd} backward kernels "
                      "(${kernel_re}) in: ${OBJECTS}")
endif()
if(failures)
  string(REPLACE ";" "\n  " failures "${failures}")
  message(FATAL_ERROR "sm_90a kernels off Hopper's path:\n  ${failures}")
endif()
message("${found} sm_90a attention kernels (${found_fwd} forward, ${found_fp8} of them e4m3, ${found_bwd} "
        "backward): wgmma + TMA, no stack, no local memory")
