# vkmoe_shader(NAME SOURCE [DEFINE ...]) compiles shaders/SOURCE with the given
# -D defines into SPIR-V embedded under NAME (see engine/vulkan/shaders.h).
function(vkmoe_shader NAME SRC)
  set(out ${CMAKE_BINARY_DIR}/shaders/${NAME}.spv.h)
  set(defs "")
  foreach(d ${ARGN})
    list(APPEND defs "-D${d}")
  endforeach()
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${GLSLC} --target-env=vulkan1.2 -O -mfmt=c ${defs}
            -I${CMAKE_SOURCE_DIR}/shaders -MD -MF ${out}.d -o ${out}
            ${CMAKE_SOURCE_DIR}/shaders/${SRC}
    DEPENDS ${CMAKE_SOURCE_DIR}/shaders/${SRC}
    DEPFILE ${out}.d
    COMMENT "glslc ${SRC} -> ${NAME}")
  set_property(GLOBAL APPEND PROPERTY VKMOE_SHADER_NAMES ${NAME})
  set_property(GLOBAL APPEND PROPERTY VKMOE_SHADER_OUTPUTS ${out})
endfunction()
file(MAKE_DIRECTORY ${CMAKE_BINARY_DIR}/shaders)

# Every GPU weight type as name:WTYPE (ids: shaders/wtype.glsl; engine/vulkan/weight_types.h).
set(VKMOE_WEIGHT_TYPES f32:1 f16:2 bf16:3 q8_0:4 q4_k:5 q5_k:6 q6_k:7 q4_0:8 q4_1:9 q5_0:10 q5_1:11 iq4_nl:12
    mxfp4:13 q2_k:14 q3_k:15 iq4_xs:16)
# vkmoe_shader_per_type(PREFIX SOURCE [DEFINE ...]): PREFIX_<type> for every weight type.
function(vkmoe_shader_per_type PREFIX SRC)
  foreach(t ${VKMOE_WEIGHT_TYPES})
    string(REPLACE ":" ";" tv ${t})
    list(GET tv 0 tname)
    list(GET tv 1 tid)
    vkmoe_shader(${PREFIX}_${tname} ${SRC} WTYPE=${tid} ${ARGN})
  endforeach()
endfunction()

# Shader list (one line per compiled variant):
vkmoe_shader(rms_norm rms_norm.comp)
vkmoe_shader(rms_norm_h rms_norm.comp F16_COPY=1)
vkmoe_shader(axpy axpy.comp)
vkmoe_shader(swiglu swiglu.comp)
# vkmoe_matvec_variants(PREFIX SOURCE name:WTYPE ...) builds PREFIX_<name> and
# the indexed-expert PREFIX_ids_... variant (matvec_q4_k, matvec_ids_q4_k, ...).
# WTYPE ids: shaders/wtype.glsl.
function(vkmoe_matvec_variants PREFIX SRC)
  foreach(t ${ARGN})
    string(REPLACE ":" ";" tv ${t})
    list(GET tv 0 tname)
    list(GET tv 1 tid)
    string(REPLACE "matvec" "matvec_ids" ids_prefix ${PREFIX})
    vkmoe_shader(${PREFIX}_${tname} ${SRC} WTYPE=${tid})
    vkmoe_shader(${ids_prefix}_${tname} ${SRC} WTYPE=${tid} INDEXED=1)
    if(PREFIX STREQUAL "matvec")
      # Fused decode variants: SwiGLU on the input, router top-k of the output.
      vkmoe_shader(matvec_glu_${tname} ${SRC} WTYPE=${tid} GLU=1)
      vkmoe_shader(matvec_ids_glu_${tname} ${SRC} WTYPE=${tid} INDEXED=1 GLU=1)
      vkmoe_shader(matvec_topk_${tname} ${SRC} WTYPE=${tid} TAIL_TOPK=1)
      # ... with the RMS norm of its input folded in (the decode router).
      vkmoe_shader(matvec_topk_norm_${tname} ${SRC} WTYPE=${tid} TAIL_TOPK=1 NORM=1)
    elseif(PREFIX STREQUAL "matvec_q8x")
      # SwiGLU on the input before it is quantized (the experts' down product).
      vkmoe_shader(matvec_q8x_glu_${tname} ${SRC} WTYPE=${tid} GLU=1)
      vkmoe_shader(matvec_ids_q8x_glu_${tname} ${SRC} WTYPE=${tid} INDEXED=1 GLU=1)
    endif()
  endforeach()
endfunction()
vkmoe_matvec_variants(matvec matvec.comp ${VKMOE_WEIGHT_TYPES})
vkmoe_shader(bandwidth bandwidth.comp)
vkmoe_shader(moe_combine_norm moe_combine_norm.comp)
# int8-x matvec with packed integer dot products; see engine/vulkan/vk_matvec.h
vkmoe_matvec_variants(matvec_q8x matvec_q8x.comp q8_0:4 q4_k:5 q5_k:6 q6_k:7)
# Batched forward pass (prompt processing): one include per mechanism.
include(${CMAKE_CURRENT_LIST_DIR}/gemm.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/gemm_int8.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/gemm_coopmat.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/attention.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/head_matmul.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/moe.cmake OPTIONAL)
include(${CMAKE_CURRENT_LIST_DIR}/trunk.cmake OPTIONAL)
