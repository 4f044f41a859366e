# vkmoe_shader(NAME SOURCE [DEFINE ...]) compiles shaders/SOURCE with the given
# -D defines into SPIR-V embedded under NAME (see engine/shaders.h).
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

# Shader list (one line per compiled variant):
