# kw::options: the one INTERFACE target every kernelwatch target links for the
# language level and the warning set.
add_library(kw_options INTERFACE)
add_library(kw::options ALIAS kw_options)
target_compile_features(kw_options INTERFACE cxx_std_20)
target_compile_options(kw_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wundef>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${KW_WERROR}>>:-Werror>
  # A unity build (the up preset) includes every .cpp into another file, and
  # GCC then takes a class with a member of an anonymous namespace's type for
  # one in a header.
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${CMAKE_UNITY_BUILD}>>:-Wno-subobject-linkage>)
set(CMAKE_CXX_EXTENSIONS OFF)

# kw_add_test(NAME LABEL SOURCES... LIBS ...): one GoogleTest executable whose
# tests carry LABEL for `ctest -L`.
function(kw_add_test name label)
  cmake_parse_arguments(ARG "" "TIMEOUT" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE kw::options GTest::gtest GTest::gtest_main ${ARG_LIBS})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  gtest_discover_tests(${name}
    PROPERTIES LABELS ${label} TIMEOUT ${ARG_TIMEOUT}
    DISCOVERY_TIMEOUT 60)
endfunction()

# kw_embed_text(TARGET FILE NAME NAMESPACE HEADER): TARGET's sources may
# include HEADER (in the build tree), which holds FILE's text as NAME.
function(kw_embed_text target file name namespace header)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/generated/${header})
  add_custom_command(
    OUTPUT ${out}
    COMMAND ${CMAKE_COMMAND} -DINPUT=${file} -DOUTPUT=${out} -DNAME=${name} -DNAMESPACE=${namespace}
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_text.cmake
    DEPENDS ${file} ${PROJECT_SOURCE_DIR}/cmake/embed_text.cmake
    COMMENT "Embedding ${file}"
    VERBATIM)
  target_sources(${target} PRIVATE ${out})
  target_include_directories(${target} PRIVATE ${CMAKE_CURRENT_BINARY_DIR}/generated)
endfunction()
