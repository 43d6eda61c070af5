# The portable flash family (attnprof::flash_attention, _backward): mma.sync
# and cp.async kernels, sm_80 machine code (which every 8.x device runs) and
# sm_90a (so Hopper runs native code rather than JIT-compiled PTX).
if(ATTNPROF_HAVE_CUDA)
  file(GLOB _sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_LIST_DIR}/*.cu")
  attnprof_add_kernels(attnprof_kernels_flash_attention ARCHS 80 90a SOURCES ${_sources})
endif()
