# flashserve_add_test(<name> SOURCES <files...> LIBS <targets...> [LABELS <labels...>])
# One GoogleTest binary; each TEST becomes its own ctest entry. A test that calls GTEST_SKIP()
# (GPU tests on a machine without a GPU, model tests without the model file) is reported by
# ctest as "Not Run / Skipped", never as passed.
include(GoogleTest)

# Test code (the test's own translation units, not the libraries under test) compiles at -O1,
# and at -O0 in the sanitizer builds: gtest/gmock-heavy test files spend most of their compile
# time in the optimizer (engine_test.cc: 8.4 s at -O2, 5.9 at -O1; under ASan + UBSan 14.4 s
# at -O1, 7.6 at -O0; gcc 12, 2026-12-02), while their run time is the libraries'. The
# libraries keep the build type's flags, so what runs under test is what ships. Floating point
# is unchanged by the level: ISO C++ mode (-std=c++20) keeps -ffp-contract=off.
function(flashserve_test_optimization target)
  if(FLASHSERVE_SANITIZE)
    set(_level -O0)
  else()
    set(_level -O1)
  endif()
  target_compile_options(${target} PRIVATE
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:RelWithDebInfo>>:${_level}>)
endfunction()

function(flashserve_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
  flashserve_test_optimization(${name})
  target_compile_definitions(${name} PRIVATE
    FLASHSERVE_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    FLASHSERVE_BINARY_DIR="${PROJECT_BINARY_DIR}")
  # A list inside PROPERTIES must keep its separators escaped, or only the first label sticks.
  string(REPLACE ";" "\\;" _labels "${T_LABELS}")
  gtest_discover_tests(${name}
    DISCOVERY_MODE PRE_TEST
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
    PROPERTIES SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]" LABELS "${_labels}"
    DISCOVERY_TIMEOUT 60)
endfunction()
