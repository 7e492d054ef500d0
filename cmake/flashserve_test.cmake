# flashserve_add_test(<name> SOURCES <files...> LIBS <targets...> [LABELS <labels...>])
# One GoogleTest binary; each TEST becomes its own ctest entry. A test that calls GTEST_SKIP()
# (GPU tests on a machine without a GPU, model tests without the model file) is reported by
# ctest as "Not Run / Skipped", never as passed.
include(GoogleTest)
function(flashserve_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main GTest::gmock)
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
