# Embeds the agent's JSON Schemas (schemas/*.schema.json) into libqloom, so a
# qloom binary or library validates its artifacts without the source tree:
# generated/qloom/schemas_embedded.cpp defines qloom::agent::detail::embedded_schemas().
file(GLOB QLOOM_SCHEMA_FILES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/schemas/*.schema.json)
set(QLOOM_SCHEMAS_CPP ${PROJECT_BINARY_DIR}/generated/qloom/schemas_embedded.cpp)
add_custom_command(
  OUTPUT ${QLOOM_SCHEMAS_CPP}
  COMMAND ${CMAKE_COMMAND} -DOUT=${QLOOM_SCHEMAS_CPP} -DSCHEMA_DIR=${PROJECT_SOURCE_DIR}/schemas
          -P ${PROJECT_SOURCE_DIR}/cmake/embed_schemas.cmake
  DEPENDS ${QLOOM_SCHEMA_FILES} ${PROJECT_SOURCE_DIR}/cmake/embed_schemas.cmake
  COMMENT "Embedding JSON schemas")
