# -DINPUT=file -DOUTPUT=header -DNAME=identifier -DNAMESPACE=ns: writes a
# header holding the file's text as `inline constexpr std::string_view NAME`,
# so a binary carries it instead of looking for it on disk.
file(READ ${INPUT} text)
string(FIND "${text}" ")kwtext\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "${INPUT} holds the raw string's closing delimiter )kwtext\"")
endif()
file(WRITE ${OUTPUT} "// Generated from ${INPUT} by cmake/embed_text.cmake. Do not edit.\n#pragma once\n#include <string_view>\n\nnamespace ${NAMESPACE} {\n\ninline constexpr std::string_view ${NAME} = R\"kwtext(${text})kwtext\";\n\n}  // namespace ${NAMESPACE}\n")
