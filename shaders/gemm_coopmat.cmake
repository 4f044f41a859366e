# Cooperative-matrix GEMMs: gemm_coopmat_<type>, the expert-grouped
# gemm_coopmat_ids_<type> and its gate/up form gemm_coopmat_glu_<type> (KHR, engine/vulkan/gemm_coopmat.cpp), gemm_cm2_<type>
# and gemm_cm2_ids_<type> (NV_cooperative_matrix2, gemm_coopmat2.cpp).
# Compiled with glslang 15 (VKMOE_GLSLANG15, built by scripts/build_glslang.sh)
# since Debian 12's glslc has neither extension; skipped when it is absent.
# Run with -P (cmake -DSPV=in -DOUT=out -P this file) it converts SPIR-V to the
# C initializer that glslc -mfmt=c would write.
if(CMAKE_SCRIPT_MODE_FILE)
  file(READ ${SPV} hex HEX)
  string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1," words "${hex}")
  file(WRITE ${OUT} "{${words}}\n")
  return()
endif()
if(NOT VKMOE_HAVE_COOPMAT_SHADERS)
  return()
endif()
# glslangValidator writes no depfile: every shader include is a dependency.
file(GLOB VKMOE_GLSL_INCLUDES CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/shaders/*.glsl)
function(vkmoe_coopmat_shader NAME SRC)
  set(out ${CMAKE_BINARY_DIR}/shaders/${NAME}.spv.h)
  set(spv ${CMAKE_BINARY_DIR}/shaders/${NAME}.spv)
  set(defs "")
  foreach(d ${ARGN})
    list(APPEND defs "-D${d}")
  endforeach()
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${VKMOE_GLSLANG15} -V --target-env vulkan1.3 ${defs} -I${CMAKE_SOURCE_DIR}/shaders
            -o ${spv} ${CMAKE_SOURCE_DIR}/shaders/${SRC} > /dev/null
    COMMAND ${CMAKE_COMMAND} -DSPV=${spv} -DOUT=${out} -P ${CMAKE_CURRENT_FUNCTION_LIST_FILE}
    DEPENDS ${CMAKE_SOURCE_DIR}/shaders/${SRC} ${VKMOE_GLSL_INCLUDES} ${CMAKE_CURRENT_FUNCTION_LIST_FILE}
    COMMENT "glslang15 ${SRC} -> ${NAME}")
  set_property(GLOBAL APPEND PROPERTY VKMOE_SHADER_NAMES ${NAME})
  set_property(GLOBAL APPEND PROPERTY VKMOE_SHADER_OUTPUTS ${out})
endfunction()
foreach(t f32:1 f16:2 bf16:3 q8_0:4 q4_k:5 q5_k:6 q6_k:7)
  string(REPLACE ":" ";" tv ${t})
  list(GET tv 0 tname)
  list(GET tv 1 tid)
  vkmoe_coopmat_shader(gemm_coopmat_${tname} gemm_coopmat.comp WTYPE=${tid})
  vkmoe_coopmat_shader(gemm_coopmat_ids_${tname} gemm_coopmat.comp WTYPE=${tid} INDEXED=1)
  vkmoe_coopmat_shader(gemm_coopmat_glu_${tname} gemm_coopmat.comp WTYPE=${tid} INDEXED=1 GLU=1)
  vkmoe_coopmat_shader(gemm_coopmat_x16_${tname} gemm_coopmat.comp WTYPE=${tid} X_F16=1)
  vkmoe_coopmat_shader(gemm_coopmat_ids_x16_${tname} gemm_coopmat.comp WTYPE=${tid} INDEXED=1 X_F16=1)
  vkmoe_coopmat_shader(gemm_coopmat_glu_y16_${tname} gemm_coopmat.comp WTYPE=${tid} INDEXED=1 GLU=1 Y_F16=1)
  vkmoe_coopmat_shader(gemm_cm2_${tname} gemm_cm2.comp WTYPE=${tid})
  vkmoe_coopmat_shader(gemm_cm2_ids_${tname} gemm_cm2.comp WTYPE=${tid} INDEXED=1)
endforeach()
