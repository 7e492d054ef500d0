# Writes OUTPUT (the build tree's generated version header) from version.h.in at build time,
# so that the commit is the one built, not the one configured. configure_file rewrites the header only when its text changes,
# so an unchanged commit rebuilds nothing.
#   cmake -DSOURCE_DIR=... -DOUTPUT=... -DVERSION=... -DCOMMIT_OVERRIDE=... -P write_version.cmake
if(COMMIT_OVERRIDE)
  set(FLASHSERVE_GIT_COMMIT "${COMMIT_OVERRIDE}")
else()
  execute_process(COMMAND git rev-parse --short=12 HEAD WORKING_DIRECTORY "${SOURCE_DIR}"
                  OUTPUT_VARIABLE FLASHSERVE_GIT_COMMIT OUTPUT_STRIP_TRAILING_WHITESPACE
                  ERROR_QUIET RESULT_VARIABLE git_rc)
  if(NOT git_rc EQUAL 0 OR FLASHSERVE_GIT_COMMIT STREQUAL "")
    set(FLASHSERVE_GIT_COMMIT "unknown")
  endif()
endif()
set(PROJECT_VERSION "${VERSION}")
configure_file("${SOURCE_DIR}/cmake/version.h.in" "${OUTPUT}" @ONLY)
