# The Hopper flash family (attnprof::flash_attention_sm90, _backward_sm90 and
# the by-name _config operators): wgmma, TMA and setmaxnreg, sm_90a machine
# code only. One generated object per configuration and dtype, from the
# configuration lists in flash_sm90_traits.h and flash_bwd_sm90_traits.h.
option(ATTNPROF_SM90_KERNELS "With the CUDA kernels, also build the Hopper-only (sm_90a) ones" ON)
# Development aid: an mbarrier wait in the sm_90a kernels that lasts over 10 s
# traps (a pipeline deadlock becomes a launch error instead of a hang).
option(ATTNPROF_SM90_HANG_TRAP "Trap on mbarrier waits over 10 s in the sm_90a kernels" OFF)
set(_instances "")
attnprof_config_instances(_instances HEADER src/kernels/flash_sm90/flash_sm90_traits.h
  CONFIGS Sm90FwdConfigs ALTERNATIVES Sm90FwdAlternatives
  TEMPLATE src/kernels/flash_sm90/fwd_sm90_instance.cu.in ELEMENTS __nv_bfloat16 __half)
attnprof_config_instances(_instances HEADER src/kernels/flash_sm90/flash_sm90_traits.h
  CONFIGS Sm90FwdFp8Configs ALTERNATIVES Sm90FwdFp8Alternatives
  TEMPLATE src/kernels/flash_sm90/fwd_sm90_instance.cu.in ELEMENTS __nv_fp8_e4m3)
attnprof_config_instances(_instances HEADER src/kernels/flash_sm90/flash_bwd_sm90_traits.h
  CONFIGS Sm90BwdConfigs ALTERNATIVES Sm90BwdAlternatives
  TEMPLATE src/kernels/flash_sm90/bwd_sm90_instance.cu.in ELEMENTS __nv_bfloat16 __half)
if(ATTNPROF_HAVE_CUDA AND ATTNPROF_SM90_KERNELS)
  file(GLOB _sources CONFIGURE_DEPENDS "${CMAKE_CURRENT_LIST_DIR}/*.cu")
  attnprof_add_kernels(attnprof_kernels_flash_sm90 ARCHS 90a SOURCES ${_sources} ${_instances})
  if(ATTNPROF_SM90_HANG_TRAP)
    target_compile_definitions(attnprof_kernels_flash_sm90 PRIVATE ATTNPROF_SM90_HANG_TRAP=1)
  endif()
  # The operators' implementations (api.cpp) and the custom-flash-sm90 variant look for it.
  target_compile_definitions(attnprof_core PUBLIC ATTNPROF_HAVE_SM90_KERNELS=1)
endif()
