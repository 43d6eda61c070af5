# The scaled masked softmax family (attnprof::scaled_masked_softmax, _backward):
# plain CUDA, sm_80 and sm_90a machine code.
if(ATTNPROF_HAVE_CUDA)
  file(GLOB _sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_LIST_DIR}/*.cu")
  attnprof_add_kernels(attnprof_kernels_scaled_masked_softmax ARCHS 80 90a SOURCES ${_sources})
endif()
