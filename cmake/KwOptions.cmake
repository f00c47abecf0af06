# kw::options: the one INTERFACE target every kernelwatch target links for the
# language level and the warning set.
add_library(kw_options INTERFACE)
add_library(kw::options ALIAS kw_options)
target_compile_features(kw_options INTERFACE cxx_std_20)
target_compile_options(kw_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wshadow -Wnon-virtual-dtor -Wold-style-cast -Wundef>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${KW_WERROR}>>:-Werror>
  # A unity build (the up and ci presets) includes every .cpp into another file, and
  # GCC then takes a class with a member of an anonymous namespace's type for
  # one in a header.
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${CMAKE_UNITY_BUILD}>>:-Wno-subobject-linkage>)
set(CMAKE_CXX_EXTENSIONS OFF)

# ccache, where installed, serves what was compiled before: a rebuild after a
# branch switch, a second checkout, a CI machine that keeps its cache.
option(KW_CCACHE "Compile through ccache where it is installed" ON)
find_program(KW_CCACHE_PROGRAM ccache)
if(KW_CCACHE AND KW_CCACHE_PROGRAM AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${KW_CCACHE_PROGRAM})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${KW_CCACHE_PROGRAM})
endif()

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

# kw_discover_tests(TARGET FILTER LABEL [TIMEOUT s] [COST c] [FIXTURE f ENV VAR=VALUE]):
# the tests of a binary that holds several groups, the group's by GoogleTest's
# FILTER, carrying its LABEL, timeout and cost (ctest starts costlier tests
# first), and needing ctest's FIXTURE with ENV set.
function(kw_discover_tests target filter label)
  cmake_parse_arguments(ARG "" "TIMEOUT;COST;FIXTURE;ENV" "" ${ARGN})
  if(NOT ARG_TIMEOUT)
    set(ARG_TIMEOUT 300)
  endif()
  if(NOT ARG_COST)
    set(ARG_COST 0)
  endif()
  set(properties LABELS ${label} TIMEOUT ${ARG_TIMEOUT} COST ${ARG_COST})
  if(ARG_FIXTURE)
    list(APPEND properties FIXTURES_REQUIRED ${ARG_FIXTURE} ENVIRONMENT "${ARG_ENV}")
  endif()
  gtest_discover_tests(${target} TEST_FILTER ${filter} PROPERTIES ${properties} DISCOVERY_TIMEOUT 60)
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
