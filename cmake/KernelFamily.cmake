# Kernel families: each folder src/kernels/<family>/ holds one family (its
# configurations, launch layer, kernel parts and LibTorch boundary, api.cpp),
# and a family.cmake that says what of it CMake compiles and for which
# architectures. The top-level CMakeLists.txt adds each family with one line,
# attnprof_kernel_family(<family>). Its .cpp files (the boundary) are part of
# attnprof_core in every build; its CUDA code only where the CUDA kernels are
# built.
#
# ATTNPROF_KERNEL_CONFIGS: alternative configurations to build besides the
# operators' own ("all", or names of the families' alternatives lists, e.g.
# Sm90FwdHdim128N176), run by name through the by-name operators
# (attnprof::flash_attention_sm90_config, ...). CI builds all of them.
set(ATTNPROF_KERNEL_CONFIGS "" CACHE STRING
    "Alternative kernel configurations to build as well: 'all' or a ;-list of their struct names")

# attnprof_add_kernels(<target> ARCHS 80 90a SOURCES a.cu ...): CUDA sources
# compiled only for the listed architectures (sm_<arch> machine code, no PTX),
# with the ptxas resource report (registers, spills) in the build log, linked
# into attnprof_core.
function(attnprof_add_kernels name)
  cmake_parse_arguments(PARSE_ARGV 1 K "" "" "ARCHS;SOURCES")
  set(gencode "")
  foreach(arch IN LISTS K_ARCHS)
    list(APPEND gencode "-gencode=arch=compute_${arch},code=sm_${arch}")
  endforeach()
  add_library(${name} OBJECT ${K_SOURCES})
  set_target_properties(${name} PROPERTIES CUDA_ARCHITECTURES OFF POSITION_INDEPENDENT_CODE ON)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(${name} PRIVATE ${TORCH_LIBRARIES})  # headers and definitions only
  target_compile_options(${name} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:${gencode} --expt-relaxed-constexpr -Xptxas=-v -lineinfo>)
  target_sources(attnprof_core PRIVATE $<TARGET_OBJECTS:${name}>)
endfunction()

# The names in the line `using <list> = kernels::ConfigList<A, B, ...>;` of
# <header> (a family's configurations header): that line is the one place a
# family lists its configurations.
function(_attnprof_config_list header list out)
  file(STRINGS "${header}" lines REGEX "using ${list} = kernels::ConfigList<")
  list(LENGTH lines n)
  if(NOT n EQUAL 1)
    message(FATAL_ERROR "attnprof: ${header} must have one line 'using ${list} = kernels::ConfigList<...>;' "
                        "(found ${n})")
  endif()
  string(REGEX REPLACE ".*ConfigList<([^>]*)>.*" "\\1" names "${lines}")
  string(REGEX REPLACE "[ \t]" "" names "${names}")
  string(REPLACE "," ";" names "${names}")
  set(${out} "${names}" PARENT_SCOPE)
endfunction()

# attnprof_config_instances(<out-var> HEADER <h> CONFIGS <list> [ALTERNATIVES <list>]
#                           TEMPLATE <file.cu.in> ELEMENTS <type>...)
# One generated .cu file per configuration of the CONFIGS list (and of the
# ALTERNATIVES list that ATTNPROF_KERNEL_CONFIGS asks for) and per element
# type, from TEMPLATE with @CONFIG@, @ELEMENT@ and @IS_BF16@ filled in; their
# paths are appended to <out-var>. Adds the requested alternatives' names to
# ATTNPROF_KERNEL_CONFIGS_FOUND (a global property) so unknown names are
# refused once every family has been read.
function(attnprof_config_instances out)
  cmake_parse_arguments(PARSE_ARGV 1 I "" "HEADER;CONFIGS;ALTERNATIVES;TEMPLATE" "ELEMENTS")
  set(header "${PROJECT_SOURCE_DIR}/${I_HEADER}")
  _attnprof_config_list("${header}" "${I_CONFIGS}" configs)
  if(I_ALTERNATIVES)
    _attnprof_config_list("${header}" "${I_ALTERNATIVES}" alternatives)
    set_property(GLOBAL APPEND PROPERTY ATTNPROF_KERNEL_CONFIGS_KNOWN ${alternatives})
    foreach(alt IN LISTS alternatives)
      if("all" IN_LIST ATTNPROF_KERNEL_CONFIGS OR alt IN_LIST ATTNPROF_KERNEL_CONFIGS)
        list(APPEND configs ${alt})
      endif()
    endforeach()
  endif()
  get_filename_component(template "${PROJECT_SOURCE_DIR}/${I_TEMPLATE}" ABSOLUTE)
  get_filename_component(stem "${template}" NAME_WE)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${header}" "${template}")
  set(files ${${out}})
  foreach(CONFIG IN LISTS configs)
    foreach(ELEMENT IN LISTS I_ELEMENTS)
      if(ELEMENT STREQUAL "__nv_bfloat16")
        set(IS_BF16 true)
        set(tag bf16)
      elseif(ELEMENT STREQUAL "__nv_fp8_e4m3")
        set(IS_BF16 false)
        set(tag fp8)
      else()
        set(IS_BF16 false)
        set(tag fp16)
      endif()
      set(file "${PROJECT_BINARY_DIR}/kernels/${stem}_${CONFIG}_${tag}.cu")
      configure_file("${template}" "${file}" @ONLY)
      list(APPEND files "${file}")
    endforeach()
  endforeach()
  set(${out} "${files}" PARENT_SCOPE)
endfunction()

# attnprof_kernel_family(<family>): the family's folder src/kernels/<family>/,
# through its family.cmake (which calls attnprof_add_kernels when the CUDA
# kernels are built, ATTNPROF_HAVE_CUDA).
macro(attnprof_kernel_family family)
  include("${PROJECT_SOURCE_DIR}/src/kernels/${family}/family.cmake")
endmacro()

# After every family: a requested alternative that no family lists is an error.
function(attnprof_check_kernel_configs)
  get_property(known GLOBAL PROPERTY ATTNPROF_KERNEL_CONFIGS_KNOWN)
  foreach(name IN LISTS ATTNPROF_KERNEL_CONFIGS)
    if(NOT name STREQUAL "all" AND NOT name IN_LIST known)
      string(REPLACE ";" ", " valid "${known}")
      message(FATAL_ERROR "attnprof: ATTNPROF_KERNEL_CONFIGS names '${name}', which no kernel family lists "
                          "as an alternative (valid: all, ${valid})")
    endif()
  endforeach()
endfunction()
