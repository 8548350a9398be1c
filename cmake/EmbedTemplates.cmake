# Embeds every file under templates/ into the library as bytes, keyed by its logical path
# (the path relative to templates/). An installed moejit needs no source tree, and keys never
# depend on where the checkout lives.
set(MOEJIT_TEMPLATE_ROOT ${PROJECT_SOURCE_DIR}/templates)

function(moejit_embed_templates out_cpp)
  file(GLOB_RECURSE files CONFIGURE_DEPENDS RELATIVE ${MOEJIT_TEMPLATE_ROOT}
       ${MOEJIT_TEMPLATE_ROOT}/*.cuh ${MOEJIT_TEMPLATE_ROOT}/*.cu)
  list(SORT files)
  set(abs_files "")
  foreach(f IN LISTS files)
    list(APPEND abs_files ${MOEJIT_TEMPLATE_ROOT}/${f})
  endforeach()
  add_custom_command(
    OUTPUT ${out_cpp}
    COMMAND ${CMAKE_COMMAND} -DROOT=${MOEJIT_TEMPLATE_ROOT} "-DFILES=${files}" -DOUT=${out_cpp}
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_templates_script.cmake
    DEPENDS ${abs_files} ${PROJECT_SOURCE_DIR}/cmake/embed_templates_script.cmake
    COMMENT "Embedding kernel templates"
    VERBATIM)
endfunction()
